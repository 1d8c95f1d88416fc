// Inference of the sequence and optional ops over IR graphs (graph_eval/sequence.h): forms,
// element ranks, the data-dependent dims of a tensor taken out of a sequence, and bad inputs,
// which are errors naming the node. Values are the rules of ONNX's sequence ops (onnx/defs).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/base/sequence_ops.h"
#include "kiln/graph_eval/graph_eval.h"

namespace kiln::graph_eval {
namespace {

using ::testing::HasSubstr;

struct SeqGraph {
  ir::Graph graph;

  ir::ValueId input(const std::string& name, DType dtype, Shape shape) {
    return graph.add_input(name, dtype, std::move(shape));
  }
  ir::ValueId sequence_input(const std::string& name, DType dtype, int64_t element_rank) {
    ir::ValueId id = graph.add_input(name, dtype, {});
    graph.value(id).form = ValueForm::kSequence;
    graph.value(id).element_rank = element_rank;
    return id;
  }
  ir::ValueId node(const std::string& op, std::vector<ir::ValueId> inputs,
                   Attributes attributes = {}) {
    ir::ValueId out = graph.add_value(ir::Value{op + "_out", DType::kF32, {}, {}, {}});
    ir::Node n;
    n.name = op;
    n.op_type = op;
    n.inputs = std::move(inputs);
    n.outputs = {out};
    n.attributes = std::move(attributes);
    graph.add_node(std::move(n));
    return out;
  }
  const ir::Value& value(ir::ValueId id) const { return graph.value(id); }
};

Attributes attrs(std::initializer_list<std::pair<const char*, int64_t>> ints) {
  Attributes a;
  for (const auto& [name, v] : ints) a.set(name, v);
  return a;
}

TEST(SequenceInference, FormsRanksAndDataDependentDims) {
  SeqGraph g;
  ir::ValueId x = g.input("x", DType::kF32, {DimExpr::symbol("N"), DimExpr(3)});
  ir::ValueId pos = g.input("p", DType::kI64, {});
  // SplitToSequence along axis 1 without keepdims: tensors of rank 1.
  ir::ValueId parts = g.node("SplitToSequence", {x}, attrs({{"axis", 1}, {"keepdims", 0}}));
  ir::ValueId at = g.node("SequenceAt", {parts, pos});
  ir::ValueId length = g.node("SequenceLength", {parts});
  ir::ValueId stacked =
      g.node("ConcatFromSequence", {parts}, attrs({{"axis", 0}, {"new_axis", 1}}));
  ir::ValueId wrapped = g.node("Optional", {parts});
  ir::ValueId has = g.node("OptionalHasElement", {wrapped});
  ir::ValueId unwrapped = g.node("OptionalGetElement", {wrapped});
  ASSERT_TRUE(infer_graph(g.graph).ok()) << infer_graph(g.graph).to_string();
  EXPECT_EQ(g.value(parts).form, ValueForm::kSequence);
  EXPECT_EQ(g.value(parts).element_rank, 1);
  // A tensor out of a sequence: its dims are the node's data-dependent sizes, bound at run time.
  EXPECT_EQ(g.value(at).form, ValueForm::kTensor);
  EXPECT_EQ(g.value(at).shape, Shape{DimExpr::symbol("SequenceAt.size0")});
  EXPECT_EQ(g.graph.node(1).data_symbols, std::vector<std::string>{"SequenceAt.size0"});
  EXPECT_EQ(g.value(length).dtype, DType::kI64);
  EXPECT_TRUE(g.value(length).shape.empty());
  EXPECT_EQ(g.value(stacked).shape.size(), 2u);
  EXPECT_EQ(g.value(wrapped).form, ValueForm::kOptionalSequence);
  EXPECT_EQ(g.value(has).dtype, DType::kBool);
  EXPECT_EQ(g.value(unwrapped).form, ValueForm::kSequence);
  EXPECT_EQ(g.value(unwrapped).element_rank, 1);
}

TEST(SequenceInference, EmptySequencesTakeTheRankOfWhatIsInserted) {
  SeqGraph g;
  ir::ValueId t = g.input("t", DType::kF32, {DimExpr(2), DimExpr(2)});
  Attributes f32_dtype;
  f32_dtype.set(sequence_ops::kDtypeAttribute, std::string("f32"));
  ir::ValueId empty = g.node("SequenceEmpty", {}, f32_dtype);
  ir::ValueId one = g.node("SequenceInsert", {empty, t});
  ir::ValueId at = g.node("SequenceAt", {one, g.input("p", DType::kI32, {DimExpr(1)})});
  ASSERT_TRUE(infer_graph(g.graph).ok()) << infer_graph(g.graph).to_string();
  EXPECT_EQ(g.value(one).element_rank, 2);
  EXPECT_EQ(g.value(at).shape.size(), 2u);
}

TEST(SequenceInference, BadInputsAreErrorsNamingTheNode) {
  {
    // Tensors of an unknown rank cannot be taken out.
    SeqGraph g;
    ir::ValueId s = g.sequence_input("s", DType::kF32, -1);
    g.node("SequenceAt", {s, g.input("p", DType::kI64, {})});
    EXPECT_THAT(infer_graph(g.graph).message(),
                HasSubstr("the rank of the tensors in sequence 's' is not known"));
  }
  {
    SeqGraph g;
    ir::ValueId s = g.sequence_input("s", DType::kF32, 1);
    g.node("SequenceInsert", {s, g.input("t", DType::kI64, {DimExpr(2)})});
    Status status = infer_graph(g.graph);
    EXPECT_THAT(status.message(), HasSubstr("the tensor is i64, but the sequence holds f32"));
    EXPECT_THAT(status.to_string(), HasSubstr("node 'SequenceInsert' (SequenceInsert)"));
  }
  {
    SeqGraph g;
    ir::ValueId s = g.sequence_input("s", DType::kF32, 1);
    g.node("SequenceAt", {s, g.input("p", DType::kF32, {})});
    EXPECT_THAT(infer_graph(g.graph).message(),
                HasSubstr("the position 'p' must be one i32 or i64 element, got f32[]"));
  }
  {
    SeqGraph g;
    g.node("SequenceLength", {g.input("x", DType::kF32, {DimExpr(2)})});
    EXPECT_THAT(infer_graph(g.graph).message(), HasSubstr("input 0 'x' must be a sequence"));
  }
  {
    SeqGraph g;
    g.node("SplitToSequence", {g.input("x", DType::kF32, {DimExpr(2)})}, attrs({{"axis", 1}}));
    EXPECT_THAT(infer_graph(g.graph).message(), HasSubstr("axis 1 is out of range for rank 1"));
  }
  {
    SeqGraph g;
    ir::ValueId s = g.sequence_input("s", DType::kF32, 2);
    g.node("ConcatFromSequence", {s}, attrs({{"axis", 2}}));
    EXPECT_THAT(infer_graph(g.graph).message(),
                HasSubstr("axis 2 is out of range for a result of rank 2"));
  }
  {
    // An op defined on tensors refuses a sequence.
    SeqGraph g;
    g.node("Relu", {g.sequence_input("s", DType::kF32, 1)});
    EXPECT_THAT(infer_graph(g.graph).message(), HasSubstr("input 's' is a sequence; Relu takes"));
  }
}

}  // namespace
}  // namespace kiln::graph_eval
