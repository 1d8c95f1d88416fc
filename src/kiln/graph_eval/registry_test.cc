// Registry lookup and versioning, infer_graph / unsupported_ops / evaluate_graph behaviour.
#include "kiln/graph_eval/graph_eval.h"

#include <gtest/gtest.h>

#include "tests/support/expect.h"
#include "tests/support/graph_eval/op_graph.h"

namespace kiln::graph_eval {
namespace {

using testing::expect_close;
using testing::f32;
using testing::has_error;
using testing::pattern;
using testing::sym;

// An op whose output is an i64 [kVersion]: which definition ran shows in the shape.
template <int64_t kVersion>
Status infer_version(kernels::InferArgs& args) {
  args.outputs = {ValueType{DType::kI64, {DimExpr(kVersion)}}};
  return ok_status();
}

// `op` must outlive the registry (OpDef holds a string_view): the tests pass literals.
template <int64_t kVersion>
OpDef named(std::string_view op) {
  return OpDef{.op_type = op, .infer = infer_version<kVersion>, .since_version = kVersion};
}

TEST(Registry, VersionedLookup) {
  Registry r;
  r.add(named<1>("Foo"));
  r.add(named<13>("Foo"));
  r.add(named<6>("Bar"));
  EXPECT_EQ(r.find("Foo")->since_version, 13);
  EXPECT_EQ(r.find("Foo", 12)->since_version, 1);
  EXPECT_EQ(r.find("Foo", 13)->since_version, 13);
  EXPECT_EQ(r.find("Foo", 18)->since_version, 13);
  EXPECT_EQ(r.find("Bar", 5), nullptr);
  EXPECT_EQ(r.find("Baz"), nullptr);
  EXPECT_EQ(r.op_types(), (std::vector<std::string>{"Bar", "Foo"}));
  r.add(named<13>("Foo"));  // replaces, does not duplicate
  EXPECT_EQ(r.op_types().size(), 2u);
}

TEST(Registry, DefaultRegistryHasEveryOp) {
  const Registry& r = default_registry();
  EXPECT_EQ(&r, &default_registry());
  for (const char* op : {"Conv", "BatchNormalization", "Relu", "Add", "Sub", "Mul", "Div", "Sum",
                         "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Reshape",
                         "Identity", "Dropout", "Constant", "Gemm", "MatMul", "Softmax"}) {
    const OpDef* def = r.find(op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_NE(def->infer, nullptr) << op;
    // Constant is turned into values by the importer and has no kernel.
    if (std::string_view(op) != "Constant") {
      EXPECT_NE(def->make, nullptr) << op;
    }
  }
  EXPECT_EQ(r.find("Softmax", 12)->since_version, 1);
  EXPECT_EQ(r.find("Softmax", 13)->since_version, 13);
}

ir::Graph graph_with_ops(const std::vector<std::pair<std::string, std::string>>& nodes) {
  ir::Graph g;
  ir::ValueId x = g.add_input("x", DType::kF32, {sym("N"), 4});
  for (const auto& [name, op] : nodes) {
    ir::ValueId y = g.add_value({name + "_out", DType::kF32, {}, {}, {}});
    g.add_node({name, op, {x}, {y}, {}, {}});
    x = y;
  }
  g.add_output(x);
  return g;
}

TEST(Registry, UnsupportedOpsListsEachTypeWithItsNodes) {
  ir::Graph g = graph_with_ops({{"a", "Foo"}, {"r", "Relu"}, {"b", "Bar"}, {"c", "Foo"}});
  EXPECT_EQ(unsupported_ops(g),
            (std::vector<std::string>{"Foo (node 'a', node 'c')", "Bar (node 'b')"}));
  EXPECT_TRUE(unsupported_ops(graph_with_ops({{"r", "Relu"}})).empty());
  // Softmax exists only from opset 1, so every opset >= 1 supports it.
  ir::Graph s = graph_with_ops({{"s", "Softmax"}});
  s.opset = 9;
  EXPECT_TRUE(unsupported_ops(s).empty());
}

TEST(Registry, InferGraphNamesTheNode) {
  ir::Graph g = graph_with_ops({{"r", "Relu"}, {"mystery", "Foo"}});
  EXPECT_TRUE(has_error(infer_graph(g), StatusCode::kUnimplemented,
                        {"unsupported op type 'Foo'", "in node 'mystery' (Foo)"}));
  // The node before the failure was inferred.
  EXPECT_EQ(shape_to_string(g.value(g.node(0).outputs[0]).shape), "[N,4]");
}

TEST(Registry, InferNodeUsesTheGraphOpset) {
  Registry r;
  r.add(named<1>("Foo"));
  r.add(named<13>("Foo"));
  ir::Graph g = graph_with_ops({{"f", "Foo"}});
  g.opset = 11;
  ASSERT_TRUE(infer_node(g, 0, r).ok());
  EXPECT_EQ(g.value(g.node(0).outputs[0]).shape, (Shape{DimExpr(1)}));
  EXPECT_EQ(g.value(g.node(0).outputs[0]).dtype, DType::kI64);
  g.opset = 13;
  ASSERT_TRUE(infer_node(g, 0, r).ok());
  EXPECT_EQ(g.value(g.node(0).outputs[0]).shape, (Shape{DimExpr(13)}));
  EXPECT_TRUE(has_error(infer_node(g, 5, r), StatusCode::kInvalidArgument, {"out of range"}));
}

// x:[N,2,5,5] -> Conv(3x3, pad 1) -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Softmax.
ir::Graph small_net() {
  ir::Graph g;
  g.name = "small";
  ir::ValueId x = g.add_input("x", DType::kF32, {sym("N"), 2, 5, 5});
  ir::ValueId w = g.add_constant("w", f32({3, 2, 3, 3}, pattern(54, 5, 1, 7, 6)));
  ir::ValueId fc = g.add_constant("fc", f32({4, 3}, pattern(12, 7, 2, 5, 2)));
  ir::ValueId fb = g.add_constant("fb", f32({4}, {0.1, -0.1, 0.2, 0}));
  auto value = [&](const char* name) { return g.add_value({name, DType::kF32, {}, {}, {}}); };
  ir::ValueId c = value("c"), r = value("r"), p = value("p"), f = value("f"), m = value("m"),
              s = value("s");
  ir::Node conv{"conv", "Conv", {x, w}, {c}, {}, {}};
  conv.attributes.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  g.add_node(conv);
  g.add_node({"relu", "Relu", {c}, {r}, {}, {}});
  g.add_node({"gap", "GlobalAveragePool", {r}, {p}, {}, {}});
  g.add_node({"flat", "Flatten", {p}, {f}, {}, {}});
  ir::Node gemm{"fc", "Gemm", {f, fc, fb}, {m}, {}, {}};
  gemm.attributes.set("transB", int64_t{1});
  g.add_node(gemm);
  g.add_node({"softmax", "Softmax", {m}, {s}, {}, {}});
  g.add_output(s);
  return g;
}

TEST(EvaluateGraph, MatchesNodeByNodeEvaluationAndKeepsIntermediates) {
  ir::Graph g = small_net();
  ASSERT_TRUE(infer_graph(g).ok());
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[0]).shape), "[N,4]");
  Tensor x = f32({3, 2, 5, 5}, pattern(150, 7, 3, 11, 4));
  std::map<ir::ValueId, Tensor> intermediates;
  auto out = evaluate_graph(g, std::vector<Tensor>{x}, &intermediates);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].shape(), (ConcreteShape{3, 4}));
  EXPECT_EQ(intermediates.size(), 6u);
  // Re-run each node alone on the recorded inputs: same bits.
  std::map<ir::ValueId, Tensor> values = intermediates;
  values[g.inputs()[0]] = x;
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    std::vector<Tensor> args;
    for (ir::ValueId in : g.node(n).inputs) {
      args.push_back(g.value(in).constant ? *g.value(in).constant : values.at(in));
    }
    auto y = evaluate_node(g, static_cast<ir::NodeId>(n), args);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    const Tensor& expected = intermediates.at(g.node(n).outputs[0]);
    ASSERT_EQ((*y)[0].shape(), expected.shape());
    for (int64_t i = 0; i < expected.element_count(); ++i) {
      ASSERT_EQ((*y)[0].values<float>()[i], expected.values<float>()[i]);
    }
  }
  // Softmax rows sum to 1.
  for (int n = 0; n < 3; ++n) {
    double sum = 0;
    for (int j = 0; j < 4; ++j) sum += (*out)[0].values<float>()[n * 4 + j];
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

TEST(EvaluateGraph, ValidatesInputs) {
  ir::Graph g;
  ir::ValueId a = g.add_input("a", DType::kF32, {sym("N"), 2});
  ir::ValueId b = g.add_input("b", DType::kF32, {sym("N"), 2});
  ir::ValueId y = g.add_value({"y", DType::kF32, {}, {}, {}});
  g.add_node({"add", "Add", {a, b}, {y}, {}, {}});
  g.add_output(y);
  ASSERT_TRUE(infer_graph(g).ok());
  Tensor ok2 = f32({3, 2}, std::vector<double>(6, 1.0));
  auto out = evaluate_graph(g, std::vector<Tensor>{ok2, ok2});
  ASSERT_TRUE(out.ok());
  expect_close((*out)[0], {3, 2}, std::vector<double>(6, 2.0), 0, 0);

  EXPECT_TRUE(has_error(evaluate_graph(g, std::vector<Tensor>{ok2}).status(),
                        StatusCode::kInvalidArgument, {"has 2 inputs, got 1 tensors"}));
  Tensor n4 = f32({4, 2}, std::vector<double>(8, 1.0));
  EXPECT_TRUE(has_error(evaluate_graph(g, std::vector<Tensor>{ok2, n4}).status(),
                        StatusCode::kInvalidArgument,
                        {"graph input 1 'b' dim 0 is symbol 'N' = 4", "already bound to 3"}));
  Tensor wrong_dim = f32({3, 5}, std::vector<double>(15, 1.0));
  EXPECT_TRUE(has_error(evaluate_graph(g, std::vector<Tensor>{ok2, wrong_dim}).status(),
                        StatusCode::kInvalidArgument,
                        {"graph input 1 'b' must have shape [N,2], got [3,5]"}));
  Tensor wrong_rank = f32({6}, std::vector<double>(6, 1.0));
  EXPECT_TRUE(has_error(evaluate_graph(g, std::vector<Tensor>{ok2, wrong_rank}).status(),
                        StatusCode::kInvalidArgument,
                        {"graph input 1 'b' must have shape [N,2] (rank 2)"}));
  Tensor wrong_type = testing::f64({3, 2}, std::vector<double>(6, 1.0));
  EXPECT_TRUE(has_error(evaluate_graph(g, std::vector<Tensor>{ok2, wrong_type}).status(),
                        StatusCode::kInvalidArgument, {"must have dtype f32, got f64"}));
  EXPECT_TRUE(has_error(evaluate_graph(g, std::vector<Tensor>{ok2, Tensor()}).status(),
                        StatusCode::kInvalidArgument, {"has no data"}));
}

TEST(EvaluateGraph, DerivedDimsAreCheckedAndMissingValuesReported) {
  ir::Graph g;
  ir::ValueId a = g.add_input("a", DType::kF32, {sym("N")});
  ir::ValueId b = g.add_input("b", DType::kF32, {sym("N") * DimExpr(2)});
  g.add_output(b);
  (void)a;
  EXPECT_TRUE(
      evaluate_graph(g, std::vector<Tensor>{f32({2}, {1, 2}), f32({4}, {1, 2, 3, 4})}).ok());
  EXPECT_TRUE(has_error(
      evaluate_graph(g, std::vector<Tensor>{f32({2}, {1, 2}), f32({3}, {1, 2, 3})}).status(),
      StatusCode::kInvalidArgument, {"dim 0 (2*N) must be 4"}));

  ir::Graph bad_ids = graph_with_ops({{"r", "Relu"}});
  bad_ids.mutable_nodes()[0].outputs[0] = 99;
  EXPECT_TRUE(
      has_error(evaluate_graph(bad_ids, std::vector<Tensor>{f32({1, 4}, {1, 2, 3, 4})}).status(),
                StatusCode::kInvalidArgument, {"output value id 99 is out of range"}));
  EXPECT_TRUE(has_error(infer_graph(bad_ids), StatusCode::kInternal, {"out of range"}));

  ir::Graph h;
  ir::ValueId x = h.add_input("x", DType::kF32, {2});
  ir::ValueId orphan = h.add_value({"orphan", DType::kF32, {2}, {}, {}});
  ir::ValueId y = h.add_value({"y", DType::kF32, {2}, {}, {}});
  h.add_node({"add", "Add", {x, orphan}, {y}, {}, {}});
  h.add_output(y);
  EXPECT_TRUE(has_error(evaluate_graph(h, std::vector<Tensor>{f32({2}, {1, 2})}).status(),
                        StatusCode::kInvalidArgument,
                        {"input 'orphan' has no value", "in node 'add' (Add)"}));
}

}  // namespace
}  // namespace kiln::graph_eval
