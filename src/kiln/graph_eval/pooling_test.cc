// MaxPool, AveragePool, GlobalAveragePool: expected values from the independent numpy reference
// in testdata/pooling_cases.py.
#include <fmt/format.h>
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

Tensor input_2x3x5x5() { return f32({2, 3, 5, 5}, pattern(150, 7, 3, 23, 4)); }

Tensor pool(const char* op, std::vector<std::pair<std::string, Attribute>> attrs) {
  OpGraph g(op);
  g.input("X", DType::kF32, {2, 3, 5, 5});
  for (auto& [name, value] : attrs) g.attr(name, value);
  return g.run1({input_2x3x5x5()});
}

using Ints = std::vector<int64_t>;

TEST(MaxPool, PadsAndStrides) {
  expect_close(
      pool("MaxPool",
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
      {2, 3, 3, 3},
      {2.75, 2.75, 2.25, 2.75, 2.75, 2.5,  1.25, 2.0,  2.5,  1.5,  2.25, 2.75, 1.75, 2.5,
       1.25, 2.0,  2.5,  1.5,  2.25, 2.75, 1.75, 2.5,  2.0,  2.0,  2.5,  2.0,  2.0,  2.75,
       2.25, 2.25, 2.0,  2.5,  2.5,  2.0,  2.75, 2.75, 2.25, 2.25, 1.75, 2.5,  2.5,  2.0,
       2.75, 2.75, 2.25, 1.25, 1.75, 2.5,  1.5,  2.0,  2.75, 1.5,  2.25, 2.75});
}

const std::vector<double> kMaxStride2Window2 = {
    2.75, 1.5,  2.25, 1.25, 1.75, 2.5,   0.25, 2.0,   -0.25, 1.5,  2.25, 2.75,  1.75, 2.5,
    0.25, 2.0,  1.5,  -2.5, 2.25, 2.75,  0.5,  2.5,   2.0,   0.75, 1.5,  -0.75, 1.0,  2.75,
    2.25, 1.25, 2.0,  2.5,  1.5,  -0.75, 2.75, -1.25, 2.25,  1.25, 1.75, 2.5,   1.5,  2.0,
    2.75, 0.5,  2.25, 1.25, 1.75, 2.5,   1.5,  2.0,   2.75,  0.5,  2.25, 0.0};

TEST(MaxPool, CeilModeAndSameUpper) {
  // 5 wide, window 2, stride 2: ceil mode adds a last, partial window; so does SAME_UPPER.
  expect_close(
      pool("MaxPool",
           {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}),
      {2, 3, 3, 3}, kMaxStride2Window2);
  expect_close(pool("MaxPool", {{"kernel_shape", Ints{2, 2}},
                                {"strides", Ints{2, 2}},
                                {"auto_pad", std::string("SAME_UPPER")}}),
               {2, 3, 3, 3}, kMaxStride2Window2);
  Tensor floor_mode = pool("MaxPool", {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  EXPECT_EQ(floor_mode.shape(), (ConcreteShape{2, 3, 2, 2}));
}

TEST(MaxPool, Dilations) {
  expect_close(
      pool("MaxPool", {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}}), {2, 3, 3, 3},
      {1.75, 0.0,  1.75, 1.25,  2.75, 2.5,  2.0,  0.25, 2.0,  1.75, 1.25,  2.75, 2.5,   0.75,
       2.5,  2.0,  1.5,  -0.25, 2.75, 1.25, 2.75, 2.5,  2.0,  0.25, -0.25, 1.5,  1.0,   2.75,
       2.5,  0.75, 0.25, 2.0,   1.5,  1.0,  2.75, 1.0,  0.75, 2.5,  2.0,   1.5,  -0.25, 1.5,
       1.0,  2.75, 2.25, 2.0,   0.25, 2.0,  1.5,  1.0,  2.75, 2.25, 0.5,   2.25});
}

TEST(MaxPool, OneD) {
  OpGraph g("MaxPool");
  g.input("X", DType::kF64, {1, 2, 9})
      .attr("kernel_shape", Ints{3})
      .attr("strides", Ints{2})
      .attr("pads", Ints{1, 0});
  expect_close(g.run1({f64({1, 2, 9}, pattern(18, 5, 1, 7, 2))}), {1, 2, 4},
               {1.5, 1.5, 1.0, 1.0, 0.5, 1.0, 1.0, 1.5});
}

TEST(AveragePool, CountIncludePad) {
  expect_close(
      pool("AveragePool",
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
      {2, 3, 3, 3},
      {0.375,
       0.125,
       -0.125,
       0.08333333333333333,
       -0.16666666666666666,
       0.5416666666666666,
       -0.6875,
       -0.4583333333333333,
       0.25,
       -0.4375,
       -0.20833333333333334,
       0.5,
       -0.25,
       0.1388888888888889,
       -0.75,
       -0.0625,
       0.16666666666666666,
       -0.5625,
       0.1875,
       0.4166666666666667,
       -0.3125,
       0.375,
       -0.19444444444444445,
       -0.125,
       0.5625,
       -0.16666666666666666,
       0.0625,
       0.8125,
       0.08333333333333333,
       0.3125,
       0.041666666666666664,
       0.1111111111111111,
       0.5,
       -0.25,
       0.4583333333333333,
       0.6875,
       0.0,
       -0.25,
       -0.5,
       -0.2916666666666667,
       -0.2222222222222222,
       -0.7916666666666666,
       0.375,
       0.125,
       -0.125,
       -0.8125,
       -0.5833333333333334,
       0.125,
       -0.625,
       -0.5555555555555556,
       0.7916666666666666,
       -0.4375,
       -0.20833333333333334,
       0.5});
  expect_close(pool("AveragePool", {{"kernel_shape", Ints{3, 3}},
                                    {"strides", Ints{2, 2}},
                                    {"pads", Ints{1, 1, 1, 1}},
                                    {"count_include_pad", int64_t{1}}}),
               {2, 3, 3, 3},
               {0.16666666666666666,
                0.08333333333333333,
                -0.05555555555555555,
                0.05555555555555555,
                -0.16666666666666666,
                0.3611111111111111,
                -0.3055555555555556,
                -0.3055555555555556,
                0.1111111111111111,
                -0.19444444444444445,
                -0.1388888888888889,
                0.2222222222222222,
                -0.16666666666666666,
                0.1388888888888889,
                -0.5,
                -0.027777777777777776,
                0.1111111111111111,
                -0.25,
                0.08333333333333333,
                0.2777777777777778,
                -0.1388888888888889,
                0.25,
                -0.19444444444444445,
                -0.08333333333333333,
                0.25,
                -0.1111111111111111,
                0.027777777777777776,
                0.3611111111111111,
                0.05555555555555555,
                0.1388888888888889,
                0.027777777777777776,
                0.1111111111111111,
                0.3333333333333333,
                -0.1111111111111111,
                0.3055555555555556,
                0.3055555555555556,
                0.0,
                -0.16666666666666666,
                -0.2222222222222222,
                -0.19444444444444445,
                -0.2222222222222222,
                -0.5277777777777778,
                0.16666666666666666,
                0.08333333333333333,
                -0.05555555555555555,
                -0.3611111111111111,
                -0.3888888888888889,
                0.05555555555555555,
                -0.4166666666666667,
                -0.5555555555555556,
                0.5277777777777778,
                -0.19444444444444445,
                -0.1388888888888889,
                0.2222222222222222});
}

TEST(AveragePool, CeilModeCountsOnlyThePaddedExtent) {
  // The last ceil-mode window overhangs the end (pads end = 0): count_include_pad divides by the
  // taps inside [-pad_begin, size + pad_end), not by the full window.
  expect_close(pool("AveragePool", {{"kernel_shape", Ints{3, 3}},
                                    {"strides", Ints{2, 2}},
                                    {"pads", Ints{1, 1, 0, 0}},
                                    {"ceil_mode", int64_t{1}},
                                    {"count_include_pad", int64_t{1}}}),
               {2, 3, 3, 3},
               {0.16666666666666666,
                0.08333333333333333,
                -0.08333333333333333,
                0.05555555555555555,
                -0.16666666666666666,
                0.5416666666666666,
                -0.4583333333333333,
                -0.4583333333333333,
                0.25,
                -0.19444444444444445,
                -0.1388888888888889,
                0.3333333333333333,
                -0.16666666666666666,
                0.1388888888888889,
                -0.75,
                -0.041666666666666664,
                0.16666666666666666,
                -0.5625,
                0.08333333333333333,
                0.2777777777777778,
                -0.20833333333333334,
                0.25,
                -0.19444444444444445,
                -0.125,
                0.375,
                -0.16666666666666666,
                0.0625,
                0.3611111111111111,
                0.05555555555555555,
                0.20833333333333334,
                0.027777777777777776,
                0.1111111111111111,
                0.5,
                -0.16666666666666666,
                0.4583333333333333,
                0.6875,
                0.0,
                -0.16666666666666666,
                -0.3333333333333333,
                -0.19444444444444445,
                -0.2222222222222222,
                -0.7916666666666666,
                0.25,
                0.125,
                -0.125,
                -0.3611111111111111,
                -0.3888888888888889,
                0.08333333333333333,
                -0.4166666666666667,
                -0.5555555555555556,
                0.7916666666666666,
                -0.2916666666666667,
                -0.20833333333333334,
                0.5});
}

TEST(AveragePool, SameLowerAndThreeD) {
  expect_close(
      pool("AveragePool", {{"kernel_shape", Ints{2, 2}},
                           {"strides", Ints{2, 2}},
                           {"auto_pad", std::string("SAME_LOWER")}}),
      {2, 3, 3, 3},
      {-2.0,    0.625,   -1.625, -0.375,  0.8125, 0.0,    -0.125,  -0.375, 0.25,   1.5,     -1.625,
       1.875,   0.25,    0.0,    -0.8125, 0.5,    0.25,   -0.5625, -0.75,  1.875,  -0.375,  0.875,
       -0.8125, -0.1875, 1.125,  -0.5625, 0.0625, 2.75,   -0.375,  0.25,   -1.375, -0.1875, 0.4375,
       -1.125,  0.0625,  0.6875, 0.5,     0.25,   0.875,  -0.75,   0.4375, -0.375, -0.5,    0.6875,
       -0.125,  -1.75,   0.875,  -1.375,  -0.125, -0.375, 0.25,    0.125,  -0.125, 0.5});
  OpGraph g("AveragePool");
  g.input("X", DType::kF32, {1, 2, 4, 4, 3})
      .attr("kernel_shape", Ints{2, 2, 2})
      .attr("strides", Ints{2, 2, 1});
  expect_close(g.run1({f32({1, 2, 4, 4, 3}, pattern(96, 5, 2, 13, 4))}), {1, 2, 2, 2, 2},
               {0.0625, 0.09375, -0.15625, -0.125, 0.0, 0.4375, 0.1875, -0.1875, -0.0625, -0.4375,
                0.125, 0.15625, -0.125, -0.09375, 0.0625, 0.09375});
}

TEST(GlobalAveragePool, MeansEachPlane) {
  OpGraph g("GlobalAveragePool");
  g.input("X", DType::kF32, {2, 3, 5, 5});
  expect_close(g.run1({input_2x3x5x5()}), {2, 3, 1, 1}, {-0.09, -0.04, 0.01, 0.06, 0.11, -0.07});
  OpGraph s("GlobalAveragePool");
  s.input("X", DType::kF32, {sym("N"), 2048, sym("H"), sym("W")});
  ASSERT_TRUE(s.infer().ok());
  EXPECT_EQ(shape_to_string(s.output_shape()), "[N,2048,1,1]");
}

TEST(Pooling, SymbolicShapes) {
  OpGraph g("MaxPool");
  g.input("X", DType::kF32, {sym("N"), 64, sym("H"), sym("H")})
      .attr("kernel_shape", Ints{3, 3})
      .attr("strides", Ints{2, 2})
      .attr("pads", Ints{1, 1, 1, 1});
  ASSERT_TRUE(g.infer().ok());
  EXPECT_EQ(g.output_shape()[2], sym("H").ceil_div(2));  // floor((H + 2 - 3) / 2) + 1
  // Ceil mode with stride <= kernel: no window can start in the padding, the formula is exact.
  OpGraph c("AveragePool");
  c.input("X", DType::kF32, {sym("N"), 3, sym("H"), 10})
      .attr("kernel_shape", Ints{3, 3})
      .attr("strides", Ints{2, 3})
      .attr("ceil_mode", int64_t{1});
  ASSERT_TRUE(c.infer().ok()) << c.infer().to_string();
  for (int64_t h = 3; h < 20; ++h) {
    int64_t expected = (h - 3 + 1) / 2 + 1;  // ceil((h - 3) / 2) + 1
    EXPECT_EQ(c.output_shape()[2].evaluate({{"H", h}}).value(), expected) << h;
  }
  EXPECT_EQ(c.output_shape()[3], DimExpr(4));
  // Evaluate at a bound size: run() checks the symbolic shape against the result.
  OpGraph r("AveragePool");
  r.input("X", DType::kF32, {sym("N"), 3, sym("H"), 5})
      .attr("kernel_shape", Ints{3, 3})
      .attr("strides", Ints{2, 3})
      .attr("ceil_mode", int64_t{1});
  EXPECT_EQ(r.run1({f32({2, 3, 8, 5}, pattern(240, 3, 1, 7, 2))}).shape(),
            (ConcreteShape{2, 3, 4, 2}));
}

TEST(Pooling, CeilModeDropsWindowStartingInPadding) {
  // Height 6, window 2, stride 3: ceil((6 - 2) / 3) + 1 = 3, but the third window would start at
  // row 6, past the input, so it is dropped (ONNX, ONNX Runtime and PyTorch agree). Width 7 keeps
  // its third window (starts at 6 < 7). Expected values: testdata/reference.py pool().
  OpGraph g("MaxPool");
  g.input("X", DType::kF32, {1, 2, 6, 7})
      .attr("kernel_shape", Ints{2, 2})
      .attr("strides", Ints{3, 3})
      .attr("ceil_mode", int64_t{1});
  expect_close(g.run1({f32({1, 2, 6, 7}, pattern(84, 5, 1, 9, 2))}), {1, 2, 2, 3},
               {1.0, 1.5, 0.0, 1.5, 2.0, -1.5, 2.0, 1.0, 1.5, 1.0, 1.5, 0.0});
  // With a symbolic height the size is an expression that drops that window for H = 6.
  OpGraph s("MaxPool");
  s.input("X", DType::kF32, {1, 2, sym("H"), 7})
      .attr("kernel_shape", Ints{2, 2})
      .attr("strides", Ints{3, 3})
      .attr("ceil_mode", int64_t{1});
  ASSERT_TRUE(s.infer().ok());
  EXPECT_EQ(s.output_shape()[2].evaluate({{"H", 6}}).value(), 2);
  EXPECT_EQ(s.output_shape()[2].evaluate({{"H", 7}}).value(), 3);
}

TEST(Pooling, BadInputs) {
  {
    OpGraph g("MaxPool");
    g.input("X", DType::kF32, {1, 3, 8, 8});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"attribute 'kernel_shape' is required", "(MaxPool)"}));
  }
  {
    // The Indices output is i64.
    OpGraph g("MaxPool");
    g.input("X", DType::kF32, {1, 3, 8, 8}).attr("kernel_shape", Ints{2, 2}).outputs(2);
    ASSERT_TRUE(g.infer().ok());
    EXPECT_EQ(g.graph().value(g.graph().node(0).outputs[1]).dtype, DType::kI64);
  }
  {
    // Without the Indices output it is fine.
    OpGraph g("MaxPool");
    g.input("X", DType::kF32, {1, 3, 8, 8}).attr("kernel_shape", Ints{2, 2}).outputs(1);
    EXPECT_TRUE(g.infer().ok());
  }
  {
    OpGraph g("AveragePool");
    g.input("X", DType::kF32, {1, 3, 8}).attr("kernel_shape", Ints{2, 2});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"attribute 'kernel_shape' must have 1 values, got 2"}));
  }
  {
    OpGraph g("AveragePool");
    g.input("X", DType::kF32, {1, 3, 8, 8})
        .attr("kernel_shape", Ints{2, 2})
        .attr("count_include_pad", int64_t{2});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument, {"'count_include_pad'"}));
  }
  {
    OpGraph g("MaxPool");
    g.input("X", DType::kF32, {1, 3, 8, 8})
        .attr("kernel_shape", Ints{2, 2})
        .attr("pads", Ints{1, 1, 1, 1})
        .attr("auto_pad", std::string("SAME_UPPER"));
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"attribute 'pads' [1,1,1,1] cannot be combined with auto_pad"}));
  }
  {
    OpGraph g("MaxPool");
    g.input("X", DType::kI64, {1, 3, 8, 8}).attr("kernel_shape", Ints{2, 2});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kUnimplemented,
                          {"input 0 'X' must have dtype", "got i64"}));
  }
  {
    OpGraph g("GlobalAveragePool");
    g.input("X", DType::kF32, {1, 3});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument, {"input 0 'X' must have rank"}));
  }
}

