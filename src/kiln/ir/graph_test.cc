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

}  // namespace
}  // namespace kiln::ir
