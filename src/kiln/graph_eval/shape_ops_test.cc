// Flatten, Reshape, Identity, Dropout, Constant.
#include <gtest/gtest.h>

#include "tests/support/expect.h"
#include "tests/support/graph_eval/op_graph.h"

namespace kiln::graph_eval {
namespace {

using testing::expect_close;
using testing::f32;
using testing::has_error;
using testing::i64;
using testing::OpGraph;
using testing::sym;

std::vector<double> iota(int64_t n) {
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<double>(i));
  return out;
}

TEST(Flatten, Axes) {
  struct Case {
    int64_t axis;
    ConcreteShape expected;
  };
  for (const Case& c : {Case{0, {1, 120}}, Case{1, {2, 60}}, Case{2, {6, 20}}, Case{4, {120, 1}},
                        Case{-1, {24, 5}}, Case{-4, {1, 120}}}) {
    OpGraph g("Flatten");
    g.input("x", DType::kF32, {2, 3, 4, 5}).attr("axis", c.axis);
    Tensor y = g.run1({f32({2, 3, 4, 5}, iota(120))});
    EXPECT_EQ(y.shape(), c.expected) << "axis " << c.axis;
    expect_close(y, c.expected, iota(120), 0, 0);
  }
  OpGraph s("Flatten");
  s.input("x", DType::kF32, {sym("N"), 2048, 1, 1});
  ASSERT_TRUE(s.infer().ok());
  EXPECT_EQ(shape_to_string(s.output_shape()), "[N,2048]");
  OpGraph bad("Flatten");
  bad.input("x", DType::kF32, {2, 3}).attr("axis", int64_t{3});
  EXPECT_TRUE(has_error(bad.infer(), StatusCode::kInvalidArgument,
                        {"attribute 'axis' = 3 is out of range [-2, 2]"}));
}

OpGraph reshape(Shape in, std::vector<double> target) {
  OpGraph g("Reshape");
  g.input("data", DType::kF32, std::move(in))
      .constant("shape", i64({static_cast<int64_t>(target.size())}, target));
  return g;
}

TEST(Reshape, ZeroCopiesAndMinusOneInfersSymbolically) {
  OpGraph g = reshape({sym("N"), 2048, 1, 1}, {0, -1});
  ASSERT_TRUE(g.infer().ok());
  EXPECT_EQ(shape_to_string(g.output_shape()), "[N,2048]");
  OpGraph h = reshape({sym("N"), 6}, {-1, 3});
  ASSERT_TRUE(h.infer().ok());
  EXPECT_EQ(shape_to_string(h.output_shape()), "[2*N,3]");
  Tensor y = h.run1({f32({2, 6}, iota(12))});
  expect_close(y, {4, 3}, iota(12), 0, 0);
}

TEST(Reshape, ConcreteCases) {
  expect_close(reshape({2, 3, 4}, {4, -1}).run1({f32({2, 3, 4}, iota(24))}), {4, 6}, iota(24));
  expect_close(reshape({2, 3, 4}, {0, 0, -1, 2}).run1({f32({2, 3, 4}, iota(24))}), {2, 3, 2, 2},
               iota(24));
  // allowzero = 1 keeps a literal 0.
  OpGraph z = reshape({0, 3}, {3, 0});
  z.attr("allowzero", int64_t{1});
  ASSERT_TRUE(z.infer().ok());
  EXPECT_EQ(shape_to_string(z.output_shape()), "[3,0]");
}

TEST(Reshape, BadInputs) {
  {
    OpGraph g("Reshape");
    g.input("data", DType::kF32, {2, 3}).input("shape", DType::kI64, {2});
    g.graph().node(0).name = "resnet_reshape0";
    EXPECT_TRUE(has_error(g.infer(), StatusCode::kUnimplemented,
                          {"resnet_reshape0", "input 1 'shape'", "constant"}));
  }
  EXPECT_TRUE(has_error(reshape({2, 3}, {-1, -1}).infer(), StatusCode::kInvalidArgument,
                        {"more than one -1"}));
  EXPECT_TRUE(has_error(reshape({2, 3}, {4, -1}).infer(), StatusCode::kInvalidArgument,
                        {"cannot infer -1", "element count 6 is not a multiple of 4"}));
  EXPECT_TRUE(has_error(reshape({2, 3}, {5}).infer(), StatusCode::kInvalidArgument,
                        {"element count", "must be 6, got 5"}));
  EXPECT_TRUE(has_error(reshape({2, 3}, {-2, 3}).infer(), StatusCode::kInvalidArgument,
                        {"invalid dim -2"}));
  EXPECT_TRUE(has_error(reshape({6}, {0, 0}).infer(), StatusCode::kInvalidArgument,
                        {"copies dim 1 (0)", "rank 1"}));
  // 3*N elements into [-1, 2]: assumed even (checked when N is bound).
  OpGraph odd = reshape({sym("N"), 3}, {-1, 2});
  ASSERT_TRUE(odd.infer().ok());
  EXPECT_EQ(shape_to_string(odd.output_shape()), "[N + floor(N/2),2]");
  ASSERT_EQ(odd.graph().assumptions.size(), 1u);
  EXPECT_EQ(odd.graph().assumptions[0].to_string(), "(3*N) % 2 == 0");
  OpGraph wrong_type("Reshape");
  wrong_type.input("data", DType::kF32, {6}).constant("shape", f32({1}, {6}));
  EXPECT_TRUE(has_error(wrong_type.infer(), StatusCode::kInvalidArgument,
                        {"input 1 'shape' must have dtype i64, got f32"}));
}

TEST(Reshape, ConstantWhoseDataDisagreesWithItsValueTypeIsAnError) {
  // A malformed graph (value says i64, data is f32) must not be read as i64.
  OpGraph g("Reshape");
  g.input("data", DType::kF32, {6}).constant("shape", f32({1}, {6}));
  g.graph().value(g.node().inputs[1]).dtype = DType::kI64;
  EXPECT_TRUE(has_error(g.infer(), StatusCode::kInvalidArgument,
                        {"constant must be a 1-D i64 tensor, got f32"}));
}

TEST(Identity, CopiesAnyDtype) {
  OpGraph g("Identity");
  g.input("x", DType::kI64, {sym("N")});
  expect_close(g.run1({i64({3}, {5, -6, 7})}), {3}, {5, -6, 7}, 0, 0);
}

TEST(Dropout, InferenceIsIdentityWithTrueMask) {
  OpGraph g("Dropout");
  g.input("data", DType::kF32, {sym("N"), 2})
      .constant("ratio", f32({}, {0.5}))
      .constant("training_mode", testing::make_tensor(DType::kBool, {}, {0}))
      .outputs(2);
  auto out = g.run({f32({2, 2}, {1, -2, 3, -4})});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_close((*out)[0], {2, 2}, {1, -2, 3, -4}, 0, 0);
  EXPECT_EQ((*out)[1].dtype(), DType::kBool);
  expect_close((*out)[1], {2, 2}, {1, 1, 1, 1}, 0, 0);
  // Training mode with a constant ratio outside [0, 1) is refused naming the node; a runtime
  // training_mode is read when the graph runs (ratio 0: the identity).
  OpGraph training("Dropout");
  training.input("data", DType::kF32, {2})
      .constant("ratio", f32({}, {1}))
      .constant("training_mode", testing::make_tensor(DType::kBool, {}, {1}));
  EXPECT_TRUE(has_error(training.infer(), StatusCode::kInvalidArgument,
                        {"input 1 'ratio' must be in [0, 1)", "(Dropout)"}));
  OpGraph runtime("Dropout");
  runtime.input("data", DType::kF32, {2})
      .constant("ratio", f32({}, {0}))
      .input("training_mode", DType::kBool, {});
  ASSERT_TRUE(runtime.infer().ok());
  auto r = runtime.run({f32({2}, {1, 2}), testing::make_tensor(DType::kBool, {}, {1})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_close((*r)[0], {2}, {1, 2}, 0, 0);
}

TEST(Constant, IsRegisteredButMustBeFoldedByTheImporter) {
  OpGraph g("Constant");
  g.attr("value_float", 1.0);
  EXPECT_TRUE(unsupported_ops(g.graph()).empty());
  EXPECT_TRUE(has_error(g.infer(), StatusCode::kFailedPrecondition,
                        {"importer", "in node 'n0' (Constant)"}));
}

}  // namespace
}  // namespace kiln::graph_eval
