// The Vulkan backend's Conv, pooling and BatchNormalization kernels against the float64 reference
// (ref_conv, ref_pool, ref_batch_norm, reference()): both conv shaders on varied shapes (odd and
// non-square sizes, output channels and reductions that are not multiples of the tiles, strides,
// asymmetric pads, dilations, groups, depthwise, 1-D), the fused bias, residual and activation,
// NaN propagation, batch invariance bit for bit, the tiled shader's split into several launches,
// and the forms the GPU does not run still giving the right answer through the CPU fallback.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kiln/hal/vulkan/conv_ops.h"
#include "kiln/kernels/op_attributes.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"
#include "tests/support/vulkan/vulkan_test_env.h"

namespace kiln::hal::vulkan {
namespace {

using namespace kiln::testing;
using testing::VulkanDeviceTest;

constexpr Tolerance kConvTolerance{.atol = 1e-4, .rtol = 1e-4};
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Sample n of a batch (dim 0).
Tensor sample(const Tensor& batch, int64_t n) {
  ConcreteShape shape = batch.shape();
  shape[0] = 1;
  Tensor one = *Tensor::create(DType::kF32, shape);
  const size_t count = one.values<float>().size();
  std::memcpy(one.mutable_values<float>().data(), batch.values<float>().data() + n * count,
              count * sizeof(float));
  return one;
}

// Restores the automatic conv variant and the device's launch limit when a test ends.
struct ConvOverrides {
  ~ConvOverrides() {
    set_conv_variant_for_testing(ConvVariant::kAuto);
    set_conv_column_tiles_per_launch_for_testing(0);
  }
};

struct ConvCase {
  std::string name;
  ConcreteShape x;  // [N, C, spatial...]
  int64_t cout;
  std::vector<int64_t> kernel, strides, pads_begin, pads_end, dilations;
  int64_t group = 1;
  bool bias = false, residual = false;
  kernels::FusedActivation activation;
  const char* variant = "tiled";  // what the automatic choice takes
  bool weights_input = false;     // W and B as program inputs (computed at run time), not constants
  bool residual_after_activation = false;  // kiln_residual_after_activation
};

kernels::FusedActivation relu() { return {.kind = kernels::FusedActivation::Kind::kRelu}; }
kernels::FusedActivation clip(double lo, double hi) {
  return {.kind = kernels::FusedActivation::Kind::kClip, .min = lo, .max = hi};
}
kernels::FusedActivation leaky_relu(double alpha) {
  return {.kind = kernels::FusedActivation::Kind::kLeakyRelu, .alpha = alpha};
}
kernels::FusedActivation silu() { return {.kind = kernels::FusedActivation::Kind::kSilu}; }
kernels::FusedActivation mish() { return {.kind = kernels::FusedActivation::Kind::kMish}; }

// A 3x3 conv, stride 1, pads 1.
ConvCase same_3x3(std::string name, ConcreteShape x, int64_t cout, bool bias, bool residual,
                  kernels::FusedActivation activation) {
  ConvCase c{.name = std::move(name), .x = std::move(x), .cout = cout};
  c.kernel = {3, 3};
  c.strides = c.pads_begin = c.pads_end = c.dilations = {1, 1};
  c.bias = bias;
  c.residual = residual;
  c.activation = activation;
  return c;
}

// A Conv dispatch of `c` with its inputs (x, w, bias, residual as program inputs or constants)
// and the float64 reference result.
struct ConvProgram {
  SpecBuilder spec;
  std::vector<Tensor> inputs;
  Tensor expected;
};

ConcreteShape conv_output_shape(const ConvCase& c) {
  ConcreteShape y = {c.x[0], c.cout};
  for (size_t i = 0; i < c.kernel.size(); ++i) {
    const int64_t k_eff = c.dilations[i] * (c.kernel[i] - 1) + 1;
    y.push_back((c.x[2 + i] + c.pads_begin[i] + c.pads_end[i] - k_eff) / c.strides[i] + 1);
  }
  return y;
}

// The window attributes of a Conv or a pool.
Attributes window_attributes(const std::vector<int64_t>& kernel,
                             const std::vector<int64_t>& strides,
                             const std::vector<int64_t>& pads_begin,
                             const std::vector<int64_t>& pads_end,
                             const std::vector<int64_t>& dilations) {
  Attributes a;
  a.set("kernel_shape", kernel);
  a.set("strides", strides);
  std::vector<int64_t> pads = pads_begin;
  pads.insert(pads.end(), pads_end.begin(), pads_end.end());
  a.set("pads", pads);
  a.set("dilations", dilations);
  return a;
}

void make_conv(ConvProgram& p, const ConvCase& c, const Tensor& x, const Tensor* residual,
               uint32_t seed = 7) {
  ConcreteShape ws = {c.cout, c.x[1] / c.group};
  ws.insert(ws.end(), c.kernel.begin(), c.kernel.end());
  const Tensor w = random_tensor(ws, seed);
  const Tensor bias = random_tensor({c.cout}, seed + 1);
  ConcreteShape ys = conv_output_shape(c);
  ys[0] = x.shape()[0];
  Attributes a = window_attributes(c.kernel, c.strides, c.pads_begin, c.pads_end, c.dilations);
  a.set("group", c.group);
  kernels::set_fused_activation(a, c.activation);
  if (c.residual_after_activation) a.set(kernels::kResidualAfterActivationAttribute, int64_t{1});
  std::vector<int32_t> ins = {p.spec.input("x", x.shape())};
  p.inputs = {x};
  if (c.weights_input) {
    ins.push_back(p.spec.input("w", ws));
    p.inputs.push_back(w);
    ins.push_back(c.bias ? p.spec.input("b", {c.cout}) : -1);
    if (c.bias) p.inputs.push_back(bias);
  } else {
    ins.push_back(p.spec.constant("w", w));
    ins.push_back(c.bias ? p.spec.constant("b", bias) : -1);
  }
  if (residual != nullptr) {
    ins.push_back(p.spec.input("r", residual->shape()));
    p.inputs.push_back(*residual);
  }
  while (!ins.empty() && ins.back() < 0) ins.pop_back();
  const int32_t y = p.spec.output("y", ys);
  p.spec.dispatch("conv", "Conv", ins, {y}, a);
  p.expected = ref_conv(x, w, c.bias ? &bias : nullptr, residual,
                        {.strides = c.strides,
                         .pads_begin = c.pads_begin,
                         .pads_end = c.pads_end,
                         .dilations = c.dilations,
                         .group = c.group,
                         .activation = c.activation,
                         .residual_after_activation = c.residual_after_activation});
}

class VulkanConvTest : public VulkanDeviceTest, public ::testing::WithParamInterface<ConvCase> {
 protected:
  // Runs `c` with `variant` forced (kAuto: the automatic choice) and checks it against the
  // reference; returns the output.
  Tensor check(const ConvCase& c, ConvVariant variant, const char* expected_variant) {
    ConvOverrides restore;
    set_conv_variant_for_testing(variant);
    const Tensor x = random_tensor(c.x, 1);
    const Tensor residual = random_tensor(conv_output_shape(c), 2);
    ConvProgram p;
    make_conv(p, c, x, c.residual ? &residual : nullptr);
    const hal::ProgramSpec& spec = p.spec.spec();
    EXPECT_TRUE(vulkan().runs_on_gpu(spec.dispatches[0], spec.values).ok());
    auto exe = device_->prepare(spec);
    EXPECT_TRUE(exe.ok()) << exe.status().to_string();
    if (!exe.ok()) return {};
    const std::vector<std::string> lines = (*exe)->describe_dispatch(0);
    EXPECT_EQ(lines.size(), 1u);
    if (!lines.empty()) {
      EXPECT_NE(lines[0].find(expected_variant), std::string::npos) << lines[0];
    }
    auto out = run_program(*device_, **exe, spec, p.inputs);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (!out.ok()) return {};
    EXPECT_TRUE(all_close((*out)[0], p.expected, kConvTolerance)) << c.name << " " << lines[0];
    return (*out)[0];
  }
};

TEST_P(VulkanConvTest, BothShadersMatchTheReference) {
  const ConvCase& c = GetParam();
  check(c, ConvVariant::kAuto, c.variant);
  const bool tiled = std::string(c.variant) == "tiled";
  check(c, tiled ? ConvVariant::kDirect : ConvVariant::kTiled, tiled ? "direct" : "tiled");
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, VulkanConvTest,
    ::testing::Values(
        // {name, x, Cout, kernel, strides, pads_begin, pads_end, dilations, group, bias,
        //  residual, activation, automatic variant}
        // Cout 70: two row tiles, the second partial; K = 13 * 9 = 117, not a multiple of 16;
        // 2 * 10 * 9 columns: three column tiles, one across the sample boundary.
        ConvCase{"Tiled3x3NonSquare", {2, 13, 10, 9}, 70, {3, 3}, {1, 1}, {1, 1}, {1, 1},
                 {1, 1}, 1, true, false, relu()},
        ConvCase{"Tiled1x1Residual", {1, 24, 7, 11}, 20, {1, 1}, {1, 1}, {0, 0}, {0, 0},
                 {1, 1}, 1, true, true, {}},
        ConvCase{"TiledStridesAsymmetricPadsClip", {1, 8, 11, 13}, 17, {3, 3}, {2, 3},
                 {1, 0}, {0, 2}, {1, 1}, 1, false, true, clip(0, 6)},
        ConvCase{"TiledDilatedGroupsWeightsInput", {1, 12, 9, 10}, 36, {3, 3}, {1, 1}, {2, 2},
                 {2, 2}, {2, 2}, 2, true, false, relu(), "tiled", true},
        ConvCase{"TiledManyTiles", {2, 16, 20, 20}, 130, {3, 3}, {1, 1}, {1, 1}, {1, 1},
                 {1, 1}, 1, true, true, relu()},
        ConvCase{"Tiled1D", {2, 6, 17}, 16, {3}, {2}, {1}, {2}, {1}, 1, true, false, {}},
        ConvCase{"DirectDepthwise", {2, 8, 9, 9}, 8, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 8,
                 true, false, clip(0, 6), "direct"},
        ConvCase{"DirectFewChannels", {1, 3, 12, 11}, 8, {5, 5}, {2, 2}, {2, 1}, {1, 2},
                 {1, 1}, 1, true, true, relu(), "direct"},
        ConvCase{"DirectGroupsDilated", {1, 8, 10, 10}, 8, {3, 3}, {1, 1}, {0, 2}, {2, 0},
                 {2, 2}, 4, false, false, {}, "direct"},
        ConvCase{"TiledLeakyRelu", {2, 16, 9, 9}, 24, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1,
                 true, true, leaky_relu(0.1)},
        ConvCase{"DirectDepthwiseLeakyRelu", {1, 8, 9, 9}, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1},
                 {1, 1}, 8, true, false, leaky_relu(0.2), "direct"},
        ConvCase{"TiledResidualSilu", {2, 16, 9, 9}, 24, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1,
                 true, true, silu()},
        ConvCase{"DirectDepthwiseSilu", {1, 8, 9, 9}, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1},
                 8, true, false, silu(), "direct"},
        ConvCase{"TiledMish", {2, 16, 9, 9}, 24, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1,
                 true, false, mish()},
        ConvCase{"DirectDepthwiseResidualMish", {1, 8, 9, 9}, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1},
                 {1, 1}, 8, true, true, mish(), "direct"},
        ConvCase{"Direct1DWeightsInput", {1, 5, 9}, 3, {3}, {1}, {1}, {1}, {1}, 1, true, false,
                 {}, "direct", true},
        // The residual after the activation (kiln_residual_after_activation).
        ConvCase{"TiledClipThenResidual", {2, 16, 9, 9}, 24, {3, 3}, {1, 1}, {1, 1}, {1, 1},
                 {1, 1}, 1, true, true, clip(0, 6), "tiled", false, true},
        ConvCase{"DirectDepthwiseSiluThenResidual", {1, 8, 9, 9}, 8, {3, 3}, {1, 1}, {1, 1},
                 {1, 1}, {1, 1}, 8, true, true, silu(), "direct", false, true}),
    [](const auto& info) { return info.param.name; });
