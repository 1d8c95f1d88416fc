// Softmax (opset 13 and opset < 13 semantics): expected values from testdata/misc_cases.py.
#include <gtest/gtest.h>

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

Tensor input() { return f32({2, 3, 4}, pattern(24, 7, 3, 11, 2)); }

TEST(Softmax, Opset13DefaultsToLastAxis) {
  OpGraph g("Softmax", 13);
  g.input("x", DType::kF32, {2, 3, 4});
  expect_close(
      g.run1({input()}), {2, 3, 4},
      {0.025507814878654368, 0.8447028181852957,   0.11431809514987193,  0.015471271786177958,
       0.5681232040593226,   0.07688711473466031,  0.010405539449861192, 0.344584141756156,
       0.1606798683172233,   0.021745655489133046, 0.7201172096606593,   0.0974572665329845,
       0.5681232040593226,   0.07688711473466031,  0.010405539449861192, 0.344584141756156,
       0.1606798683172233,   0.021745655489133046, 0.7201172096606593,   0.0974572665329845,
       0.005347299048748962, 0.17707822475760737,  0.023964931702607356, 0.7936095444910363});
}

TEST(Softmax, Opset13Axis0) {
  OpGraph g("Softmax", 17);
  g.input("x", DType::kF32, {2, 3, 4}).attr("axis", int64_t{-3});
  expect_close(
      g.run1({input()}), {2, 3, 4},
      {0.029312230751356316, 0.8807970779778825,   0.8807970779778825,   0.029312230751356316,
       0.8807970779778825,   0.8807970779778825,   0.029312230751356316, 0.8807970779778825,
       0.8807970779778825,   0.029312230751356316, 0.8807970779778825,   0.029312230751356316,
       0.9706877692486436,   0.11920292202211755,  0.11920292202211755,  0.9706877692486436,
       0.11920292202211755,  0.11920292202211755,  0.9706877692486436,   0.11920292202211755,
       0.11920292202211755,  0.9706877692486436,   0.11920292202211755,  0.9706877692486436});
}

TEST(Softmax, BeforeOpset13CoercesTo2D) {
  // Default axis 1 on [2,3,4]: normalize over the 12 trailing elements of each sample.
  OpGraph g("Softmax", 11);
  g.input("x", DType::kF32, {2, 3, 4});
  expect_close(
      g.run1({input()}), {2, 3, 4},
      {0.011789843024413325,  0.3904259802754832,    0.05283841062351467,  0.007150901267505803,
       0.2368053273854404,    0.03204811605364738,   0.004337240863320202, 0.14362969144255736,
       0.01943816497256578,   0.0026306695621621935, 0.08711581150497627,  0.011789843024413325,
       0.28319726266132317,   0.03832658175410356,   0.005186938797182798, 0.17176782255078427,
       0.02324624691584662,   0.0031460374105443363, 0.10418245072912975,  0.014099561477711218,
       0.0019081681460980811, 0.06318985057121798,   0.008551816324735019, 0.28319726266132317});
}

TEST(Softmax, LargeValuesAreStable) {
  OpGraph g("Softmax", 13);
  g.input("x", DType::kF64, {2, 3});
  expect_close(g.run1({f64({2, 3}, {1000, 1001, 1002, -1e4, 0, 1e4})}), {2, 3},
               {0.09003057317038043, 0.24472847105479767, 0.6652409557748218, 0, 0, 1}, 1e-15,
               1e-12);
}

TEST(Softmax, SymbolicShapeAndBadAxis) {
  OpGraph g("Softmax", 13);
  g.input("x", DType::kF32, {sym("N"), 1000});
  ASSERT_TRUE(g.infer().ok());
  EXPECT_EQ(shape_to_string(g.output_shape()), "[N,1000]");
  OpGraph bad("Softmax", 13);
  bad.input("x", DType::kF32, {2, 3}).attr("axis", int64_t{2});
  EXPECT_TRUE(has_error(
      bad.infer(), StatusCode::kInvalidArgument,
      {"attribute 'axis' = 2 is out of range [-2, 1] for rank 2", "in node 'n0' (Softmax)"}));
  OpGraph ints("Softmax", 13);
  ints.input("x", DType::kI64, {2, 3});
  EXPECT_TRUE(has_error(ints.infer(), StatusCode::kUnimplemented,
                        {"must have dtype", "f32 or f64, got i64"}));
}

}  // namespace
}  // namespace kiln::graph_eval
