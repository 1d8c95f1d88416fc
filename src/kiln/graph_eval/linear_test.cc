// Gemm and MatMul: expected values hand-checked or from testdata/misc_cases.py.
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

TEST(Gemm, TransposesAlphaBetaAndRowBias) {
  OpGraph g("Gemm");
  g.input("A", DType::kF32, {4, 3})
      .constant("B", f32({5, 4}, pattern(20, 3, 2, 9, 4)))
      .constant("C", f32({5}, {1.0, -1.0, 0.5, 0.0, 2.0}))
      .attr("transA", int64_t{1})
      .attr("transB", int64_t{1})
      .attr("alpha", 0.5)
      .attr("beta", 2.0);
  expect_close(g.run1({f32({4, 3}, pattern(12, 5, 1, 7, 2))}), {3, 5},
               {2.0625, -2.3125, 0.875, 0.0625, 3.6875, 1.0625, -2.375, 1.75, -0.9375, 3.625, 3.125,
                -2.0, 0.4375, 1.125, 4.0});
}

TEST(Gemm, ColumnBiasScalarBiasAndNoBias) {
  // A = [[-2,-1,0],[1,2,-2]], B = rows of (i % 7 - 3): [[-3,-2,-1,0],[1,2,3,-3],[-2,-1,0,1]].
  Tensor a = f64({2, 3}, pattern(6, 1, 0, 5, 1));
  Tensor b = f64({3, 4}, pattern(12, 1, 0, 7, 1));
  OpGraph col("Gemm");
  col.input("A", DType::kF64, {2, 3})
      .input("B", DType::kF64, {3, 4})
      .constant("C", f64({2, 1}, {10, 20}));
  expect_close(col.run1({a, b}), {2, 4}, {15, 12, 9, 13, 23, 24, 25, 12}, 0, 0);
  OpGraph scalar("Gemm");
  scalar.input("A", DType::kF64, {2, 3})
      .input("B", DType::kF64, {3, 4})
      .constant("C", f64({}, {1}));
  expect_close(scalar.run1({a, b}), {2, 4}, {6, 3, 0, 4, 4, 5, 6, -7}, 0, 0);
  OpGraph none("Gemm");
  none.input("A", DType::kF64, {2, 3}).input("B", DType::kF64, {3, 4});
  expect_close(none.run1({a, b}), {2, 4}, {5, 2, -1, 3, 3, 4, 5, -8}, 0, 0);
}

TEST(Gemm, SymbolicBatch) {
  OpGraph g("Gemm");
  g.input("A", DType::kF32, {sym("N"), 2048})
      .input("B", DType::kF32, {1000, 2048})
      .input("C", DType::kF32, {1000})
      .attr("transB", int64_t{1});
  ASSERT_TRUE(g.infer().ok());
  EXPECT_EQ(shape_to_string(g.output_shape()), "[N,1000]");
}

TEST(Gemm, BadInputs) {
  {
    OpGraph g("Gemm");
    g.input("A", DType::kF32, {2, 3}).input("B", DType::kF32, {4, 5});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"input 1 'B' dim 0 (K", "must be 3, got 4", "(Gemm)"}));
  }
  {
    OpGraph g("Gemm");
    g.input("A", DType::kF32, {2, 3, 1}).input("B", DType::kF32, {3, 5});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"input 0 'A' must have rank 2, got 3"}));
  }
  {
    OpGraph g("Gemm");
    g.input("A", DType::kF32, {2, 3}).input("B", DType::kF32, {3, 5}).input("C", DType::kF32, {3});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"input 2 'C' dim 0", "must be 5, got 3"}));
  }
  {
    OpGraph g("Gemm");
    g.input("A", DType::kF32, {2, 3}).input("B", DType::kF32, {3, 5}).attr("transA", int64_t{2});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"attribute 'transA' must be 0 or 1, got 2"}));
  }
}

