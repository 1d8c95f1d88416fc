// kiln's channels-last max pool (max_pool_step.h): the reference kernel's bits on every ISA this
// CPU runs and at any thread count, NaN payloads, signed zeros, infinities and windows without a
// tap included; what it says of the bound; and that the CPU device runs it for a MaxPool over a
// channels-last input, keeping a NaN window NaN.
#include "kiln/hal/cpu/max_pool_step.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kiln/hal/cpu/cpu_device.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kMax = std::numeric_limits<float>::max();

// A quiet NaN with its own payload.
float nan_with(uint32_t payload) { return std::bit_cast<float>(0x7fc00000u | (payload & 0xffff)); }

struct Case {
  std::string name;
  int64_t n, c, h, w;
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
  bool ceil = false;  // one more output than floor gives along each dim
};

ConcreteShape output_dims(const Case& k) {
  ConcreteShape out{k.n, k.c};
  const int64_t in[2] = {k.h, k.w};
  for (size_t i = 0; i < 2; ++i) {
    const int64_t extent = k.dilations[i] * (k.kernel[i] - 1) + 1;
    const int64_t span = in[i] + k.pads_begin[i] + k.pads_end[i] - extent;
    out.push_back(span / k.strides[i] + 1 + (k.ceil && span % k.strides[i] != 0 ? 1 : 0));
  }
  return out;
}

MaxPoolShape shape_of(const Case& k) {
  const ConcreteShape out = output_dims(k);
  MaxPoolShape s;
  s.n = k.n, s.c = k.c, s.h = k.h, s.w = k.w, s.out_h = out[2], s.out_w = out[3];
  for (size_t i = 0; i < 2; ++i) {
    s.kernel[i] = k.kernel[i];
    s.strides[i] = k.strides[i];
    s.dilations[i] = k.dilations[i];
    s.pads[i] = k.pads_begin[i];
  }
  return s;
}

// [N, C, H, W] <-> [N, H, W, C].
std::vector<float> to_channels_last(const Tensor& t) {
  const ConcreteShape& d = t.shape();
  const auto v = t.values<float>();
  std::vector<float> out(v.size());
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t c = 0; c < d[1]; ++c)
      for (int64_t p = 0; p < d[2] * d[3]; ++p)
        out[static_cast<size_t>((n * d[2] * d[3] + p) * d[1] + c)] =
            v[static_cast<size_t>((n * d[1] + c) * d[2] * d[3] + p)];
  return out;
}

// Random values with NaNs of distinct payloads, infinities and zeros of both signs sprinkled in.
Tensor awkward_input(const Case& k, uint32_t seed) {
  Tensor x = random_tensor({k.n, k.c, k.h, k.w}, seed, -4.0f, 4.0f);
  auto v = x.mutable_values<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + seed;
    switch (h % 97) {
      case 0: v[i] = nan_with(h >> 8); break;
      case 1: v[i] = kInf; break;
      case 2: v[i] = -kInf; break;
      case 3: v[i] = 0.0f; break;
      case 4: v[i] = -0.0f; break;
      default: break;
    }
  }
  return x;
}

std::vector<float> run_kernel(const MaxPoolShape& s, const std::vector<float>& x, Isa isa,
                              int threads, float bound, bool* within) {
  std::vector<float> y(static_cast<size_t>(s.n * s.out_h * s.out_w * s.c), -7.0f);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  *within = max_pool_channels_last(s, x.data(), y.data(), bound, isa);
  omp_set_num_threads(saved);
  return y;
}

int64_t bit_mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i)
    n += std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]);
  return n;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"resnet_stem_3x3_s2", 2, 64, 17, 15, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
      {"channel_tail", 1, 21, 9, 10, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
      {"three_channels", 3, 3, 8, 7, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}},
      {"stride_one_same", 1, 16, 6, 6, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
      {"dilated_asymmetric", 2, 24, 11, 12, {3, 2}, {2, 1}, {2, 3}, {2, 0}, {1, 2}},
      {"ceil_mode", 1, 40, 8, 9, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, true},
      // Dilated taps straddle the input: some windows have no tap inside.
      {"windows_without_taps", 1, 17, 2, 2, {2, 2}, {1, 1}, {3, 3}, {2, 2}, {2, 2}},
  };
  return all;
}

TEST(MaxPoolStepTest, GivesTheReferenceKernelsBitsOnEveryIsaAndThreadCount) {
  for (const Case& k : cases()) {
    const MaxPoolShape s = shape_of(k);
    const Tensor x = awkward_input(k, 5);
    PoolRef p;
    p.kernel = k.kernel;
    p.strides = k.strides;
    p.dilations = k.dilations;
    p.pads_begin = k.pads_begin;
    p.pads_end = k.pads_end;
    p.out = output_dims(k);
    if (k.ceil) {
      // ref_pool finds ceil_mode from the output dims.
      ASSERT_GT(p.out[2], (k.h - 3) / 2 + 1);
    }
    const std::vector<float> expected = to_channels_last(ref_pool(x, p));
    const std::vector<float> xs = to_channels_last(x);
    for (Isa isa : runnable_isas()) {
      for (int threads : {1, 2, 3}) {
        SCOPED_TRACE(fmt::format("{} on {}, {} thread(s)", k.name, isa_name(isa), threads));
        bool within = false;
        const std::vector<float> y = run_kernel(s, xs, isa, threads, kMax, &within);
        EXPECT_EQ(bit_mismatches(y, expected), 0);
      }
    }
  }
}

