#include "kiln/graph_eval/sequence.h"

#include "kiln/base/sequence_ops.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/graph_eval/lookup.h"

namespace kiln::graph_eval {

int64_t merge_element_rank(int64_t a, int64_t b) {
  if (a == kAnyRank) return b;
  if (b == kAnyRank || a == b) return a;
  return -1;
}

bool is_sequence_node(const ir::Graph& graph, const ir::Node& node) {
  if (!node.bodies.empty()) return false;
  if (sequence_ops::is_sequence_op(node.op_type)) return true;
  return node.op_type == "Identity" && node.inputs.size() == 1 && node.inputs[0] != ir::kAbsent &&
         node.inputs[0] >= 0 && static_cast<size_t>(node.inputs[0]) < graph.values().size() &&
         graph.value(node.inputs[0]).form != ValueForm::kTensor;
}

FlowType type_of(const ir::Value& v) { return {v.dtype, v.shape, v.form, v.element_rank}; }

void set_type(ir::Value& v, FlowType type) {
  v.dtype = type.dtype;
  v.shape = std::move(type.shape);
  v.form = type.form;
  v.element_rank = type.element_rank;
  v.dim_values.clear();
  v.dim_values_denominator = 1;
}

namespace {

class SequenceInference {
 public:
  SequenceInference(ir::Graph& graph, ir::NodeId id) : graph_(graph), id_(id) {}

