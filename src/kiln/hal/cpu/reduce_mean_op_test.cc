// ReduceMean on the CPU backend: over the spatial dims of [N, C, ...] or of a channels-last
// [N, ..., C] it runs kiln's global average (pool_op.cc), against the mean computed here in
// double; other axes keep the portable kernel.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/hal/cpu/cpu_device_for_tests.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

// The mean of x over `reduced` dims, in double, in the order of x's elements.
std::vector<double> mean_over(const Tensor& x, const std::vector<bool>& reduced) {
  const ConcreteShape& dims = x.shape();
  int64_t outputs = 1, count = 1;
  for (size_t d = 0; d < dims.size(); ++d) (reduced[d] ? count : outputs) *= dims[d];
  std::vector<double> sum(static_cast<size_t>(outputs), 0.0);
  const auto v = x.values<float>();
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    int64_t rest = i, out = 0, scale = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      const int64_t at = rest % dims[d];
      rest /= dims[d];
      if (!reduced[d]) {
        out += at * scale;
        scale *= dims[d];
      }
    }
    sum[static_cast<size_t>(out)] += v[static_cast<size_t>(i)];
  }
  for (double& s : sum) s /= static_cast<double>(count);
  return sum;
}

struct MeanCase {
  std::string name;
  ConcreteShape x;
  std::vector<int64_t> axes;
  bool keepdims = true;
  bool axes_input = false;  // opset 18: the axes as input 1, a constant
  bool after_conv = false;  // x from a conv (stored channels last or blocked)
  bool fast = true;         // kiln's global average (else the portable kernel)
};

void PrintTo(const MeanCase& c, std::ostream* os) { *os << c.name; }

class CpuReduceMeanTest : public ::testing::TestWithParam<MeanCase> {};

// The result within float rounding of the exact mean, a NaN in one pixel making that sample's
// channel NaN and nothing else; the kernel named in the plan.
TEST_P(CpuReduceMeanTest, MatchesTheMeanInDouble) {
  const MeanCase& c = GetParam();
  const auto rank = static_cast<int64_t>(c.x.size());
  std::vector<bool> reduced(c.x.size(), false);
  for (int64_t a : c.axes) reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  ConcreteShape out;
  for (size_t d = 0; d < c.x.size(); ++d) {
    if (!reduced[d] || c.keepdims) out.push_back(reduced[d] ? 1 : c.x[d]);
  }
  Tensor x = random_tensor(c.x, 81);
  SpecBuilder s;
  const int32_t xi = s.input("x", c.x);
  int32_t src = xi;
  Tensor mean_in = x;
  if (c.after_conv) {
    // A conv whose weights copy each channel: its output is x.
    std::vector<double> w(static_cast<size_t>(c.x[1] * c.x[1]), 0.0);
    for (int64_t i = 0; i < c.x[1]; ++i) w[static_cast<size_t>(i * c.x[1] + i)] = 1.0;
    src = s.value("conv_out", c.x);
    s.dispatch("conv", "Conv", {xi, s.constant("w", f32({c.x[1], c.x[1], 1, 1}, w))}, {src});
  } else {
    x.mutable_values<float>()[5] = std::numeric_limits<float>::quiet_NaN();
    mean_in = x;
  }
  Attributes a;
  a.set("keepdims", int64_t{c.keepdims ? 1 : 0});
  std::vector<int32_t> inputs{src};
  if (c.axes_input) {
    inputs.push_back(s.constant("axes", i64({static_cast<int64_t>(c.axes.size())}, c.axes)));
  } else {
    a.set("axes", c.axes);
  }
  s.dispatch("mean", "ReduceMean", inputs, {s.output("y", out)}, a);
  auto exe = default_cpu_device()->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  const std::string steps =
      fmt::format("{}", fmt::join((*exe)->describe_dispatch(c.after_conv ? 1 : 0), "\n"));
  EXPECT_EQ(steps.find("global average kiln") != std::string::npos, c.fast) << steps;
  EXPECT_EQ(steps.find("portable ReduceMean") != std::string::npos, !c.fast) << steps;
  auto got = run_program(**exe, s.spec(), {x});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  const std::vector<double> expected = mean_over(mean_in, reduced);
  EXPECT_TRUE(all_close((*got)[0], out, expected, {.atol = 1e-6, .rtol = 1e-5}));
  if (!c.after_conv) {
    // Element 5 of x: sample 0; its channel is dim 1, or the last dim when channels are last.
    const auto y = (*got)[0].values<float>();
    int64_t nans = 0;
    for (float v : y) nans += std::isnan(v);
    EXPECT_EQ(nans, 1);
  }
}

