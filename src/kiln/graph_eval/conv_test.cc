// Conv: expected values are hand-checked (ONNX operator doc examples) or computed with the
// independent numpy reference in testdata/conv_cases.py.
#include <gtest/gtest.h>

#include <limits>

#include "tests/support/expect.h"
#include "tests/support/graph_eval/op_graph.h"

namespace kiln::graph_eval {
namespace {

using testing::expect_close;
using testing::f32;
using testing::f64;
using testing::has_error;
using testing::OpGraph;
using testing::pattern;
using testing::sym;

std::vector<double> iota(int64_t n) {
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<double>(i));
  return out;
}

TEST(Conv, BasicWithAndWithoutPadding) {
  // ONNX Conv doc example: 5x5 ramp input, 3x3 ones kernel.
  OpGraph padded("Conv");
  padded.input("X", DType::kF32, {1, 1, 5, 5})
      .constant("W", f32({1, 1, 3, 3}, std::vector<double>(9, 1.0)))
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  expect_close(padded.run1({f32({1, 1, 5, 5}, iota(25))}), {1, 1, 5, 5},
               {12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
                117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84});

  OpGraph unpadded("Conv");
  unpadded.input("X", DType::kF64, {1, 1, 5, 5})
      .constant("W", f64({1, 1, 3, 3}, std::vector<double>(9, 1.0)))
      .attr("kernel_shape", std::vector<int64_t>{3, 3});
  Tensor y = unpadded.run1({f64({1, 1, 5, 5}, iota(25))});
  EXPECT_EQ(y.dtype(), DType::kF64);
  expect_close(y, {1, 1, 3, 3}, {54, 63, 72, 99, 108, 117, 144, 153, 162}, 0, 0);
}

TEST(Conv, StridesAndAsymmetricPadding) {
  // ONNX doc example conv_with_strides_and_asymmetric_padding.
  OpGraph g("Conv");
  g.input("X", DType::kF32, {1, 1, 7, 5})
      .constant("W", f32({1, 1, 3, 3}, std::vector<double>(9, 1.0)))
      .attr("strides", std::vector<int64_t>{2, 2})
      .attr("pads", std::vector<int64_t>{1, 0, 1, 0});
  expect_close(g.run1({f32({1, 1, 7, 5}, iota(35))}), {1, 1, 4, 2},
               {21, 33, 99, 117, 189, 207, 171, 183});
}

TEST(Conv, GroupedDilatedStridedWithBias) {
  OpGraph g("Conv");
  g.input("X", DType::kF32, {2, 4, 5, 6})
      .constant("W", f32({4, 2, 3, 2}, pattern(48, 5, 1, 7, 3)))
      .constant("B", f32({4}, {0.5, -1, 0.25, 2}))
      .attr("group", int64_t{2})
      .attr("strides", std::vector<int64_t>{1, 2})
      .attr("pads", std::vector<int64_t>{1, 0, 2, 1})
      .attr("dilations", std::vector<int64_t>{2, 1});
  expect_close(g.run1({f32({2, 4, 5, 6}, pattern(240, 7, 3, 11, 4))}), {2, 4, 4, 3},
               {-1.75,
                1.6666666666666665,
                4.166666666666666,
                1.7499999999999998,
                -2.416666666666667,
                0.75,
                2.583333333333333,
                -1.25,
                -1.4166666666666665,
                0.2500000000000001,
                2.8333333333333335,
                -1.0,
                1.083333333333333,
                -2.75,
                -2.9166666666666665,
                -2.1666666666666665,
                0.6666666666666667,
                -2.916666666666667,
                -1.0,
                -1.0,
                0.833333333333333,
                0.8333333333333333,
                -0.9999999999999999,
                -1.0,
                -1.583333333333333,
                0.2500000000000002,
                -0.6666666666666667,
                1.5833333333333335,
                0.5833333333333331,
                1.4166666666666665,
                1.9166666666666665,
                2.083333333333333,
                -0.5,
                -1.25,
                2.583333333333333,
                1.1102230246251565e-16,
                3.6666666666666665,
                3.833333333333333,
                1.25,
                -0.75,
                4.333333333333333,
                2.0833333333333335,
                -0.4166666666666665,
                -0.16666666666666652,
                3.75,
                3.083333333333333,
                -0.3333333333333335,
                0.8333333333333335,
                1.583333333333333,
                2.25,
                -1.6666666666666665,
                -2.583333333333333,
                0.5833333333333333,
                2.833333333333333,
                -1.0,
                -0.25,
                2.333333333333333,
                2.166666666666667,
                -0.75,
                0.0,
                -2.5,
                -1.75,
                0.8333333333333333,
                0.08333333333333326,
                0.16666666666666652,
                -0.6666666666666666,
                -1.0,
                -1.9166666666666665,
                -0.9999999999999999,
                -2.833333333333333,
                -0.9999999999999998,
                -1.9166666666666665,
                2.083333333333333,
                2.083333333333333,
                0.2500000000000001,
                0.2499999999999999,
                -1.6666666666666665,
                1.9166666666666667,
                1.1102230246251565e-16,
                -1.6666666666666665,
                -1.4999999999999998,
                2.3333333333333335,
                -0.25,
                -1.0,
                1.75,
                0.08333333333333348,
                0.2500000000000002,
                4.5,
                2.25,
                -0.9166666666666665,
                0.8333333333333335,
                5.666666666666666,
                3.166666666666667,
                -0.25,
                3.666666666666667,
                3.0});
}

TEST(Conv, OneD) {
  OpGraph g("Conv");
  g.input("X", DType::kF32, {1, 2, 7})
      .constant("W", f32({3, 2, 3}, pattern(18, 5, 2, 9, 4)))
      .attr("strides", std::vector<int64_t>{2})
      .attr("pads", std::vector<int64_t>{1, 1});
  expect_close(g.run1({f32({1, 2, 7}, pattern(14, 3, 1, 5, 2))}), {1, 3, 4},
               {0.375, -0.75, 0.5, 1.0, 1.125, 0.75, 0.125, -1.625, -1.5, 1.125, -1.375, 0.25});
}

TEST(Conv, ThreeD) {
  OpGraph g("Conv");
  g.input("X", DType::kF64, {1, 2, 4, 4, 3})
      .constant("W", f64({2, 2, 2, 3, 2}, pattern(48, 3, 1, 7, 2)))
      .attr("strides", std::vector<int64_t>{2, 1, 1})
      .attr("pads", std::vector<int64_t>{1, 0, 1, 0, 1, 0});
  expect_close(
      g.run1({f64({1, 2, 4, 4, 3}, pattern(96, 5, 2, 13, 4))}), {1, 2, 2, 3, 3},
      {-1.75, 4.25,   -4.875, 1.125,  -2.0, -1.375, -0.25, 2.5,    -0.75, 3.625, -9.5,   -5.5,
       4.0,   -5.625, 3.25,   -1.625, 3.25, -0.875, -0.25, -1.125, 5.125, 0.625, -3.5,   1.125,
       0.5,   1.625,  -3.125, 3.625,  1.25, 2.5,    0.0,   5.0,    -0.25, -3.0,  -0.125, 1.5},
      1e-12, 1e-12);
}

TEST(Conv, AutoPadSameAndValid) {
  const std::vector<double> x = pattern(36, 5, 0, 7, 2);
  const std::vector<double> w = pattern(4, 1, 0, 4, 1);
  struct Case {
    const char* auto_pad;
    std::vector<double> expected;
  };
  // Even kernel, stride 1: total pad 1 goes to the end (UPPER) or the beginning (LOWER).
  const Case cases[] = {
      {"SAME_UPPER", {0.5,  -1.0, 1.0, -0.5, -2.0, -1.0, 2.0,  0.5, -1.0, 1.0,  -0.5, -3.0,
                      0.0,  2.0,  0.5, -1.0, 1.0,  2.0,  -2.0, 0.0, 2.0,  0.5,  -1.0, 0.0,
                      -0.5, -2.0, 0.0, 2.0,  0.5,  -2.0, 1.0,  0.5, -3.5, -0.5, 2.5,  3.0}},
      {"SAME_LOWER", {-1.5, 1.0,  0.0, -1.0, 1.5, 0.5,  1.0, 0.5,  -1.0, 1.0, -0.5, -2.0,
                      1.0,  2.0,  0.5, -1.0, 1.0, -0.5, 1.0, 0.0,  2.0,  0.5, -1.0, 1.0,
                      -2.5, -2.0, 0.0, 2.0,  0.5, -1.0, 1.0, -0.5, -2.0, 0.0, 2.0,  0.5}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.auto_pad);
    OpGraph g("Conv");
    g.input("X", DType::kF32, {1, 1, 6, 6})
        .constant("W", f32({1, 1, 2, 2}, w))
        .attr("auto_pad", std::string(c.auto_pad));
    expect_close(g.run1({f32({1, 1, 6, 6}, x)}), {1, 1, 6, 6}, c.expected);
  }
  // ONNX doc example conv_with_autopad_same (SAME_LOWER, stride 2).
  OpGraph same("Conv");
  same.input("X", DType::kF32, {1, 1, 5, 5})
      .constant("W", f32({1, 1, 3, 3}, std::vector<double>(9, 1.0)))
      .attr("auto_pad", std::string("SAME_LOWER"))
      .attr("strides", std::vector<int64_t>{2, 2});
  expect_close(same.run1({f32({1, 1, 5, 5}, iota(25))}), {1, 1, 3, 3},
               {12, 27, 24, 63, 108, 81, 72, 117, 84});
  OpGraph valid("Conv");
  valid.input("X", DType::kF32, {1, 1, 6, 6})
      .constant("W", f32({1, 1, 3, 3}, std::vector<double>(9, 1.0)))
      .attr("auto_pad", std::string("VALID"))
      .attr("strides", std::vector<int64_t>{2, 2});
  expect_close(valid.run1({f32({1, 1, 6, 6}, x)}), {1, 1, 2, 2}, {-3.0, 0.0, 1.0, -3.0});
}

TEST(Conv, ResidualAndReluExtension) {
  // 1x1 conv, hand-computed: m0 = x0 - x1, m1 = 0.5 * (x0 + x1); then + B + residual, relu.
  auto build = [](OpGraph& g, bool relu) {
    g.input("X", DType::kF32, {1, 2, 1, 2})
        .constant("W", f32({2, 2, 1, 1}, {1, -1, 0.5, 0.5}))
        .constant("B", f32({2}, {0, -4}))
        .input("residual", DType::kF32, {1, 2, 1, 2});
    if (relu) g.attr("kiln_activation", std::string("relu"));
  };
  Tensor x = f32({1, 2, 1, 2}, {1, 2, 3, 4});
  Tensor residual = f32({1, 2, 1, 2}, {2.5, -0.5, 3, 5});
  OpGraph plain("Conv");
  build(plain, false);
  expect_close(plain.run1({x, residual}), {1, 2, 1, 2}, {0.5, -2.5, 1, 4});
  OpGraph fused("Conv");
  build(fused, true);
  expect_close(fused.run1({x, residual}), {1, 2, 1, 2}, {0.5, 0, 1, 4});
  // Absent bias with a residual.
  OpGraph no_bias("Conv");
  no_bias.input("X", DType::kF32, {1, 2, 1, 2})
      .constant("W", f32({2, 2, 1, 1}, {1, -1, 0.5, 0.5}))
      .absent()
      .input("residual", DType::kF32, {1, 2, 1, 2})
      .attr("kiln_activation", std::string("relu"));
  expect_close(no_bias.run1({x, residual}), {1, 2, 1, 2}, {0.5, 0, 5, 8});
}

// A NaN in X reaches every output whose window holds it, through kiln's fused relu and clip.
TEST(Conv, FusedActivationsKeepNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const char* activation : {"relu", "clip"}) {
    SCOPED_TRACE(activation);
    OpGraph g("Conv");
    g.input("X", DType::kF32, {1, 1, 3, 3})
        .constant("W", f32({1, 1, 2, 2}, {-1, -1, -1, -1}))
        .attr("kiln_activation", std::string(activation));
    if (std::string(activation) == "clip") {
      g.attr("kiln_activation_min", 0.0).attr("kiln_activation_max", 6.0);
    }
    // Windows [0,1,3,4] [1,2,4,5] [3,4,6,7] [4,5,7,8]: the NaN at 2 is in the second only; the
    // others are negative sums, clamped to 0.
    expect_close(g.run1({f32({1, 1, 3, 3}, {1, 1, nan, 1, 1, 1, 1, 1, 1})}), {1, 1, 2, 2},
                 {0, nan, 0, 0});
  }
}