// clang-format on

// Sample i of a batch of 3 equals sample i run alone, bit for bit, on both shaders (a tile of
// the batched run mixes samples; the alone run's tiles do not).
TEST_F(VulkanDeviceTest, ConvIsBatchInvariantBitForBit) {
  // clang-format off
  const ConvCase cases[] = {
      {"tiled", {3, 13, 9, 7}, 40, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, true, true, relu()},
      {"pointwise", {3, 20, 5, 6}, 24, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, true, true,
       clip(-0.5, 0.5)},
      {"direct", {3, 6, 9, 7}, 6, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 6, true, true, relu(),
       "direct"},
  };
  // clang-format on

  for (const ConvCase& c : cases) {
    const Tensor x = random_tensor(c.x, 1);
    const Tensor residual = random_tensor(conv_output_shape(c), 2);
    ConvProgram batched;
    make_conv(batched, c, x, &residual);
    std::vector<Tensor> all = run(batched.spec, batched.inputs);
    ASSERT_EQ(all.size(), 1u);
    EXPECT_TRUE(all_close(all[0], batched.expected, kConvTolerance)) << c.name;
    for (int64_t n = 0; n < 3; ++n) {
      const Tensor xn = sample(x, n), rn = sample(residual, n);
      ConvProgram alone;
      make_conv(alone, c, xn, &rn);
      std::vector<Tensor> one = run(alone.spec, alone.inputs);
      ASSERT_EQ(one.size(), 1u);
      EXPECT_NE(device_->prepare(alone.spec.spec()).value()->describe_dispatch(0)[0].find(c.name),
                std::string::npos);
      EXPECT_TRUE(identical(one[0], sample(all[0], n))) << c.name << " sample " << n;
    }
  }
}

