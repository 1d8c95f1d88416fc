// A small If imported as both branches plus Where: the flattened graph evaluates to the branch
// the condition picks, nested Ifs and outer-scope reads included; a large If stays one node with
// its branches as bodies and explicit captures; malformed Ifs are refused naming the node. Expected
// values are worked out by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/graph_eval/graph_eval.h"
#include "kiln/onnx/importer.h"
#include "kiln/onnx/inline_if.h"
#include "tests/support/onnx/test_models.h"

namespace kiln::onnx_import {
namespace {

using ::testing::HasSubstr;
using testing::ModelBuilder;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kBool = onnx::TensorProto::BOOL;

StatusOr<ir::Graph> import(const ModelBuilder& b) {
  std::string bytes = b.bytes();
  return import_bytes(bytes.data(), bytes.size(), "", {});
}

onnx::NodeProto* add_node(onnx::GraphProto& g, const std::string& op,
                          std::vector<std::string> inputs, std::vector<std::string> outputs,
                          const std::string& name = "") {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : inputs) n->add_input(i);
  for (auto& o : outputs) n->add_output(o);
  return n;
}

void add_output(onnx::GraphProto& g, const std::string& name) {
  auto* o = g.add_output();
  o->set_name(name);
  o->mutable_type()->mutable_tensor_type()->set_elem_type(kFloat);
}

// A scalar float Constant node inside `g`.
void add_scalar_constant(onnx::GraphProto& g, const std::string& name, float value) {
  onnx::NodeProto* c = add_node(g, "Constant", {}, {name});
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(kFloat);
  a->mutable_t()->add_float_data(value);
}

void set_branch(onnx::NodeProto* node, const char* attribute, onnx::GraphProto branch) {
  auto* a = node->add_attribute();
  a->set_name(attribute);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = std::move(branch);
}

// then: x + 1 (a Constant inside the branch); else: x * x.
void add_if(onnx::GraphProto& g, const std::string& cond, const std::string& out,
            const std::string& name) {
  onnx::GraphProto then_branch, else_branch;
  then_branch.set_name("then");
  add_scalar_constant(then_branch, "one", 1.0f);
  add_node(then_branch, "Add", {"x", "one"}, {"sum"}, "add");
  add_output(then_branch, "sum");
  else_branch.set_name("else");
  add_node(else_branch, "Mul", {"x", "x"}, {"square"}, "mul");
  add_output(else_branch, "square");
  onnx::NodeProto* node = add_node(g, "If", {cond}, {out}, name);
  set_branch(node, "then_branch", std::move(then_branch));
  set_branch(node, "else_branch", std::move(else_branch));
}

Tensor floats(const std::vector<float>& v) {
  Tensor t = Tensor::create(DType::kF32, {static_cast<int64_t>(v.size())}).value();
  std::memcpy(t.mutable_data(), v.data(), v.size() * sizeof(float));
  return t;
}

Tensor flag(bool b) {
  Tensor t = Tensor::create(DType::kBool, {}).value();
  *t.mutable_data() = std::byte{b ? uint8_t{1} : uint8_t{0}};
  return t;
}

std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.element_count()));
  std::memcpy(v.data(), t.data(), v.size() * sizeof(float));
  return v;
}

std::vector<float> evaluate(const ir::Graph& g, std::vector<Tensor> inputs) {
  auto out = graph_eval::evaluate_graph(g, inputs);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? values(out->at(0)) : std::vector<float>{};
}

