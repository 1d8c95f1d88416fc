// The IR: one graph of nodes over values. Values have a dtype and a symbolic Shape; a value is a
// graph input, a constant (weights, with data), or a node output. Nodes keep the ONNX op_type and
// attributes, and `origins` lists the ONNX node names a node stands for after fusion, so that
// errors, dumps and triage can point back at the user's model.
//
// Values and nodes are addressed by index (ValueId, NodeId). Passes edit the graph in place and
// call remove_dead() to compact it; ids are not stable across remove_dead().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/host_value.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/shape/assumption.h"
#include "kiln/shape/shape.h"

namespace kiln::ir {

using kiln::Attribute;
using kiln::Attributes;

using ValueId = int32_t;
using NodeId = int32_t;
// An absent optional node input (ONNX's empty input name).
inline constexpr ValueId kAbsent = -1;

struct Value {
  std::string name;
  DType dtype = DType::kF32;  // a sequence's or optional's: its tensors' dtype
  Shape shape;                // empty for a sequence or an optional

  std::optional<Tensor> constant;  // set for weights and folded values
  std::optional<NodeId> producer;  // set for node outputs
  // Shape computation: for a small tensor whose elements are known as expressions of the symbols
  // (Shape(x), and what Gather/Concat/Reshape/... make of it), one DimExpr per element in
  // row-major order; empty when unknown. Set by shape inference; the runtime evaluates them per
  // binding.
  std::vector<DimExpr> dim_values;
  // Element i is dim_values[i] / dim_values_denominator: a power of two above 1 for a
  // floating-point shape computation that is not whole (int(S * 0.5) before its Floor or Cast).
  int64_t dim_values_denominator = 1;
  // A tensor, or a sequence or optional (base/host_value.h), which lives on the host: only the
  // sequence ops (base/sequence_ops.h), Identity and control flow read or make one.
  ValueForm form = ValueForm::kTensor;
  // A sequence's or optional's tensors' rank when every one has it (what SequenceAt,
  // ConcatFromSequence and OptionalGetElement give a tensor); -1 when not known.
  int64_t element_rank = -1;
};

class Graph;

// The attribute that counts a control-flow node's captures (Node::bodies).
inline constexpr const char* kCapturesAttribute = "kiln_captures";

struct Node {
  std::string name;             // ONNX node name (or a generated one, unique in the graph)
  std::string op_type;          // ONNX op type, or a kiln op such as "kiln.FusedConv"
  std::vector<ValueId> inputs;  // kAbsent for an omitted optional input
  std::vector<ValueId> outputs;
  Attributes attributes;
  std::vector<std::string> origins;  // ONNX node names this node came from
  // Symbols whose values the runtime reads from this node's input data before it runs (sizes that
  // depend on data: NonZero's count, TopK's k when it is not a constant), in the order the op
  // asks for them (kernels::InferArgs::data_dim). Set by shape inference.
  std::vector<std::string> data_symbols;
  // Control flow run as nested programs (Loop, Scan, and an If too large to inline): the node's
  // body graphs in the op's order (Loop, Scan: {body}; If: {then_branch, else_branch}). A body's
  // inputs are the op's formal body inputs followed by its captures, the outer-scope values it
  // reads, made explicit: the node lists them as its last inputs (attribute kiln_captures counts
  // them; an If's then branch takes the first of them, as many as it has capture inputs, the else
  // branch the rest). A body's output dims are its own business: its symbols are bound from its
  // inputs each time it runs. Empty for every other node. Copies of a node share its bodies.
  std::vector<std::shared_ptr<Graph>> bodies;

  // "node 'resnetv17_conv0_fwd' (Conv)", for error notes.
  std::string describe() const;
};

class Graph {
 public:
  std::string name;
  int64_t opset = 17;
  // What shape inference assumed about symbolic dims (kiln/shape/assumption.h), each with the
  // node that stated it; rebuilt by every graph_eval::infer_graph, kept when nodes are removed.
  std::vector<Assumption> assumptions;

  ValueId add_value(Value value);
  ValueId add_input(std::string name, DType dtype, Shape shape);
  ValueId add_constant(std::string name, Tensor data);
  // Appends a node and sets producer on its outputs. Nodes must be added in topological order.
  NodeId add_node(Node node);
  void add_output(ValueId id) { outputs_.push_back(id); }

  Value& value(ValueId id) { return values_.at(id); }
  const Value& value(ValueId id) const { return values_.at(id); }
  Node& node(NodeId id) { return nodes_.at(id); }
  const Node& node(NodeId id) const { return nodes_.at(id); }
  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId>& mutable_outputs() { return outputs_; }
  std::vector<ValueId>& mutable_inputs() { return inputs_; }

  std::optional<ValueId> find_value(const std::string& name) const;
  // True if the value is a constant with data.
  bool is_constant(ValueId id) const {
    return id != kAbsent && values_.at(id).constant.has_value();
  }
  // Nodes that read each value (computed on demand; O(nodes)).
  std::vector<std::vector<NodeId>> consumers() const;
  // A name not yet used by any value, derived from `base`.
  std::string unique_value_name(const std::string& base) const;

  // Replaces every use of `from` (node inputs and graph outputs) by `to`.
  void replace_uses(ValueId from, ValueId to);
  // Marks a node for removal by remove_dead (clears its outputs' producer).
  void erase_node(NodeId id);
  // Whether erase_node marked the node (it keeps its fields until remove_dead).
  bool is_erased(NodeId id) const { return erased_.at(id); }
  // Drops erased nodes, nodes whose outputs are unused, and values nothing refers to; renumbers.
  void remove_dead();
  // Re-sorts nodes topologically (after a pass inserted nodes out of order).
  Status topological_sort();

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<bool> erased_;
};

// Structural checks: ids in range, each value produced once, topological order, inputs and
// outputs declared, constants' data matching their dtype and shape; bodies are checked likewise,
// nested at most kMaxBodyDepth deep. Error names the node.
Status verify_graph(const Graph& graph);

inline constexpr int kMaxBodyDepth = 16;

}  // namespace kiln::ir
