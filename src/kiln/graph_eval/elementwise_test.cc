// Relu, Add, Sub, Mul, Div, Sum (portable kernels, through the registry): small hand-computed
// cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/support/expect.h"
#include "tests/support/graph_eval/op_graph.h"

namespace kiln::graph_eval {
namespace {

using testing::expect_close;
using testing::f32;
using testing::f64;
using testing::has_error;
using testing::i64;
using testing::OpGraph;
using testing::sym;

Tensor binary(const char* op, Tensor a, Tensor b) {
  OpGraph g(op);
  g.input("A", a.dtype(), shape_from_concrete(a.shape()))
      .input("B", b.dtype(), shape_from_concrete(b.shape()));
  return g.run1({a, b});
}

TEST(Relu, ClampsNegativesAndKeepsNaN) {
  OpGraph g("Relu");
  g.input("X", DType::kF32, {5});
  Tensor y = g.run1({f32({5}, {-2, -0.5, 0, 0.5, std::numeric_limits<double>::quiet_NaN()})});
  expect_close(y, {5}, {0, 0, 0, 0.5, std::numeric_limits<double>::quiet_NaN()});
  OpGraph ints("Relu");
  ints.input("X", DType::kI64, {3});
  expect_close(ints.run1({i64({3}, {-4, 0, 7})}), {3}, {0, 0, 7}, 0, 0);
}

// The reference evaluator keeps NaN through every activation, as ONNX Runtime 1.30 and PyTorch
// do (checked by running each op there on the same input): Relu, Clip, LeakyRelu, Sigmoid,
// HardSigmoid, HardSwish, Elu, Selu, Celu, Softplus, Mish, PRelu, Max and Min (either operand
// order).
// Shrink and ThresholdedRelu give 0 for NaN by their ONNX definitions, in ONNX Runtime too.
TEST(Activations, ReferenceKeepsNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = f32({4}, {nan, -2, 0.5, 7});
  auto unary = [&](const char* op, std::initializer_list<std::pair<std::string, Attribute>> a) {
    OpGraph g(op);
    g.input("X", DType::kF32, {4});
    for (const auto& [name, value] : a) g.attr(name, value);
    return g.run1({x});
  };
  for (const char* op : {"Relu", "Sigmoid", "HardSwish", "Elu", "Selu", "Celu", "Softplus", "Mish",
                         "Softsign", "Tanh"}) {
    SCOPED_TRACE(op);
    Tensor y = unary(op, {});
    EXPECT_TRUE(std::isnan(element_as_double(y, 0)));
    for (int64_t i = 1; i < 4; ++i) EXPECT_TRUE(std::isfinite(element_as_double(y, i))) << i;
  }
  expect_close(unary("LeakyRelu", {{"alpha", 0.1}}), {4}, {nan, -0.2, 0.5, 7});
  expect_close(unary("HardSigmoid", {{"alpha", 0.2}, {"beta", 0.5}}), {4}, {nan, 0.1, 0.6, 1});
  expect_close(unary("Shrink", {{"lambd", 0.5}, {"bias", 0.1}}), {4}, {0, -1.9, 0, 6.9});
  expect_close(unary("ThresholdedRelu", {{"alpha", 1.0}}), {4}, {0, 0, 0, 7});
  OpGraph clip("Clip");
  clip.input("X", DType::kF32, {4}).constant("min", f32({}, {0})).constant("max", f32({}, {6}));
  expect_close(clip.run1({x}), {4}, {nan, 0, 0.5, 6});
  OpGraph prelu("PRelu");
  prelu.input("X", DType::kF32, {4}).constant("slope", f32({1}, {0.1}));
  expect_close(prelu.run1({x}), {4}, {nan, -0.2, 0.5, 7});
  const Tensor zero = f32({4}, {0, 0, 0, 0});
  expect_close(binary("Max", x, zero), {4}, {nan, 0, 0.5, 7});
  expect_close(binary("Max", zero, x), {4}, {nan, 0, 0.5, 7});
  expect_close(binary("Min", x, zero), {4}, {nan, -2, 0, 0});
  expect_close(binary("Min", zero, x), {4}, {nan, -2, 0, 0});
}

TEST(Binary, BroadcastsRowAndColumn) {
  // [2,3] op [3] and [2,1] op [3] (both directions broadcast).
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor row = f32({3}, {10, 20, 30});
  expect_close(binary("Add", a, row), {2, 3}, {11, 22, 33, 14, 25, 36}, 0, 0);
  expect_close(binary("Sub", a, row), {2, 3}, {-9, -18, -27, -6, -15, -24}, 0, 0);
  Tensor col = f64({2, 1}, {2, -1});
  Tensor r64 = f64({3}, {1, 2, 4});
  expect_close(binary("Mul", col, r64), {2, 3}, {2, 4, 8, -1, -2, -4}, 0, 0);
  expect_close(binary("Div", col, r64), {2, 3}, {2, 1, 0.5, -1, -0.5, -0.25}, 0, 0);
  // Scalar with a tensor.
  expect_close(binary("Mul", f32({}, {3}), a), {2, 3}, {3, 6, 9, 12, 15, 18}, 0, 0);
}

TEST(Binary, F32RoundsOnceLikeNativeFloat) {
  Tensor y = binary("Div", f32({1}, {1}), f32({1}, {3}));
  EXPECT_EQ(y.values<float>()[0], 1.0f / 3.0f);
  Tensor z = binary("Add", f32({1}, {0.1}), f32({1}, {0.2}));
  EXPECT_EQ(z.values<float>()[0], 0.1f + 0.2f);
}

TEST(Binary, IntegerSemantics) {
  Tensor a = i64({4}, {-7, 7, -7, 7});
  Tensor b = i64({4}, {2, 2, -2, -2});
  expect_close(binary("Div", a, b), {4}, {-3, 3, 3, -3}, 0, 0);  // truncates toward zero
  expect_close(binary("Mul", a, b), {4}, {-14, 14, 14, -14}, 0, 0);
  Tensor y = binary("Add", i64({1}, std::vector<double>{9007199254740993.0}), i64({1}, {0}));
  EXPECT_EQ(y.dtype(), DType::kI64);
  // INT64_MIN / -1 wraps instead of trapping.
  Tensor lo = Tensor::create(DType::kI64, {1}).value();
  lo.mutable_values<int64_t>()[0] = std::numeric_limits<int64_t>::min();
  Tensor q = binary("Div", lo, i64({1}, {-1}));
  EXPECT_EQ(q.values<int64_t>()[0], std::numeric_limits<int64_t>::min());
  OpGraph g("Div");
  g.input("A", DType::kI64, {2}).input("B", DType::kI64, {2});
  auto out = g.run({i64({2}, {1, 2}), i64({2}, {1, 0})});
  EXPECT_TRUE(has_error(out.status(), StatusCode::kInvalidArgument,
                        {"integer division by zero", "in node 'n0' (Div)"}));
}

TEST(Binary, SymbolicBroadcasting) {
  OpGraph same("Add");
  same.input("A", DType::kF32, {sym("N"), 3, sym("H")})
      .input("B", DType::kF32, {sym("N"), 3, sym("H")});
  ASSERT_TRUE(same.infer().ok());
  EXPECT_EQ(shape_to_string(same.output_shape()), "[N,3,H]");
  OpGraph ones("Mul");
  ones.input("A", DType::kF32, {sym("N"), 1, 4}).input("B", DType::kF32, {1, sym("C"), 1});
  ASSERT_TRUE(ones.infer().ok());
  EXPECT_EQ(shape_to_string(ones.output_shape()), "[N,C,4]");
  OpGraph two("Add");
  two.input("A", DType::kF32, {sym("N"), 3}).input("B", DType::kF32, {sym("M"), 3});
  // Equal only at run time: assumed, recorded on the graph for the runtime to check.
  ASSERT_TRUE(two.infer().ok());
  EXPECT_EQ(shape_to_string(two.output_shape()), "[N,3]");
  ASSERT_EQ(two.graph().assumptions.size(), 1u);
  EXPECT_EQ(two.graph().assumptions[0].to_string(), "M == N");
  EXPECT_EQ(two.graph().assumptions[0].origin, "node 'n0' (Add)");
  // A run at bound sizes checks the inferred symbolic shape against the result.
  OpGraph run("Sub");
  run.input("A", DType::kF32, {sym("N"), 2}).input("B", DType::kF32, {1, 2});
  expect_close(run.run1({f32({3, 2}, {1, 2, 3, 4, 5, 6}), f32({1, 2}, {1, 1})}), {3, 2},
               {0, 1, 2, 3, 4, 5}, 0, 0);
}

TEST(Binary, BadInputs) {
  OpGraph shapes("Add");
  shapes.input("A", DType::kF32, {2, 3}).input("B", DType::kF32, {4, 3});
  EXPECT_TRUE(has_error(shapes.infer(), StatusCode::kInvalidArgument,
                        {"cannot broadcast", "2 vs 4", "in node 'n0' (Add)"}));
  OpGraph types("Mul");
  types.input("A", DType::kF32, {2}).input("B", DType::kF64, {2});
  EXPECT_TRUE(has_error(types.infer(), StatusCode::kInvalidArgument,
                        {"input 1 'B' must have dtype f32 like input 0 'A', got f64"}));
  OpGraph arity("Sub");
  arity.input("A", DType::kF32, {2});
  EXPECT_TRUE(has_error(arity.infer(), StatusCode::kInvalidArgument, {"expects 2 inputs, got 1"}));
  OpGraph boolean("Add");
  boolean.input("A", DType::kBool, {2}).input("B", DType::kBool, {2});
  EXPECT_TRUE(has_error(boolean.infer(), StatusCode::kUnimplemented,
                        {"input 0 'A' must have dtype", "got bool"}));
  OpGraph legacy("Add", 6);
  legacy.input("A", DType::kF32, {2, 3}).input("B", DType::kF32, {2}).attr("axis", int64_t{0});
  EXPECT_TRUE(has_error(legacy.infer(), StatusCode::kUnimplemented, {"attribute 'axis'"}));
}

TEST(Sum, VariadicWithBroadcasting) {
  OpGraph g("Sum");
  g.input("a", DType::kF32, {2, 2}).input("b", DType::kF32, {2}).input("c", DType::kF32, {2, 1});
  expect_close(g.run1({f32({2, 2}, {1, 2, 3, 4}), f32({2}, {10, 20}), f32({2, 1}, {100, 200})}),
               {2, 2}, {111, 122, 213, 224}, 0, 0);
  OpGraph one("Sum");
  one.input("a", DType::kF64, {3});
  expect_close(one.run1({f64({3}, {1, -2, 3})}), {3}, {1, -2, 3}, 0, 0);
  OpGraph bad("Sum");
  bad.input("a", DType::kF32, {2}).input("b", DType::kF32, {3});
  EXPECT_TRUE(has_error(bad.infer(), StatusCode::kInvalidArgument,
                        {"input 0 'data_0' shape [2] with input 1 'data_1' shape [3]"}));
}

}  // namespace
}  // namespace kiln::graph_eval
