#include "kiln/ir/graph.h"

#include <gtest/gtest.h>

namespace kiln::ir {
namespace {

Graph two_relus() {
  Graph g;
  g.name = "g";
  ValueId x = g.add_input("x", DType::kF32, {DimExpr::symbol("N"), 4});
  ValueId a = g.add_value({"a", DType::kF32, {DimExpr::symbol("N"), 4}, {}, {}});
  ValueId b = g.add_value({"b", DType::kF32, {DimExpr::symbol("N"), 4}, {}, {}});
  g.add_node({"r0", "Relu", {x}, {a}, {}, {}});
  g.add_node({"r1", "Relu", {a}, {b}, {}, {}});
  g.add_output(b);
  return g;
}

TEST(Graph, VerifiesWellFormedGraph) {
  Graph g = two_relus();
  EXPECT_TRUE(verify_graph(g).ok());
  EXPECT_EQ(g.node(0).origins, std::vector<std::string>{"r0"});
}

TEST(Graph, RemoveDeadDropsUnusedNodes) {
  Graph g = two_relus();
  ValueId unused = g.add_value({"u", DType::kF32, {4}, {}, {}});
  g.add_node({"dead", "Relu", {0}, {unused}, {}, {}});
  g.remove_dead();
  EXPECT_EQ(g.nodes().size(), 2u);
  EXPECT_FALSE(g.find_value("u").has_value());
  EXPECT_TRUE(verify_graph(g).ok());
}

TEST(Graph, ReplaceUsesBypassesNode) {
  Graph g = two_relus();
  g.replace_uses(g.find_value("b").value(), g.find_value("a").value());
  g.remove_dead();
  EXPECT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "a");
}

TEST(Graph, VerifyRejectsUseBeforeDefinition) {
  Graph g;
  ValueId a = g.add_value({"a", DType::kF32, {4}, {}, {}});
  ValueId b = g.add_value({"b", DType::kF32, {4}, {}, {}});
  g.add_node({"n1", "Relu", {a}, {b}, {}, {}});
  g.add_node({"n0", "Relu", {b}, {a}, {}, {}});
  g.add_output(b);
  Status s = verify_graph(g);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("n1"), std::string::npos);
}

TEST(Graph, TopologicalSortOrdersNodes) {
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {4});
  ValueId a = g.add_value({"a", DType::kF32, {4}, {}, {}});
  ValueId b = g.add_value({"b", DType::kF32, {4}, {}, {}});
  g.add_node({"second", "Relu", {a}, {b}, {}, {}});
  g.add_node({"first", "Relu", {x}, {a}, {}, {}});
  g.add_output(b);
  ASSERT_TRUE(g.topological_sort().ok());
  EXPECT_EQ(g.node(0).name, "first");
  EXPECT_TRUE(verify_graph(g).ok());
}

// A fusion that gives a node a later node's output (an FPN's Add(conv, Resize) absorbed into the
// conv) leaves the erased Add listing that output: it must not count as defined, or a consumer of
// it is placed before the fused node ("used before it is defined" once all FPN sizes were bound).
TEST(Graph, TopologicalSortIgnoresOutputsOfErasedNodes) {
  Graph g;
  g.name = "g";
  ValueId x = g.add_input("x", DType::kF32, {4});
  ValueId z = g.add_input("z", DType::kF32, {4});
  ValueId y = g.add_value({"y", DType::kF32, {4}, {}, {}});
  ValueId r = g.add_value({"r", DType::kF32, {4}, {}, {}});
  ValueId s = g.add_value({"s", DType::kF32, {4}, {}, {}});
  ValueId t = g.add_value({"t", DType::kF32, {4}, {}, {}});
  const NodeId conv = g.add_node({"conv", "Relu", {x}, {y}, {}, {}});
  g.add_node({"resize", "Relu", {z}, {r}, {}, {}});
  const NodeId add = g.add_node({"add", "Add", {y, r}, {s}, {}, {}});
  g.add_node({"after", "Relu", {s}, {t}, {}, {}});
  g.add_output(t);
  // What absorb_successor does: the add is erased, the conv takes its second input and output.
  g.erase_node(add);
  g.value(y).producer.reset();
  g.node(conv).inputs.push_back(r);
  g.node(conv).outputs[0] = s;
  g.value(s).producer = conv;
  ASSERT_TRUE(g.topological_sort().ok());
  g.remove_dead();
  Status verified = verify_graph(g);
  EXPECT_TRUE(verified.ok()) << verified.to_string();
}

}  // namespace
}  // namespace kiln::ir