  Status run() {
    const ir::Node& node = graph_.node(id_);
    const std::string& op = node.op_type;
    if (node.outputs.size() != 1) {
      return invalid_argument("{} has {} outputs; it has one", op, node.outputs.size());
    }
    for (ir::ValueId in : node.inputs) {
      if (in != ir::kAbsent && (in < 0 || static_cast<size_t>(in) >= graph_.values().size())) {
        return internal_error("input value id {} is out of range", in);
      }
    }
    FlowType out;
    if (op == "Identity") {
      KILN_RETURN_IF_ERROR(arity(1, 1));
      const ir::Value& v = input(0);
      out = type_of(v);
    } else if (op == "SequenceEmpty") {
      KILN_RETURN_IF_ERROR(arity(0, 0));
      KILN_ASSIGN_OR_RETURN(out.dtype, dtype_attribute());
      out.form = ValueForm::kSequence;
      out.element_rank = kAnyRank;
    } else if (op == "SequenceConstruct") {
      if (node.inputs.empty()) return invalid_argument("takes at least one tensor");
      out.form = ValueForm::kSequence;
      out.element_rank = kAnyRank;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(const ir::Value* t, tensor(i));
        if (i == 0) out.dtype = t->dtype;
        if (t->dtype != out.dtype) {
          return invalid_argument("input {} is {}, but input 0 is {}; a sequence holds one dtype",
                                  i, dtype_name(t->dtype), dtype_name(out.dtype));
        }
        out.element_rank =
            merge_element_rank(out.element_rank, static_cast<int64_t>(t->shape.size()));
      }
    } else if (op == "SequenceAt") {
      KILN_RETURN_IF_ERROR(arity(2, 2));
      KILN_ASSIGN_OR_RETURN(const ir::Value* seq, form_input(0, ValueForm::kSequence));
      KILN_RETURN_IF_ERROR(position(1));
      KILN_ASSIGN_OR_RETURN(out, element_tensor(*seq, 0));
    } else if (op == "SequenceInsert") {
      KILN_RETURN_IF_ERROR(arity(2, 3));
      KILN_ASSIGN_OR_RETURN(const ir::Value* seq, form_input(0, ValueForm::kSequence));
      KILN_ASSIGN_OR_RETURN(const ir::Value* t, tensor(1));
      if (t->dtype != seq->dtype) {
        return invalid_argument("the tensor is {}, but the sequence holds {}", dtype_name(t->dtype),
                                dtype_name(seq->dtype));
      }
      if (present(2)) KILN_RETURN_IF_ERROR(position(2));
      out = {.dtype = seq->dtype,
             .form = ValueForm::kSequence,
             .element_rank =
                 merge_element_rank(seq->element_rank, static_cast<int64_t>(t->shape.size()))};
    } else if (op == "SequenceErase") {
      KILN_RETURN_IF_ERROR(arity(1, 2));
      KILN_ASSIGN_OR_RETURN(const ir::Value* seq, form_input(0, ValueForm::kSequence));
      if (present(1)) KILN_RETURN_IF_ERROR(position(1));
      out = {.dtype = seq->dtype, .form = ValueForm::kSequence, .element_rank = seq->element_rank};
    } else if (op == "SequenceLength") {
      KILN_RETURN_IF_ERROR(arity(1, 1));
      KILN_RETURN_IF_ERROR(form_input(0, ValueForm::kSequence).status());
      out = {.dtype = DType::kI64};
    } else if (op == "SplitToSequence") {
      KILN_RETURN_IF_ERROR(split_to_sequence(out));
    } else if (op == "ConcatFromSequence") {
      KILN_RETURN_IF_ERROR(arity(1, 1));
      KILN_ASSIGN_OR_RETURN(const ir::Value* seq, form_input(0, ValueForm::kSequence));
      if (!node.attributes.has("axis")) return invalid_argument("attribute 'axis' is required");
      KILN_ASSIGN_OR_RETURN(int64_t axis, node.attributes.get_int("axis", 0));
      KILN_ASSIGN_OR_RETURN(int64_t new_axis, node.attributes.get_int("new_axis", 0));
      if (new_axis != 0 && new_axis != 1) {
        return invalid_argument("new_axis must be 0 or 1, got {}", new_axis);
      }
      KILN_ASSIGN_OR_RETURN(out, element_tensor(*seq, new_axis));
      const auto rank = static_cast<int64_t>(out.shape.size());
      if (axis < -rank || axis >= rank) {
        return invalid_argument("axis {} is out of range for a result of rank {}", axis, rank);
      }
    } else if (op == "Optional") {
      KILN_RETURN_IF_ERROR(arity(0, 1));
      if (present(0)) {
        const ir::Value& v = input(0);
        if (is_optional(v.form)) return invalid_argument("the input is already an optional");
        out.form = v.form == ValueForm::kSequence ? ValueForm::kOptionalSequence
                                                  : ValueForm::kOptionalTensor;
        out.dtype = v.dtype;
        out.element_rank =
            v.form == ValueForm::kSequence ? v.element_rank : static_cast<int64_t>(v.shape.size());
      } else {
        KILN_ASSIGN_OR_RETURN(out.dtype, dtype_attribute());
        KILN_ASSIGN_OR_RETURN(int64_t form,
                              node.attributes.get_int(sequence_ops::kFormAttribute, -1));
        if (form != static_cast<int64_t>(ValueForm::kOptionalTensor) &&
            form != static_cast<int64_t>(ValueForm::kOptionalSequence)) {
          return invalid_argument("without an input, attribute '{}' must name an optional form",
                                  sequence_ops::kFormAttribute);
        }
        out.form = static_cast<ValueForm>(form);
        out.element_rank = kAnyRank;
      }
    } else if (op == "OptionalHasElement") {
      KILN_RETURN_IF_ERROR(arity(0, 1));
      out = {.dtype = DType::kBool};
    } else if (op == "OptionalGetElement") {
      KILN_RETURN_IF_ERROR(arity(1, 1));
      const ir::Value& v = input(0);
      if (v.form == ValueForm::kOptionalTensor) {
        KILN_ASSIGN_OR_RETURN(out, element_tensor(v, 0));
      } else if (v.form == ValueForm::kOptionalSequence) {
        out = {.dtype = v.dtype, .form = ValueForm::kSequence, .element_rank = v.element_rank};
      } else {
        out = type_of(v);
      }
    } else {
      return unimplemented("{} is not a sequence op", op);
    }
    ir::Node& writable = graph_.node(id_);
    writable.data_symbols = std::move(data_symbols_);
    set_type(graph_.value(writable.outputs[0]), std::move(out));
    return ok_status();
  }

 private:
  const ir::Node& node() const { return graph_.node(id_); }
  bool present(size_t i) const {
    return i < node().inputs.size() && node().inputs[i] != ir::kAbsent;
  }
  const ir::Value& input(size_t i) const { return graph_.value(node().inputs[i]); }

  Status arity(size_t min, size_t max) const {
    const size_t n = node().inputs.size();
    if (n < min || n > max) {
      return invalid_argument("takes {} to {} inputs, got {}", min, max, n);
    }
    for (size_t i = 0; i < min; ++i) {
      if (!present(i)) return invalid_argument("input {} is required", i);
    }
    return ok_status();
  }