// ceil_mode and dilated windows at odd sizes, X = arange(n) - 100: the expected values are ONNX
// Runtime 1.30's outputs for the same models. A dilated window whose taps all fall in the padding
// gives the lowest finite float, as in ONNX Runtime and oneDNN (not -inf).
TEST(Pooling, EdgeWindowsMatchOnnxRuntime) {
  const double lowest = std::numeric_limits<float>::lowest();
  struct Case {
    const char* op;
    ConcreteShape x;
    std::vector<std::pair<std::string, Attribute>> attrs;
    ConcreteShape y;
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      {"MaxPool",
       {1, 1, 5, 5},
       {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}},
       {1, 1, 3, 3},
       {-94, -92, -91, -84, -82, -81, -79, -77, -76}},
      {"AveragePool",
       {1, 1, 5, 5},
       {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}},
       {1, 1, 3, 3},
       {-97, -95, -93.5, -87, -85, -83.5, -79.5, -77.5, -76}},
      // The last ceil-mode window would start in the end padding: dropped.
      {"MaxPool",
       {1, 1, 2, 2},
       {{"kernel_shape", Ints{2, 2}},
        {"strides", Ints{3, 3}},
        {"pads", Ints{0, 0, 1, 1}},
        {"ceil_mode", int64_t{1}}},
       {1, 1, 1, 1},
       {-97}},
      {"AveragePool",
       {1, 1, 2, 2},
       {{"kernel_shape", Ints{2, 2}},
        {"strides", Ints{3, 3}},
        {"pads", Ints{0, 0, 1, 1}},
        {"ceil_mode", int64_t{1}}},
       {1, 1, 1, 1},
       {-98.5}},
      {"MaxPool",
       {1, 1, 3, 3},
       {{"kernel_shape", Ints{3, 3}},
        {"strides", Ints{2, 2}},
        {"pads", Ints{1, 1, 1, 1}},
        {"ceil_mode", int64_t{1}}},
       {1, 1, 2, 2},
       {-96, -95, -93, -92}},
      {"AveragePool",
       {1, 1, 3, 3},
       {{"kernel_shape", Ints{3, 3}},
        {"strides", Ints{2, 2}},
        {"pads", Ints{1, 1, 1, 1}},
        {"ceil_mode", int64_t{1}}},
       {1, 1, 2, 2},
       {-98, -97, -95, -94}},
      // Taps at rows -1 and 1 of a 1-row input: every window is padding only.
      {"MaxPool",
       {1, 1, 1, 4},
       {{"kernel_shape", Ints{2, 1}}, {"dilations", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 0}}},
       {1, 1, 1, 4},
       {lowest, lowest, lowest, lowest}},
      {"MaxPool",
       {1, 1, 1, 4},
       {{"kernel_shape", Ints{2, 2}},
        {"dilations", Ints{2, 1}},
        {"strides", Ints{1, 2}},
        {"pads", Ints{1, 0, 1, 0}},
        {"ceil_mode", int64_t{1}}},
       {1, 1, 1, 2},
       {lowest, lowest}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} [{}]", c.op, fmt::join(c.x, ",")));
    OpGraph g(c.op);
    g.input("X", DType::kF32, shape_from_concrete(c.x));
    for (const auto& [name, value] : c.attrs) g.attr(name, value);
    std::vector<double> x;
    int64_t count = 1;
    for (int64_t d : c.x) count *= d;
    for (int64_t i = 0; i < count; ++i) x.push_back(static_cast<double>(i) - 100);
    expect_close(g.run1({f32(c.x, x)}), c.y, c.want, 0, 0);
  }
}

}  // namespace
}  // namespace kiln::graph_eval
