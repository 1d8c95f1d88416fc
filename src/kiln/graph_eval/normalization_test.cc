// BatchNormalization: expected values from testdata/misc_cases.py.
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

OpGraph spatial_bn(DType dtype, Shape x_shape) {
  OpGraph g("BatchNormalization");
  auto t = [&](ConcreteShape s, std::vector<double> v) {
    return testing::make_tensor(dtype, std::move(s), v);
  };
  g.input("X", dtype, std::move(x_shape))
      .constant("scale", t({3}, {0.5, -1.5, 2.0}))
      .constant("B", t({3}, {0.25, 0.0, -1.0}))
      .constant("mean", t({3}, {0.1, -0.2, 0.3}))
      .constant("var", t({3}, {0.5, 1.0, 2.0}))
      .attr("epsilon", 1e-3);
  return g;
}

const std::vector<double> kSpatial1 = {
    -0.1738404399805123,  1.062360843295982,    0.35596010999512806, -0.3504406233057257,
    -1.7991006744379918,  -0.29985011240633197, 1.1994004496253279,  -1.4242880339300767,
    -1.7776230778303925,  -3.1914832193401974,  -0.717227971698039,  -2.131088113207844,
    1.062360843295982,    0.35596010999512806,  -0.3504406233057257, 0.8857606599707685,
    -0.29985011240633197, 1.1994004496253279,   -1.4242880339300767, 0.07496252810158298,
    -3.1914832193401974,  -0.717227971698039,   -2.131088113207844,  0.34316713443431435};

TEST(BatchNormalization, PerChannel) {
  OpGraph g = spatial_bn(DType::kF64, {2, 3, 2, 2});
  expect_close(g.run1({f64({2, 3, 2, 2}, pattern(24, 7, 3, 11, 4))}), {2, 3, 2, 2}, kSpatial1,
               1e-12, 1e-12);
  OpGraph s = spatial_bn(DType::kF32, {2, 3, 2, 2});
  s.attr("spatial", int64_t{1});
  expect_close(s.run1({f32({2, 3, 2, 2}, pattern(24, 7, 3, 11, 4))}), {2, 3, 2, 2}, kSpatial1);
}

TEST(BatchNormalization, FusedRelu) {
  OpGraph g = spatial_bn(DType::kF32, {2, 3, 2, 2});
  g.attr("kiln_activation", std::string("relu"));
  std::vector<double> expected = kSpatial1;
  for (double& v : expected) v = v < 0 ? 0 : v;
  expect_close(g.run1({f32({2, 3, 2, 2}, pattern(24, 7, 3, 11, 4))}), {2, 3, 2, 2}, expected);
}

TEST(BatchNormalization, FusedReluKeepsNaN) {
  OpGraph g = spatial_bn(DType::kF32, {2, 3, 2, 2});
  g.attr("kiln_activation", std::string("relu"));
  std::vector<double> x = pattern(24, 7, 3, 11, 4);
  x[5] = std::numeric_limits<double>::quiet_NaN();
  Tensor y = g.run1({f32({2, 3, 2, 2}, x)});
  for (int64_t i = 0; i < 24; ++i) {
    EXPECT_EQ(std::isnan(element_as_double(y, i)), i == 5) << i;
  }
}

TEST(BatchNormalization, SpatialZeroHasPerFeatureParameters) {
  OpGraph g("BatchNormalization", /*opset=*/7);
  g.input("X", DType::kF32, {2, 3, 2, 2})
      .constant("scale", f32({3, 2, 2}, pattern(12, 3, 1, 7, 4)))
      .constant("B", f32({3, 2, 2}, pattern(12, 5, 2, 7, 4)))
      .constant("mean", f32({3, 2, 2}, pattern(12, 2, 3, 7, 4)))
      .constant("var",
                f32({3, 2, 2}, {1.25, 0.5, 1.25, 0.75, 1.0, 1.0, 0.75, 1.25, 0.5, 1.25, 0.75, 1.0}))
      .attr("spatial", int64_t{0});
  expect_close(g.run1({f32({2, 3, 2, 2}, pattern(24, 7, 3, 11, 4))}), {2, 3, 2, 2},
               {-0.0263940966718455,
                -0.4848376086657,
                -0.17081770998446344,
                0.0,
                0.06249718752109357,
                0.9374990625070312,
                -0.03867321011316038,
                -0.5854088549922317,
                -1.0151623913343,
                0.8354088549922317,
                0.0,
                -1.0624971875210936,
                -0.8090147583203863,
                -0.8383874637781,
                0.5,
                0.0,
                -0.6874990625070312,
                1.1874978125164062,
                0.971683025282901,
                -0.13819704833592275,
                -1.3687122464466999,
                -0.33852213748057935,
                0.0,
                0.24999625002812476});
}

TEST(BatchNormalization, SymbolicShapePassesThrough) {
  OpGraph g = spatial_bn(DType::kF32, {sym("N"), 3, sym("H"), sym("W")});
  ASSERT_TRUE(g.infer().ok());
  EXPECT_EQ(shape_to_string(g.output_shape()), "[N,3,H,W]");
}

TEST(BatchNormalization, BadInputs) {
  {
    OpGraph g = spatial_bn(DType::kF32, {2, 4, 2, 2});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"input 1 'scale' dim 0 (channels of X) must be 4, got 3",
                           "in node 'n0' (BatchNormalization)"}));
  }
  {
    OpGraph g = spatial_bn(DType::kF32, {2, 3, 2, 2});
    g.attr("training_mode", int64_t{3});
    EXPECT_TRUE(has_error(
        g.infer(), StatusCode::kInvalidArgument,
        {"attribute 'training_mode' must be 0 or 1, got 3", "in node 'n0' (BatchNormalization)"}));
  }
  {
    OpGraph g = spatial_bn(DType::kF32, {2, 3, 2, 2});
    g.outputs(3);
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"3 outputs", "outputs 1 and 2", "only in training mode",
                           "in node 'n0' (BatchNormalization)"}));
  }
  {
    OpGraph g = spatial_bn(DType::kF32, {2, 3, 2, 2});
    g.attr("spatial", int64_t{0});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"input 1 'scale' must have shape [3,2,2]", "spatial = 0", "got [3]"}));
  }
  {
    OpGraph g = spatial_bn(DType::kF32, {6});
    EXPECT_TRUE(
        has_error(g.infer(), StatusCode::kInvalidArgument, {"input 0 'X' must have rank >= 2"}));
  }
  {
    OpGraph g("BatchNormalization");
    g.input("X", DType::kF32, {2, 3, 2, 2});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument, {"expects 5 inputs, got 1"}));
  }
}

}  // namespace
}  // namespace kiln::graph_eval