// The tiled shader's columns split into launches of at most maxComputeWorkGroupCount[0] tiles
// (65535 on lavapipe: 4 Mi output pixels per launch, more than a test can afford there), here
// with the limit lowered to 2 tiles: 13 column tiles in 7 launches give the unsplit result.
TEST_F(VulkanDeviceTest, TiledConvSplitsItsColumnsIntoLaunches) {
  ConvOverrides restore;
  const ConvCase c = same_3x3("split", {2, 16, 20, 20}, 70, true, true, relu());
  const Tensor x = random_tensor(c.x, 1);
  const Tensor residual = random_tensor(conv_output_shape(c), 2);
  ConvProgram whole, split;
  make_conv(whole, c, x, &residual);
  make_conv(split, c, x, &residual);
  std::vector<Tensor> expected = run(whole.spec, whole.inputs);
  set_conv_column_tiles_per_launch_for_testing(2);
  std::vector<Tensor> got = run(split.spec, split.inputs);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(expected.size(), 1u);
  EXPECT_TRUE(identical(got[0], expected[0]));
  EXPECT_TRUE(all_close(got[0], split.expected, kConvTolerance));
}

// A NaN in the input reaches every output whose window covers it, through the relu, on both
// shaders; the others stay finite.
TEST_F(VulkanDeviceTest, ConvPropagatesNaN) {
  ConvOverrides restore;
  for (ConvVariant variant : {ConvVariant::kTiled, ConvVariant::kDirect}) {
    set_conv_variant_for_testing(variant);
    const ConvCase c = same_3x3("nan", {1, 16, 8, 8}, 16, true, false, relu());
    Tensor x = random_tensor(c.x, 1);
    x.mutable_values<float>()[3 * 8 + 4] = kNaN;  // channel 0, (3, 4)
    ConvProgram p;
    make_conv(p, c, x, nullptr);
    std::vector<Tensor> out = run(p.spec, p.inputs);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(all_close(out[0], p.expected, kConvTolerance));
    auto y = out[0].values<float>();
    EXPECT_TRUE(std::isnan(y[5 * 64 + 2 * 8 + 3]));  // channel 5, (2, 3) covers (3, 4)
    EXPECT_FALSE(std::isnan(y[5 * 64 + 0]));
  }
}