  StatusOr<const ir::Value*> form_input(size_t i, ValueForm form) const {
    if (!present(i)) return invalid_argument("input {} is required", i);
    const ir::Value& v = input(i);
    if (v.form != form) {
      return invalid_argument("input {} '{}' must be a {}, got a {}", i, v.name,
                              value_form_name(form), value_form_name(v.form));
    }
    return &v;
  }
  StatusOr<const ir::Value*> tensor(size_t i) const { return form_input(i, ValueForm::kTensor); }

  Status position(size_t i) const {
    KILN_ASSIGN_OR_RETURN(const ir::Value* p, tensor(i));
    bool one = true;
    for (const DimExpr& d : p->shape) one = one && d.constant_value() == 1;
    if ((p->dtype != DType::kI64 && p->dtype != DType::kI32) || !one) {
      return invalid_argument("the position '{}' must be one i32 or i64 element, got {}{}", p->name,
                              dtype_name(p->dtype), shape_to_string(p->shape));
    }
    return ok_status();
  }

  StatusOr<DType> dtype_attribute() const {
    KILN_ASSIGN_OR_RETURN(std::string name,
                          node().attributes.get_string(sequence_ops::kDtypeAttribute, "f32"));
    auto dtype = parse_dtype(name);
    if (!dtype) return invalid_argument("unknown dtype '{}'", name);
    return *dtype;
  }

  // A tensor of `v`'s elements' rank (plus `extra` dims), each dim a data-dependent size.
  StatusOr<FlowType> element_tensor(const ir::Value& v, int64_t extra) {
    if (v.element_rank < 0) {
      return invalid_argument(
          "the rank of the tensors in {} '{}' is not known (declare the element shape of the "
          "graph input or build it from tensors of one rank)",
          value_form_name(v.form), v.name);
    }
    FlowType out{.dtype = v.dtype};
    for (int64_t d = 0; d < v.element_rank + extra; ++d) {
      data_symbols_.push_back(data_symbol_name(node().name, data_symbols_.size()));
      out.shape.push_back(DimExpr::symbol(data_symbols_.back()));
    }
    return out;
  }

  Status split_to_sequence(FlowType& out) {
    KILN_RETURN_IF_ERROR(arity(1, 2));
    KILN_ASSIGN_OR_RETURN(const ir::Value* t, tensor(0));
    KILN_ASSIGN_OR_RETURN(int64_t axis, node().attributes.get_int("axis", 0));
    KILN_ASSIGN_OR_RETURN(int64_t keepdims, node().attributes.get_int("keepdims", 1));
    const auto rank = static_cast<int64_t>(t->shape.size());
    if (axis < -rank || axis >= rank) {
      return invalid_argument("axis {} is out of range for rank {}", axis, rank);
    }
    if (keepdims != 0 && keepdims != 1) {
      return invalid_argument("keepdims must be 0 or 1, got {}", keepdims);
    }
    if (present(1)) {
      KILN_ASSIGN_OR_RETURN(const ir::Value* split, tensor(1));
      if ((split->dtype != DType::kI64 && split->dtype != DType::kI32) || split->shape.size() > 1) {
        return invalid_argument("split '{}' must be an i32 or i64 scalar or 1-D, got {}{}",
                                split->name, dtype_name(split->dtype),
                                shape_to_string(split->shape));
      }
    }
    out = {.dtype = t->dtype,
           .form = ValueForm::kSequence,
           .element_rank = present(1) || keepdims == 1 ? rank : rank - 1};
    return ok_status();
  }

  ir::Graph& graph_;
  ir::NodeId id_;
  std::vector<std::string> data_symbols_;
};

}  // namespace

Status infer_sequence_node(ir::Graph& graph, ir::NodeId id) {
  Status status = SequenceInference(graph, id).run();
  if (!status.ok()) return with_node_note(std::move(status), graph.node(id));
  return ok_status();
}

StatusOr<std::vector<HostValue>> evaluate_sequence_node(const ir::Graph& graph, ir::NodeId id,
                                                        std::span<const HostValue> inputs) {
  const ir::Node& node = graph.node(id);
  sequence_ops::OpArgs args;
  args.where = node.describe();
  args.attributes = &node.attributes;
  return sequence_ops::run(node.op_type, inputs, args);
}

}  // namespace kiln::graph_eval