// The pool says whether every value it wrote is finite with |y| <= bound: of the output, not the
// input (a value beyond the bound that no window keeps does not count).
TEST(MaxPoolStepTest, SaysWhetherEveryOutputIsWithinTheBound) {
  const Case k{"2x2_s2", 1, 19, 6, 6, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}};
  const MaxPoolShape s = shape_of(k);
  const std::vector<float> clean = to_channels_last(random_tensor({1, 19, 6, 6}, 7, -1.0f, 1.0f));
  // Channel 18 (the AVX2 and AVX-512 tails) of pixel (3, 4), and channel 2 of pixel (0, 0).
  const size_t tail_at = (3 * 6 + 4) * 19 + 18, head_at = 2;
  for (Isa isa : runnable_isas()) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("{}, {} thread(s)", isa_name(isa), threads));
      bool within = false;
      run_kernel(s, clean, isa, threads, 10.0f, &within);
      EXPECT_TRUE(within);
      for (size_t at : {tail_at, head_at}) {
        for (float bad : {nan_with(3), kInf, 10.5f, -kInf}) {
          std::vector<float> x = clean;
          x[at] = bad;
          run_kernel(s, x, isa, threads, 10.0f, &within);
          // -inf is no window's max (its window holds finite values): within.
          EXPECT_EQ(within, bad == -kInf) << at << " holds " << bad;
        }
        std::vector<float> x = clean;
        x[at] = -10.5f;  // beyond the bound, but no window's max
        run_kernel(s, x, isa, threads, 10.0f, &within);
        EXPECT_TRUE(within) << at;
      }
    }
  }
  // Windows without a tap give the lowest finite float: within FLT_MAX, not within 10.
  const Case empty = cases().back();
  const std::vector<float> x = to_channels_last(random_tensor({1, 17, 2, 2}, 9));
  for (Isa isa : runnable_isas()) {
    bool within = false;
    run_kernel(shape_of(empty), x, isa, 2, kMax, &within);
    EXPECT_TRUE(within) << isa_name(isa);
    run_kernel(shape_of(empty), x, isa, 2, 10.0f, &within);
    EXPECT_FALSE(within) << isa_name(isa);
  }
}

int64_t nan_count(const Tensor& t) {
  int64_t n = 0;
  for (float v : t.values<float>()) n += std::isnan(v);
  return n;
}

// An NHWC graph input transposed to NCHW (as tf2onnx exports) is stored channels last, and the
// MaxPool reading it runs kiln's kernel: x[2,12,12,24] -> Transpose -> MaxPool 3x3 stride 2 pad 1
// -> y[2,24,6,6]. A NaN in sample 1 makes its windows NaN, as the reference has them, and sample
// 0 keeps its bits.
TEST(MaxPoolStepTest, TheCpuDeviceRunsItOnAChannelsLastInputAndKeepsNaNWindowsNaN) {
  SpecBuilder s;
  const int32_t x = s.input("x", {2, 12, 12, 24});
  const int32_t nchw = s.value("nchw", {2, 24, 12, 12});
  s.dispatch("to_nchw", "Transpose", {x}, {nchw},
             attrs({{"perm", std::vector<int64_t>{0, 3, 1, 2}}}));
  const int32_t y = s.output("y", {2, 24, 6, 6});
  Attributes m;
  m.set("kernel_shape", std::vector<int64_t>{3, 3});
  m.set("strides", std::vector<int64_t>{2, 2});
  m.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  s.dispatch("pool", "MaxPool", {nchw}, {y}, m);
  auto device = create_cpu_device({});
  ASSERT_TRUE(device.ok());
  auto exe = (*device)->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  const std::string pool = fmt::format("{}", fmt::join((*exe)->describe_dispatch(1), "\n"));
  EXPECT_NE(pool.find("max pool kiln"), std::string::npos) << pool;

  auto expected_of = [&](const Tensor& in) {
    PoolRef p;
    p.kernel = {3, 3};
    p.strides = {2, 2};
    p.pads_begin = p.pads_end = {1, 1};
    p.dilations = {1, 1};
    p.out = {2, 24, 6, 6};
    return ref_pool(
        reference("Transpose", {in}, attrs({{"perm", std::vector<int64_t>{0, 3, 1, 2}}})), p);
  };
  const Tensor clean_x = random_tensor({2, 12, 12, 24}, 13);
  auto clean = run_program(**exe, s.spec(), {clean_x});
  ASSERT_TRUE(clean.ok()) << clean.status().to_string();
  EXPECT_EQ(nan_count((*clean)[0]), 0);
  EXPECT_TRUE(identical((*clean)[0], expected_of(clean_x)));

  Tensor bad_x = clean_x.clone();
  bad_x.mutable_values<float>()[((12 + 5) * 12 + 7) * 24 + 3] = std::nanf("");
  auto bad = run_program(**exe, s.spec(), {bad_x});
  ASSERT_TRUE(bad.ok()) << bad.status().to_string();
  const Tensor want = slice_batch(expected_of(bad_x), 1), got = slice_batch((*bad)[0], 1);
  ASSERT_GT(nan_count(want), 0);
  EXPECT_EQ(nan_count(got), nan_count(want));
  EXPECT_TRUE(all_close(got, want));
  EXPECT_TRUE(identical(slice_batch((*bad)[0], 0), slice_batch((*clean)[0], 0)));
}

}  // namespace
}  // namespace kiln::hal::cpu