TEST(Conv, SymbolicShapeInference) {
  OpGraph g("Conv");
  g.input("X", DType::kF32, {sym("N"), 3, sym("H"), sym("W")})
      .constant("W", f32({8, 3, 3, 3}, pattern(216, 5, 1, 7, 3)))
      .attr("strides", std::vector<int64_t>{2, 2})
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  ASSERT_TRUE(g.infer().ok());
  const Shape& out = g.output_shape();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0], sym("N"));
  EXPECT_EQ(out[1], DimExpr(8));
  for (int64_t h = 1; h <= 20; ++h) {
    EXPECT_EQ(out[2].evaluate({{"H", h}}).value(), (h + 2 - 3) / 2 + 1) << "H=" << h;
  }
  // Ceil-free floor expression: the symbolic result must hold at sizes where rounding matters.
  Tensor y = g.run1({f32({2, 3, 7, 6}, pattern(252, 7, 3, 11, 4))});
  EXPECT_EQ(y.shape(), (ConcreteShape{2, 8, 4, 3}));

  OpGraph same("Conv");
  same.input("X", DType::kF32, {sym("N"), 3, sym("H"), sym("W")})
      .constant("W", f32({4, 3, 3, 3}, pattern(108, 5, 1, 7, 3)))
      .attr("auto_pad", std::string("SAME_UPPER"));
  ASSERT_TRUE(same.infer().ok());
  EXPECT_EQ(shape_to_string(same.output_shape()), "[N,4,H,W]");
}