// A 3-D conv is not a Vulkan kernel: it runs on the CPU fallback, right.
TEST_F(VulkanDeviceTest, Conv3DFallsBackToTheCpu) {
  // clang-format off
  const ConvCase c{"3d", {1, 2, 4, 5, 4}, 3, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1},
                   {1, 1, 1}, 1, true, false, relu()};
  // clang-format on
  const Tensor x = random_tensor(c.x, 1);
  ConvProgram p;
  make_conv(p, c, x, nullptr);
  const hal::ProgramSpec& spec = p.spec.spec();
  EXPECT_FALSE(vulkan().runs_on_gpu(spec.dispatches[0], spec.values).ok());
  std::vector<Tensor> out = run(p.spec, p.inputs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(all_close(out[0], p.expected, kConvTolerance));
}

// ---- Pooling

struct PoolCase {
  std::string name;
  std::string op;
  ConcreteShape x;
  std::vector<int64_t> kernel, strides, pads_begin, pads_end, dilations;
  bool ceil_mode = false, count_include_pad = false;
};

class VulkanPoolTest : public VulkanDeviceTest, public ::testing::WithParamInterface<PoolCase> {};

// Output dims of a windowed pool, ceil_mode's dropped last window included.
ConcreteShape pool_output_shape(const PoolCase& c) {
  ConcreteShape y = {c.x[0], c.x[1]};
  for (size_t i = 0; i < c.kernel.size(); ++i) {
    const int64_t in = c.x[2 + i];
    const int64_t k_eff = c.dilations[i] * (c.kernel[i] - 1) + 1;
    const int64_t span = in + c.pads_begin[i] + c.pads_end[i] - k_eff;
    int64_t out =
        (c.ceil_mode ? (span + c.strides[i] - 1) / c.strides[i] : span / c.strides[i]) + 1;
    if (c.ceil_mode && (out - 1) * c.strides[i] >= in + c.pads_begin[i]) --out;
    y.push_back(out);
  }
  return y;
}