TEST(InlineIf, BothBranchesCompiledAndTheConditionSelects) {
  ModelBuilder b;
  b.input("cond", kBool, {});
  b.input("x", kFloat, {std::string("N")});
  add_if(b.graph(), "cond", "y", "choose");
  b.output("y");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  for (const ir::Node& node : g->nodes()) EXPECT_NE(node.op_type, "If");
  EXPECT_EQ(shape_to_string(g->value(*g->find_value("y")).shape), "[N]");
  EXPECT_EQ(evaluate(*g, {flag(true), floats({1, 2, 3})}), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(evaluate(*g, {flag(false), floats({1, 2, 3, -4})}), (std::vector<float>{1, 4, 9, 16}));
}

TEST(InlineIf, NestedIfReadsOuterAndBranchValues) {
  // outer: if a then (if b then (x+1) else (x*x)) + x else x * 2 (from a branch initializer)
  ModelBuilder b;
  b.input("a", kBool, {int64_t{1}});  // a one-element condition, not only a scalar
  b.input("b", kBool, {});
  b.input("x", kFloat, {int64_t{2}});
  onnx::GraphProto then_branch, else_branch;
  add_if(then_branch, "b", "inner", "inner_if");
  add_node(then_branch, "Add", {"inner", "x"}, {"t"});
  add_output(then_branch, "t");
  auto* two = else_branch.add_initializer();
  two->set_name("two");
  two->set_data_type(kFloat);
  two->add_float_data(2.0f);
  add_node(else_branch, "Mul", {"x", "two"}, {"e"});
  add_output(else_branch, "e");
  onnx::NodeProto* outer = add_node(b.graph(), "If", {"a"}, {"y"}, "outer_if");
  set_branch(outer, "then_branch", std::move(then_branch));
  set_branch(outer, "else_branch", std::move(else_branch));
  b.output("y");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto a = [](bool v) {
    Tensor t = Tensor::create(DType::kBool, {1}).value();
    *t.mutable_data() = std::byte{v ? uint8_t{1} : uint8_t{0}};
    return t;
  };
  const Tensor x = floats({3, -1});
  EXPECT_EQ(evaluate(*g, {a(true), flag(true), x}), (std::vector<float>{7, -1}));
  EXPECT_EQ(evaluate(*g, {a(true), flag(false), x}), (std::vector<float>{12, 0}));
  EXPECT_EQ(evaluate(*g, {a(false), flag(true), x}), (std::vector<float>{6, -2}));
  EXPECT_EQ(shape_to_string(g->value(*g->find_value("y")).shape), "[2]");
}

TEST(InlineIf, MalformedIfIsRefusedNamingTheNode) {
  {
    ModelBuilder b;
    b.input("cond", kBool, {});
    b.input("x", kFloat, {int64_t{2}});
    onnx::GraphProto then_branch;
    add_node(then_branch, "Neg", {"x"}, {"n"});
    add_output(then_branch, "n");
    set_branch(add_node(b.graph(), "If", {"cond"}, {"y"}, "half"), "then_branch",
               std::move(then_branch));
    b.output("y");
    auto g = import(b);
    ASSERT_FALSE(g.ok());
    EXPECT_THAT(g.status().message(),
                HasSubstr("node 'half' (If): attribute 'else_branch' (a graph) is missing"));
  }
  {
    ModelBuilder b;
    b.input("cond", kBool, {});
    b.input("x", kFloat, {int64_t{2}});
    onnx::GraphProto one, two;
    add_node(one, "Neg", {"x"}, {"n"});
    add_output(one, "n");
    add_node(two, "Neg", {"x"}, {"m"});
    add_node(two, "Abs", {"x"}, {"k"});
    add_output(two, "m");
    add_output(two, "k");
    onnx::NodeProto* node = add_node(b.graph(), "If", {"cond"}, {"y"}, "uneven");
    set_branch(node, "then_branch", std::move(one));
    set_branch(node, "else_branch", std::move(two));
    b.output("y");
    auto g = import(b);
    ASSERT_FALSE(g.ok());
    EXPECT_THAT(g.status().message(),
                HasSubstr("node 'uneven' (If): else_branch has 2 outputs; the node has 1"));
  }
}

TEST(InlineIf, NestingBeyondTheLimitIsRefused) {
  // Each level: then = the next level's If, else = x * x.
  auto nested = [](int levels) {
    ModelBuilder b;
    b.input("cond", kBool, {});
    b.input("x", kFloat, {int64_t{2}});
    onnx::GraphProto innermost;
    add_if(innermost, "cond", "y", "level0");
    add_output(innermost, "y");
    for (int level = 1; level < levels; ++level) {
      onnx::GraphProto enclosing, other;
      add_node(other, "Mul", {"x", "x"}, {"y"});
      add_output(other, "y");
      onnx::NodeProto* node =
          add_node(enclosing, "If", {"cond"}, {"y"}, "level" + std::to_string(level));
      set_branch(node, "then_branch", std::move(innermost));
      set_branch(node, "else_branch", std::move(other));
      add_output(enclosing, "y");
      innermost = std::move(enclosing);
    }
    *b.graph().mutable_node() = innermost.node();
    b.output("y");
    return b;
  };
  auto deepest_allowed = import(nested(kMaxIfNesting));
  ASSERT_TRUE(deepest_allowed.ok()) << deepest_allowed.status().to_string();
  EXPECT_EQ(evaluate(*deepest_allowed, {flag(true), floats({2, 3})}), (std::vector<float>{3, 4}));
  // The innermost three levels are small enough to inline (kMaxInlinedIfNodes); the others stay
  // If nodes with bodies, nested one level per If.
  auto too_deep = import(nested(kMaxIfNesting + 4));
  ASSERT_FALSE(too_deep.ok());
  EXPECT_THAT(too_deep.status().message(), HasSubstr("(If): bodies nested more than 16 deep"));
}

TEST(InlineIf, ALargeIfStaysOneNodeWithItsBranchesAsBodies) {
  // then: x + 1 nine times; else: x * x. The branches hold 10 nodes together, over the limit.
  ModelBuilder b;
  b.input("cond", kBool, {});
  b.input("x", kFloat, {std::string("N")});
  onnx::GraphProto then_branch, else_branch;
  add_scalar_constant(then_branch, "one", 1.0f);
  std::string at = "x";
  for (int k = 0; k < 9; ++k) {
    const std::string next = "t" + std::to_string(k);
    add_node(then_branch, "Add", {at, "one"}, {next});
    at = next;
  }
  add_output(then_branch, at);
  add_node(else_branch, "Mul", {"x", "x"}, {"square"});
  add_output(else_branch, "square");
  onnx::NodeProto* node = add_node(b.graph(), "If", {"cond"}, {"y"}, "big");
  set_branch(node, "then_branch", std::move(then_branch));
  set_branch(node, "else_branch", std::move(else_branch));
  b.output("y");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->nodes().size(), 1u);
  const ir::Node& kept = g->nodes()[0];
  EXPECT_EQ(kept.op_type, "If");
  ASSERT_EQ(kept.bodies.size(), 2u);
  // The outer value each branch reads (x) is an explicit capture: an input of the node and of
  // the branch.
  EXPECT_EQ(kept.attributes.get_int(ir::kCapturesAttribute, -1).value(), 2);
  ASSERT_EQ(kept.inputs.size(), 3u);
  EXPECT_EQ(g->value(kept.inputs[1]).name, "x");
  EXPECT_EQ(g->value(kept.inputs[2]).name, "x");
  ASSERT_EQ(kept.bodies[0]->inputs().size(), 1u);
  EXPECT_EQ(kept.bodies[0]->value(kept.bodies[0]->inputs()[0]).name, "x");
  EXPECT_EQ(kept.bodies[0]->nodes().size(), 9u);
  // Both branches give [N]: so does the If.
  EXPECT_EQ(shape_to_string(g->value(kept.outputs[0]).shape), "[N]");
  EXPECT_TRUE(kept.data_symbols.empty());
  EXPECT_EQ(evaluate(*g, {flag(true), floats({2, 3})}), (std::vector<float>{11, 12}));
  EXPECT_EQ(evaluate(*g, {flag(false), floats({2, 3})}), (std::vector<float>{4, 9}));
}

TEST(InlineIf, SubgraphsOfOtherOpsAreRefusedNamingNodeAndAttribute) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{2}});
  onnx::GraphProto body;
  add_node(body, "Neg", {"x"}, {"n"});
  add_output(body, "n");
  set_branch(add_node(b.graph(), "Neg", {"x"}, {"y"}, "neg0"), "body", std::move(body));
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(),
              HasSubstr("node 'neg0' (Neg): attribute 'body' holds a subgraph; of the "
                        "control-flow ops kiln supports only Loop, Scan, If and SequenceMap"));
}

}  // namespace
}  // namespace kiln::onnx_import
