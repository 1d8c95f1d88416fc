// The per-dispatch team size: small dispatches run on one thread, large ones on all, the choice
// depends on one sample's work only, and prepare and run leave the caller its own team size.
#include "kiln/hal/cpu/thread_policy.h"

#include <gtest/gtest.h>
#include <omp.h>

#include "kiln/hal/cpu/cpu_device.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/hal/team_sizes.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;  // NOLINT: SpecBuilder, run_program and the references

// x [n, c, hw, hw] -> 3x3 conv with m outputs (pads 1).
ProgramSpec conv_spec(SpecBuilder& s, int64_t n, int64_t c, int64_t hw, int64_t m) {
  const int32_t x = s.input("x", {n, c, hw, hw});
  const int32_t w = s.constant("w", random_tensor({m, c, 3, 3}, 1));
  const int32_t y = s.output("y", {n, m, hw, hw});
  Attributes a;
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  s.dispatch("conv", "Conv", {x, w}, {y}, a);
  return s.spec();
}

ProgramSpec relu_spec(SpecBuilder& s, ConcreteShape shape) {
  const int32_t x = s.input("x", shape);
  const int32_t y = s.output("y", shape);
  s.dispatch("relu", "Relu", {x}, {y});
  return s.spec();
}

TEST(ThreadPolicy, SmallDispatchesRunOnOneThreadLargeOnesOnAll) {
  SpecBuilder small_conv, large_conv, small_relu, large_relu;
  ProgramSpec sc = conv_spec(small_conv, 1, 8, 8, 8);       // 0.07 MFLOP
  ProgramSpec lc = conv_spec(large_conv, 1, 64, 56, 64);    // 231 MFLOP
  ProgramSpec sr = relu_spec(small_relu, {1, 16, 16, 16});  // 4096 elements
  ProgramSpec lr = relu_spec(large_relu, {1, 64, 56, 56});  // 200704 elements
  EXPECT_EQ(dispatch_threads(sc.dispatches[0], sc.values, 2), 1);
  EXPECT_EQ(dispatch_threads(lc.dispatches[0], lc.values, 2), 2);
  EXPECT_EQ(dispatch_threads(sr.dispatches[0], sr.values, 2), 1);
  EXPECT_EQ(dispatch_threads(lr.dispatches[0], lr.values, 2), 2);
  EXPECT_NEAR(work_per_sample(lc.dispatches[0], lc.values), 2.0 * 64 * 56 * 56 * 64 * 9,
              16.0 * (2 * 64 * 56 * 56 + 64 * 64 * 9) + 1);  // plus what it touches
}

TEST(ThreadPolicy, AnInterpolatingResizeCountsItsTaps) {
  // The FCN's 2x bilinear upsample (24576 outputs) is worth a second thread; a tiny one is not.
  auto resize_threads = [](ConcreteShape in, ConcreteShape out) {
    SpecBuilder s;
    const int32_t x = s.input("x", in);
    Tensor scales = Tensor::create(DType::kF32, {4}).value();
    const int32_t sc = s.constant("scales", scales);
    const int32_t y = s.output("y", out);
    s.dispatch("up", "Resize", {x, -1, sc}, {y}, attrs({{"mode", std::string("linear")}}));
    return dispatch_threads(s.spec().dispatches[0], s.spec().values, 2);
  };
  EXPECT_EQ(resize_threads({1, 32, 12, 16}, {1, 32, 24, 32}), 2);
  EXPECT_EQ(resize_threads({1, 2, 4, 4}, {1, 2, 8, 8}), 1);
}

TEST(ThreadPolicy, TheChoiceDependsOnOneSampleNotTheBatch) {
  for (int64_t batch : {1, 2, 8, 64, 1024}) {
    SpecBuilder small, large;
    ProgramSpec s = conv_spec(small, batch, 8, 8, 8);
    ProgramSpec l = conv_spec(large, batch, 64, 28, 64);
    EXPECT_EQ(dispatch_threads(s.dispatches[0], s.values, 2), 1) << "batch " << batch;
    EXPECT_EQ(dispatch_threads(l.dispatches[0], l.values, 2), 2) << "batch " << batch;
  }
}