TEST_P(VulkanPoolTest, MatchesReferenceAndKeepsNaN) {
  const PoolCase& c = GetParam();
  Tensor x = random_tensor(c.x, 3, -4.0f, 4.0f);
  const bool global = c.op.rfind("Global", 0) == 0;
  const bool max = c.op.find("Max") != std::string::npos;
  if (max) x.mutable_values<float>()[2 * c.x.back() + 2] = kNaN;  // plane 0, (2, 2) or 2W + 2
  Attributes a;
  Tensor expected;
  if (global) {
    expected = reference(c.op, {x});
  } else {
    a = window_attributes(c.kernel, c.strides, c.pads_begin, c.pads_end, c.dilations);
    if (c.ceil_mode) a.set("ceil_mode", int64_t{1});
    if (!max) a.set("count_include_pad", int64_t{c.count_include_pad ? 1 : 0});
    expected = ref_pool(x, {.max = max,
                            .count_include_pad = c.count_include_pad,
                            .kernel = c.kernel,
                            .strides = c.strides,
                            .pads_begin = c.pads_begin,
                            .pads_end = c.pads_end,
                            .dilations = c.dilations,
                            .out = pool_output_shape(c)});
  }
  SpecBuilder s;
  const int32_t xi = s.input("x", c.x);
  const int32_t y = s.output("y", expected.shape());
  s.dispatch("pool", c.op, {xi}, {y}, a);
  EXPECT_TRUE(vulkan().runs_on_gpu(s.spec().dispatches[0], s.spec().values).ok());
  std::vector<Tensor> out = run(s, {x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(all_close(out[0], expected, {.atol = 1e-5, .rtol = 1e-5})) << c.name;
  // all_close matches an expected NaN only by a NaN: the NaN must reach some output here.
  if (max) {
    int64_t nans = 0;
    for (double v : expected.values<float>()) nans += std::isnan(v) ? 1 : 0;
    EXPECT_GT(nans, 0) << "the case's windows miss the planted NaN";
  }
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, VulkanPoolTest,
    ::testing::Values(
        // {name, op, x, kernel, strides, pads_begin, pads_end, dilations, ceil_mode,
        //  count_include_pad}
        PoolCase{"MaxStem", "MaxPool", {2, 3, 11, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
        PoolCase{"MaxCeil", "MaxPool", {1, 2, 7, 9}, {2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, true},
        PoolCase{"MaxDilatedAsymmetric", "MaxPool", {1, 2, 9, 8}, {2, 3}, {1, 2}, {1, 0},
                 {0, 2}, {2, 2}},
        // Dilated taps straddle the 2x2 input: the window at (1, 1) has no tap inside it.
        PoolCase{"MaxEmptyWindow", "MaxPool", {1, 2, 2, 2}, {2, 2}, {1, 1}, {2, 2}, {2, 2},
                 {3, 3}},
        PoolCase{"Max1D", "MaxPool", {2, 3, 10}, {3}, {2}, {1}, {0}, {1}},
        PoolCase{"AverageExcludePad", "AveragePool", {2, 3, 8, 7}, {3, 3}, {1, 1}, {1, 1},
                 {1, 1}, {1, 1}},
        PoolCase{"AverageIncludePad", "AveragePool", {2, 3, 8, 7}, {3, 3}, {1, 1}, {1, 1},
                 {1, 1}, {1, 1}, false, true},
        PoolCase{"AverageCeilIncludePad", "AveragePool", {1, 2, 6, 7}, {3, 3}, {2, 2}, {1, 1},
                 {1, 0}, {1, 1}, true, true},
        PoolCase{"AverageCeilExcludePadDilated", "AveragePool", {1, 2, 9, 8}, {2, 2}, {3, 2},
                 {0, 1}, {1, 0}, {2, 1}, true, false},
        PoolCase{"Average1D", "AveragePool", {2, 3, 10}, {3}, {2}, {1}, {1}, {1}, false, true},
        PoolCase{"GlobalAverage", "GlobalAveragePool", {2, 5, 7, 7}},
        PoolCase{"GlobalMax", "GlobalMaxPool", {2, 5, 3, 4}},
        PoolCase{"GlobalAverage3D", "GlobalAveragePool", {1, 2, 2, 3, 4}}),
    [](const auto& info) { return info.param.name; });
// clang-format on

// MaxPool with its Indices output is not a Vulkan kernel: the CPU fallback runs it, right.
TEST_F(VulkanDeviceTest, MaxPoolWithIndicesFallsBackToTheCpu) {
  const Tensor x = random_tensor({1, 2, 6, 6}, 4);
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{2, 2});
  a.set("strides", std::vector<int64_t>{2, 2});
  SpecBuilder s;
  const int32_t xi = s.input("x", {1, 2, 6, 6});
  const int32_t y = s.output("y", {1, 2, 3, 3});
  const int32_t i = s.output("i", {1, 2, 3, 3}, DType::kI64);
  s.dispatch("pool", "MaxPool", {xi}, {y, i}, a);
  EXPECT_FALSE(vulkan().runs_on_gpu(s.spec().dispatches[0], s.spec().values).ok());
  std::vector<Tensor> out = run(s, {x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(all_close(out[0], ref_pool(x, {.kernel = {2, 2},
                                             .strides = {2, 2},
                                             .pads_begin = {0, 0},
                                             .pads_end = {0, 0},
                                             .dilations = {1, 1},
                                             .out = {1, 2, 3, 3}})));
}

// ---- BatchNormalization

struct BatchNormCase {
  std::string name;
  ConcreteShape x;
  bool constants = true;  // parameters as constants, else program inputs
  bool relu = false;
};

class VulkanBatchNormTest : public VulkanDeviceTest,
                            public ::testing::WithParamInterface<BatchNormCase> {};

TEST_P(VulkanBatchNormTest, MatchesReferenceAndKeepsNaN) {
  const BatchNormCase& c = GetParam();
  Tensor x = random_tensor(c.x, 5, -3.0f, 3.0f);
  x.mutable_values<float>()[1] = kNaN;
  const ConcreteShape ps = {c.x[1]};
  const Tensor scale = random_tensor(ps, 6), bias = random_tensor(ps, 7),
               mean = random_tensor(ps, 8), var = random_tensor(ps, 9, 0.1f, 2.0f);
  Attributes a;
  a.set("epsilon", 1e-3);
  if (c.relu) kernels::set_fused_activation(a, relu());
  SpecBuilder s;
  std::vector<int32_t> ins = {s.input("x", c.x)};
  std::vector<Tensor> inputs = {x};
  const char* names[] = {"scale", "bias", "mean", "var"};
  const Tensor* params[] = {&scale, &bias, &mean, &var};
  for (int i = 0; i < 4; ++i) {
    if (c.constants) {
      ins.push_back(s.constant(names[i], *params[i]));
    } else {
      ins.push_back(s.input(names[i], ps));
      inputs.push_back(*params[i]);
    }
  }
  const int32_t y = s.output("y", c.x);
  s.dispatch("bn", "BatchNormalization", ins, {y}, a);
  EXPECT_TRUE(vulkan().runs_on_gpu(s.spec().dispatches[0], s.spec().values).ok());
  std::vector<Tensor> out = run(s, inputs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(all_close(out[0], ref_batch_norm(x, scale, bias, mean, var, 1e-3, c.relu),
                        {.atol = 1e-5, .rtol = 1e-5}));
  EXPECT_TRUE(std::isnan(out[0].values<float>()[1]));
}

INSTANTIATE_TEST_SUITE_P(Shapes, VulkanBatchNormTest,
                         ::testing::Values(BatchNormCase{"Constants", {2, 5, 4, 3}},
                                           BatchNormCase{"ConstantsRelu", {2, 5, 4, 3}, true, true},
                                           BatchNormCase{"ValuesRelu3D", {2, 3, 5}, false, true},
                                           BatchNormCase{"Values2D", {4, 6}, false, false},
                                           BatchNormCase{"Constants5D", {1, 3, 2, 3, 4}}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kiln::hal::vulkan