MeanCase mean_case(std::string name, ConcreteShape x, std::vector<int64_t> axes,
                   void (*set)(MeanCase&) = nullptr) {
  MeanCase c;
  c.name = std::move(name);
  c.x = std::move(x);
  c.axes = std::move(axes);
  if (set) set(c);
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuReduceMeanTest,
    ::testing::Values(mean_case("nchw_hw", {2, 24, 5, 7}, {2, 3}),
                      mean_case("nchw_negative_axes_dropped", {2, 24, 5, 7}, {-1, -2},
                                [](MeanCase& c) { c.keepdims = false; }),
                      mean_case("nchw_after_conv", {2, 32, 6, 5}, {2, 3},
                                [](MeanCase& c) { c.after_conv = true; }),
                      mean_case("nhwc_hw", {2, 5, 7, 24}, {1, 2}),
                      mean_case("nhwc_axes_input_dropped", {2, 5, 7, 24}, {2, 1},
                                [](MeanCase& c) {
                                  c.keepdims = false;
                                  c.axes_input = true;
                                }),
                      mean_case("ncl_l", {3, 9, 16}, {2}), mean_case("nlc_l", {3, 16, 9}, {1}),
                      mean_case("ncdhw_dhw", {2, 8, 3, 4, 5}, {2, 3, 4}),
                      mean_case("channels_only_is_portable", {2, 24, 5, 7}, {1},
                                [](MeanCase& c) { c.fast = false; }),
                      mean_case("batch_and_spatial_is_portable", {2, 24, 5, 7}, {0, 2, 3},
                                [](MeanCase& c) { c.fast = false; }),
                      mean_case("one_spatial_dim_of_two_is_portable", {2, 24, 5, 7}, {3},
                                [](MeanCase& c) { c.fast = false; })),
    [](const ::testing::TestParamInfo<MeanCase>& info) { return info.param.name; });

// A sample's means are the same bits alone and in a batch of three, in either channel order
// (docs/architecture.md invariant 4).
TEST(CpuReduceMeanTest, ASampleGivesTheSameBitsInAnyBatch) {
  for (bool channels_last : {false, true}) {
    SCOPED_TRACE(channels_last ? "channels last" : "channels second");
    const ConcreteShape one =
        channels_last ? ConcreteShape{1, 9, 11, 40} : ConcreteShape{1, 40, 9, 11};
    const std::vector<int64_t> axes =
        channels_last ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2, 3};
    auto run = [&](const Tensor& x) {
      SpecBuilder s;
      ConcreteShape out = x.shape();
      for (int64_t a : axes) out[static_cast<size_t>(a)] = 1;
      s.dispatch("mean", "ReduceMean", {s.input("x", x.shape())}, {s.output("y", out)},
                 attrs({{"axes", axes}}));
      auto exe = default_cpu_device()->prepare(s.spec());
      KILN_CHECK(exe.ok());
      auto got = run_program(**exe, s.spec(), {x});
      KILN_CHECK(got.ok());
      return (*got)[0];
    };
    ConcreteShape three = one;
    three[0] = 3;
    const Tensor batch = random_tensor(three, 82, -3.0f, 5.0f);
    const Tensor alone = run(slice_batch(batch, 1));
    EXPECT_TRUE(identical(slice_batch(run(batch), 1), alone));
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