TEST(Conv, BatchInvariant) {
  // Sample i of a batch is bit-identical to the same sample run alone (docs/architecture.md
  // invariant 4).
  auto make = [] {
    OpGraph g("Conv");
    g.input("X", DType::kF32, {sym("N"), 4, 6, 5})
        .constant("W", f32({6, 4, 3, 3}, pattern(216, 5, 1, 13, 7)))
        .constant("B", f32({6}, pattern(6, 1, 0, 5, 3)))
        .attr("pads", std::vector<int64_t>{1, 1, 1, 1});
    return g;
  };
  std::vector<double> x = pattern(3 * 120, 7, 3, 17, 9);
  OpGraph batch = make();
  Tensor all = batch.run1({f32({3, 4, 6, 5}, x)});
  for (int n = 0; n < 3; ++n) {
    OpGraph single = make();
    std::vector<double> xs(x.begin() + n * 120, x.begin() + (n + 1) * 120);
    Tensor one = single.run1({f32({1, 4, 6, 5}, xs)});
    auto a = all.values<float>().subspan(n * 180, 180);
    auto b = one.values<float>();
    for (size_t i = 0; i < 180; ++i) ASSERT_EQ(a[i], b[i]) << "n=" << n << " i=" << i;
  }
}

TEST(Conv, BadInputs) {
  auto conv = [](Shape x, Shape w) {
    OpGraph g("Conv");
    g.input("X", DType::kF32, std::move(x)).input("W", DType::kF32, std::move(w));
    return g;
  };
  {
    OpGraph g = conv({1, 3}, {8, 3, 3, 3});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"input 0 'X' must have rank 3 to 5, got 2", "in node 'n0' (Conv)"}));
  }
  {
    OpGraph g = conv({1, 3, 8, 8}, {8, 3, 3});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"input 1 'W' must have rank 4, got 3"}));
  }
  {
    OpGraph g = conv({1, 3, 8, 8}, {8, 2, 3, 3});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"input 0 'X' dim 1 (channels", "must be 2, got 3"}));
  }
  {
    OpGraph g = conv({1, 4, 8, 8}, {3, 1, 3, 3});
    g.attr("group", int64_t{3});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"attribute 'group' 3", "must be 3, got 4"}));
  }
  {
    OpGraph g = conv({1, 4, 8, 8}, {3, 2, 3, 3});
    g.attr("group", int64_t{2});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"output channels) = 3 must be divisible by attribute 'group' = 2"}));
  }
  {
    OpGraph g = conv({1, 3, 8, 8}, {8, 3, 3, 3});
    g.attr("group", int64_t{0});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"attribute 'group' must be >= 1, got 0"}));
  }
  {
    OpGraph g = conv({1, 3, 8, 8}, {8, 3, 3, 3});
    g.attr("kernel_shape", std::vector<int64_t>{5, 5});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"attribute 'kernel_shape' [5,5] does not match"}));
  }
  {
    OpGraph g = conv({1, 3, 8, 8}, {8, 3, 3, 3});
    g.attr("pads", std::vector<int64_t>{1, 1});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"attribute 'pads' must have 4 values, got 2"}));
  }
  {
    OpGraph g = conv({1, 3, 8, 8}, {8, 3, 3, 3});
    g.attr("strides", std::vector<int64_t>{0, 1});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"attribute 'strides' values must be in [1, 2147483647]"}));
  }
  {
    // Pads whose sum overflows int64 (found by fuzz_module_load) are refused before any
    // arithmetic on them.
    OpGraph g = conv({1, 3, 8, 8}, {8, 3, 3, 3});
    g.attr("pads", std::vector<int64_t>{8461244959897026562, 0, 7234309775409112096, 0});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"attribute 'pads' values must be in [0, 2147483647]"}));
  }
  {
    OpGraph g = conv({1, 3, 8, 8}, {8, 3, 3, 3});
    g.attr("auto_pad", std::string("SAME"));
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument, {"attribute 'auto_pad'"}));
  }
  {
    OpGraph g = conv({1, 3, 2, 2}, {8, 3, 3, 3});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument, {"gives output size 0"}));
  }
  {
    OpGraph g = conv({1, 3, 8, 8}, {8, 3, 3, 3});
    g.attr("kiln_activation", std::string("swiglu"));
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"attribute 'kiln_activation'", "swiglu"}));
  }
  {
    // GELU is an activation kiln fuses, but into MatMul only.
    OpGraph g = conv({1, 3, 8, 8}, {8, 3, 3, 3});
    g.attr("kiln_activation", std::string("gelu"));
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kUnimplemented,
                          {"attribute 'kiln_activation'", "gelu", "MatMul only"}));
  }
  {
    OpGraph g("Conv");
    g.input("X", DType::kF32, {1, 3, 8, 8});
    EXPECT_TRUE(
        has_error(g.infer(), StatusCode::kInvalidArgument, {"expects 2 to 4 inputs, got 1"}));
  }
  {
    OpGraph g = conv({1, 3, 8, 8}, {8, 3, 3, 3});
    g.absent().input("residual", DType::kF32, {1, 8, 7, 6});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"input 3 'residual' dim 2", "must be 6, got 7"}));
  }
  {
    OpGraph g("Conv");
    g.input("X", DType::kF32, {1, 3, 8, 8}).input("W", DType::kF64, {8, 3, 3, 3});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"input 1 'W' must have dtype f32 like input 0 'X', got f64"}));
  }
  {
    // Channels that are a symbol cannot be proven to match the weights: assumed (C must be 3
    // when bound; concrete channels that differ are refused, as above).
    OpGraph g = conv({sym("N"), sym("C"), 8, 8}, {8, 3, 3, 3});
    EXPECT_TRUE(g.infer().ok());
  }
  {
    // Evaluation re-checks concrete inputs: a tensor of the wrong shape is an error, not a crash.
    OpGraph g = conv({1, 3, 8, 8}, {8, 3, 3, 3});
    ASSERT_TRUE(g.infer().ok());
    Tensor x = f32({1, 3, 8, 8}, std::vector<double>(192, 1.0));
    Tensor bad_w = f32({8, 2, 3, 3}, std::vector<double>(144, 1.0));
    auto out = evaluate_node(g.graph(), 0, std::vector<Tensor>{x, bad_w});
    EXPECT_TRUE(
        has_error(out.status(), StatusCode::kInvalidArgument, {"channels", "in node 'n0' (Conv)"}));
  }
}

}  // namespace
}  // namespace kiln::graph_eval