TEST(ThreadPolicy, SmallAndLargeDispatchesGiveTheReferenceAndTheCallerKeepsItsTeamSize) {
  SpecBuilder s;
  // A large conv, then a small one on a pooled copy: the program switches team size twice.
  const int32_t x = s.input("x", {2, 32, 32, 32});
  const int32_t w = s.constant("w", random_tensor({32, 32, 3, 3}, 2));
  const int32_t y = s.value("y", {2, 32, 32, 32});
  Attributes pads;
  pads.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  s.dispatch("big", "Conv", {x, w}, {y}, pads);
  const int32_t p = s.value("p", {2, 32, 4, 4});
  Attributes pool;
  pool.set("kernel_shape", std::vector<int64_t>{8, 8});
  pool.set("strides", std::vector<int64_t>{8, 8});
  s.dispatch("pool", "MaxPool", {y}, {p}, pool);
  const int32_t w2 = s.constant("w2", random_tensor({8, 32, 3, 3}, 3));
  const int32_t z = s.output("z", {2, 8, 4, 4});
  s.dispatch("small", "Conv", {p, w2}, {z}, pads);
  ASSERT_EQ(dispatch_threads(s.spec().dispatches[0], s.spec().values, 2), 2);
  ASSERT_EQ(dispatch_threads(s.spec().dispatches[2], s.spec().values, 2), 1);

  DeviceOptions options;
  options.threads = 3;
  auto device = create_cpu_device(options);
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  // The caller's team size differs from the device's and from one.
  const int caller_before = omp_get_max_threads();
  omp_set_num_threads(5);
  auto exe = (*device)->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  EXPECT_EQ(omp_get_max_threads(), 5) << "prepare leaves the caller its team size";
  Tensor input = random_tensor({2, 32, 32, 32}, 4);
  TeamSizes teams;
  RunOptions run_options;
  run_options.observer = &teams;
  auto out = run_program(**exe, s.spec(), {input}, run_options);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(omp_get_max_threads(), 5) << "a run leaves the caller its team size";
  std::vector<int> expected_teams;
  for (const DispatchSpec& d : s.spec().dispatches)
    expected_teams.push_back(dispatch_threads(d, s.spec().values, 3));
  EXPECT_EQ(teams.sizes, expected_teams) << "each dispatch runs with its own team size";
  EXPECT_EQ(expected_teams.front(), 3);
  EXPECT_EQ(expected_teams.back(), 1);
  auto unobserved = run_program(**exe, s.spec(), {input});
  ASSERT_TRUE(unobserved.ok()) << unobserved.status().to_string();
  EXPECT_EQ(omp_get_max_threads(), 5) << "a run without observer too";
  omp_set_num_threads(caller_before);

  ConvRef same;
  same.strides = {1, 1};
  same.pads_begin = same.pads_end = {1, 1};
  same.dilations = {1, 1};
  Tensor big = ref_conv(input, random_tensor({32, 32, 3, 3}, 2), nullptr, nullptr, same);
  PoolRef pr;
  pr.kernel = pr.strides = {8, 8};
  pr.pads_begin = pr.pads_end = {0, 0};
  pr.dilations = {1, 1};
  pr.out = {2, 32, 4, 4};
  Tensor pooled = ref_pool(big, pr);
  Tensor expected = ref_conv(pooled, random_tensor({8, 32, 3, 3}, 3), nullptr, nullptr, same);
  // The 32-channel conv runs by Winograd F(4x4, 3x3) where the CPU has AVX2 (winograd_conv.h),
  // whose error reaches about 3e-6 of sum |x w|, some 70 here: 2e-4.
  EXPECT_TRUE(all_close((*out)[0], expected, {.atol = 5e-4, .rtol = 1e-5}));
}

}  // namespace
}  // namespace kiln::hal::cpu