TEST(MatMul, BatchBroadcasting) {
  OpGraph g("MatMul");
  g.input("A", DType::kF32, {2, 1, 2, 3}).constant("B", f32({3, 3, 2}, pattern(18, 3, 2, 9, 4)));
  expect_close(
      g.run1({f32({2, 1, 2, 3}, pattern(12, 5, 1, 7, 2))}), {2, 3, 2, 2},
      {2.125,  -0.5, -1.0,   1.625,  2.125,  -0.5, -1.0,   1.625,  2.125,  -0.5, -1.0,   1.625,
       -0.625, 2.0,  -1.125, -1.125, -0.625, 2.0,  -1.125, -1.125, -0.625, 2.0,  -1.125, -1.125});
}

TEST(MatMul, OneDimensionalOperands) {
  Tensor v = f32({3}, {1, -2, 0.5});
  Tensor m = f32({3, 4}, pattern(12, 1, 0, 7, 1));
  {
    OpGraph g("MatMul");
    g.input("A", DType::kF32, {3}).input("B", DType::kF32, {3, 4});
    expect_close(g.run1({v, m}), {4}, {-6, -6.5, -7, 6.5}, 0, 0);
  }
  {
    OpGraph g("MatMul");
    g.input("A", DType::kF32, {4, 3}).input("B", DType::kF32, {3});
    // m transposed: rows are m's columns.
    Tensor mt = f32({4, 3}, {-3, 1, -2, -2, 2, -1, -1, 3, 0, 0, -3, 1});
    expect_close(g.run1({mt, v}), {4}, {-6, -6.5, -7, 6.5}, 0, 0);
  }
  {
    OpGraph g("MatMul");
    g.input("A", DType::kF32, {3}).input("B", DType::kF32, {3});
    expect_close(g.run1({v, v}), {}, {5.25}, 0, 0);
  }
  {
    OpGraph g("MatMul");
    g.input("A", DType::kF64, {3}).input("B", DType::kF64, {2, 3, 4});
    expect_close(g.run1({f64({3}, {1, -2, 0.5}), f64({2, 3, 4}, pattern(24, 7, 1, 11, 3))}), {2, 4},
                 {-3.1666666666666665, 2.9999999999999996, -3.666666666666667, -3.0,
                  2.9999999999999996, -3.666666666666667, -3.0, 3.1666666666666665},
                 1e-12, 1e-12);
  }
}

TEST(MatMul, SymbolicShapes) {
  OpGraph g("MatMul");
  g.input("A", DType::kF32, {sym("N"), sym("S"), 64}).input("B", DType::kF32, {64, 10});
  ASSERT_TRUE(g.infer().ok());
  EXPECT_EQ(shape_to_string(g.output_shape()), "[N,S,10]");
  OpGraph b("MatMul");
  b.input("A", DType::kF32, {sym("N"), 1, 4, 8}).input("B", DType::kF32, {3, 8, 2});
  ASSERT_TRUE(b.infer().ok());
  EXPECT_EQ(shape_to_string(b.output_shape()), "[N,3,4,2]");
}

TEST(MatMul, BadInputs) {
  {
    OpGraph g("MatMul");
    g.input("A", DType::kF32, {2, 3}).input("B", DType::kF32, {4, 5});
    EXPECT_TRUE(
        has_error(g.infer(), StatusCode::kInvalidArgument, {"contracted dim", "must be 3, got 4"}));
  }
  {
    OpGraph g("MatMul");
    g.input("A", DType::kF32, {2, 2, 3}).input("B", DType::kF32, {3, 3, 5});
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                          {"cannot broadcast input 0 'A' batch dims"}));
  }
  {
    OpGraph g("MatMul");
    g.input("A", DType::kF32, {}).input("B", DType::kF32, {3});
    EXPECT_TRUE(
        has_error(g.infer(), StatusCode::kInvalidArgument, {"input 0 'A' must have rank >= 1"}));
  }
  {
    OpGraph g("MatMul");
    g.input("A", DType::kF32, {sym("N"), 3}).input("B", DType::kF32, {sym("K"), 5});
    // K against 3 cannot be proven: assumed (K must be 3 when bound).
    EXPECT_TRUE(g.infer().ok());
  }
}

}  // namespace
}  // namespace kiln::graph_eval
