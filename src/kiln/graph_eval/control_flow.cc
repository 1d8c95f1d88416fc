#include "kiln/graph_eval/control_flow.h"

#include <optional>
#include <set>
#include <string>

#include "kiln/base/control_flow.h"
#include "kiln/base/sequence_ops.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/graph_eval/lookup.h"
#include "kiln/graph_eval/sequence.h"

namespace kiln::graph_eval {
namespace {

std::string describe(const FlowType& type) {
  if (type.form == ValueForm::kTensor) {
    return fmt::format("{}{}", dtype_name(type.dtype), shape_to_string(type.shape));
  }
  return fmt::format("{} of {}", value_form_name(type.form), dtype_name(type.dtype));
}

bool is_single_element(const Shape& shape) {
  for (const DimExpr& d : shape) {
    if (d.constant_value() != 1) return false;
  }
  return true;
}

Status check_scalar_input(const ir::Value& value, DType dtype, std::string_view what) {
  if (value.dtype != dtype || !is_single_element(value.shape)) {
    return invalid_argument("{} must be one {} element, got {}{}", what, dtype_name(dtype),
                            dtype_name(value.dtype), shape_to_string(value.shape));
  }
  return ok_status();
}

// What inference of one control-flow node keeps track of.
class BodyInference {
 public:
  BodyInference(ir::Graph& graph, ir::NodeId id, const Registry& registry)
      : graph_(graph), id_(id), registry_(registry) {
    const ir::Node& node = graph.node(id);
    name_ = node.name;
    for (ir::ValueId in : node.inputs) {
      if (in == ir::kAbsent) continue;
      for (const DimExpr& d : graph.value(in).shape) {
        for (std::string& s : d.symbols()) outer_.insert(std::move(s));
      }
    }
  }

  const ir::Node& node() const { return graph_.node(id_); }
  const ir::Value& graph_value(ir::ValueId id) const { return graph_.value(id); }
  FlowType input_type(size_t i) const { return type_of(graph_.value(node().inputs[i])); }

  // `shape` with every dim that is neither a number nor a bare symbol replaced by a fresh symbol.
  Shape general(const Shape& shape, const std::string& tag) {
    Shape out = shape;
    for (size_t d = 0; d < out.size(); ++d) {
      if (out[d].constant_value() || out[d].is_symbol()) continue;
      out[d] = fresh(fmt::format("{}_{}", tag, d));
    }
    return out;
  }

  DimExpr fresh(const std::string& tag) {
    std::string symbol = fmt::format("{}.{}", name_, tag);
    fresh_.insert(symbol);
    return DimExpr::symbol(symbol);
  }

  // `d` when the outer graph can name it, else a new data-dependent size of the node.
  DimExpr outer_or_data(const DimExpr& d) {
    for (const std::string& s : d.symbols()) {
      if (!outer_.count(s) || fresh_.count(s)) return data();
    }
    return d;
  }

  // Gives body 0's first input (Loop's iteration number) the value `symbol`.
  void set_iteration(const DimExpr& symbol) { iteration_ = symbol; }

  DimExpr data() {
    data_symbols_.push_back(data_symbol_name(name_, data_symbols_.size()));
    return DimExpr::symbol(data_symbols_.back());
  }

  Status infer_body(size_t b, const std::vector<FlowType>& types) {
    ir::Graph& body = *node().bodies[b];
    if (body.inputs().size() != types.size()) {
      return invalid_argument("body {} has {} inputs; the node gives it {}", b,
                              body.inputs().size(), types.size());
    }
    for (size_t i = 0; i < types.size(); ++i) {
      ir::Value& v = body.value(body.inputs()[i]);
      v.dtype = types[i].dtype;
      v.shape = types[i].shape;
      v.form = types[i].form;
      v.element_rank = types[i].element_rank;
      v.dim_values.clear();
    }
    // Loop's iteration number is known as a symbol of the body, bound from its value each time
    // the body runs: shape computations on it (Slice at i) stay expressions.
    if (iteration_ && b == 0 && !types.empty()) {
      body.value(body.inputs()[0]).dim_values = {*iteration_};
    }
    body.opset = graph_.opset;
    Status status = infer_graph(body, registry_);
    if (!status.ok()) return std::move(status).with_note(fmt::format("in body {}", b));
    return ok_status();
  }

  const FlowType body_output(size_t b, size_t i) const {
    const ir::Graph& body = *node().bodies[b];
    return type_of(body.value(body.outputs()[i]));
  }

  Status check_output_count(size_t b, size_t expected) const {
    const size_t got = node().bodies[b]->outputs().size();
    if (got == expected) return ok_status();
    return invalid_argument("body {} has {} outputs; the node needs {}", b, got, expected);
  }

  // Infers body 0 until the carried values' dims settle: body inputs [in0, in0 + n) are carried
  // into body outputs [out0, out0 + n). Returns, per carried value, which dims change.
  StatusOr<std::vector<std::vector<bool>>> settle_carried(std::vector<FlowType>& types, size_t in0,
                                                          size_t out0, size_t n) {
    std::vector<std::vector<bool>> varying(n);
    for (size_t v = 0; v < n; ++v) varying[v].assign(types[in0 + v].shape.size(), false);
    for (;;) {
      KILN_RETURN_IF_ERROR(infer_body(0, types));
      bool changed = false;
      for (size_t v = 0; v < n; ++v) {
        FlowType& in = types[in0 + v];
        const FlowType out = body_output(0, out0 + v);
        const bool fills = is_optional(in.form) && out.form == element_form(in.form);
        if (out.dtype != in.dtype || out.shape.size() != in.shape.size() ||
            (out.form != in.form && !fills)) {
          return invalid_argument(
              "loop-carried value {} enters the body as {} and leaves it as {}; its form, dtype "
              "and rank must not change",
              v, describe(in), describe(out));
        }
        const int64_t rank = merge_element_rank(in.element_rank, out.element_rank);
        if (rank != in.element_rank) {
          in.element_rank = rank;
          changed = true;
        }
        for (size_t d = 0; d < in.shape.size(); ++d) {
          if (varying[v][d] || out.shape[d] == in.shape[d]) continue;
          varying[v][d] = true;
          in.shape[d] = fresh(fmt::format("carried{}_{}", v, d));
          changed = true;
        }
      }
      if (!changed) return varying;
    }
  }

  // The outer type of a carried value after the loop.
  FlowType carried_output(size_t input, const std::vector<bool>& varying) {
    FlowType type = input_type(input);
    for (size_t d = 0; d < type.shape.size(); ++d) {
      if (varying[d]) type.shape[d] = data();
    }
    return type;
  }

  StatusOr<FlowType> scan_output(const FlowType& slice, int64_t axis, const DimExpr& count) {
    if (slice.form != ValueForm::kTensor) {
      return invalid_argument("a scan output is {}; scan outputs are tensors", describe(slice));
    }
    FlowType type{slice.dtype, {}};
    for (const DimExpr& d : slice.shape) type.shape.push_back(outer_or_data(d));
    type.shape.insert(type.shape.begin() + axis, count);
    return type;
  }

  void write_outputs(const std::vector<FlowType>& types) {
    ir::Node& node = graph_.node(id_);
    node.data_symbols = data_symbols_;
    const std::vector<ir::ValueId> outputs = node.outputs;
    for (size_t i = 0; i < outputs.size() && i < types.size(); ++i) {
      if (outputs[i] == ir::kAbsent) continue;
      set_type(graph_.value(outputs[i]), types[i]);
    }
  }

 private:
  ir::Graph& graph_;
  ir::NodeId id_;
  const Registry& registry_;
  std::string name_;
  std::set<std::string> outer_, fresh_;
  std::vector<std::string> data_symbols_;
  std::optional<DimExpr> iteration_;
};

StatusOr<size_t> captures_of(const ir::Node& node, size_t formal_min) {
  KILN_ASSIGN_OR_RETURN(int64_t captures, node.attributes.get_int(ir::kCapturesAttribute, 0));
  if (captures < 0 || node.inputs.size() < formal_min ||
      static_cast<size_t>(captures) > node.inputs.size() - formal_min) {
    return invalid_argument("attribute '{}' is {}, but the node has {} inputs",
                            ir::kCapturesAttribute, captures, node.inputs.size());
  }
  return static_cast<size_t>(captures);
}

Status check_body_count(const ir::Node& node, size_t expected) {
  if (node.bodies.size() == expected) return ok_status();
  return invalid_argument("{} has {} bodies, expected {}", node.op_type, node.bodies.size(),
                          expected);
}

Status infer_loop(BodyInference& inference) {
  const ir::Node& node = inference.node();
  KILN_RETURN_IF_ERROR(check_body_count(node, 1));
  KILN_ASSIGN_OR_RETURN(size_t captures, captures_of(node, 2));
  const size_t carried = node.inputs.size() - 2 - captures;
  if (node.outputs.size() < carried) {
    return invalid_argument("has {} outputs for {} loop-carried values", node.outputs.size(),
                            carried);
  }
  const size_t scans = node.outputs.size() - carried;
  if (node.inputs[0] == ir::kAbsent && node.inputs[1] == ir::kAbsent) {
    return invalid_argument(
        "has neither a trip count nor a condition; kiln does not run unbounded loops");
  }
  if (node.inputs[0] != ir::kAbsent) {
    KILN_RETURN_IF_ERROR(
        check_scalar_input(inference.graph_value(node.inputs[0]), DType::kI64, "the trip count M"));
  }
  if (node.inputs[1] != ir::kAbsent) {
    KILN_RETURN_IF_ERROR(
        check_scalar_input(inference.graph_value(node.inputs[1]), DType::kBool, "the condition"));
  }
  KILN_RETURN_IF_ERROR(inference.check_output_count(0, 1 + carried + scans));
  std::vector<FlowType> types{{DType::kI64, {}}, {DType::kBool, {}}};
  inference.set_iteration(inference.fresh("iteration"));
  for (size_t i = 2; i < node.inputs.size(); ++i) {
    FlowType type = inference.input_type(i);
    type.shape = inference.general(type.shape, fmt::format("in{}", i));
    types.push_back(std::move(type));
  }
  KILN_ASSIGN_OR_RETURN(auto varying, inference.settle_carried(types, 2, 1, carried));
  const FlowType cond_out = inference.body_output(0, 0);
  if (cond_out.dtype != DType::kBool || !is_single_element(cond_out.shape)) {
    return invalid_argument("the body's condition output must be one bool element, got {}{}",
                            dtype_name(cond_out.dtype), shape_to_string(cond_out.shape));
  }
  std::vector<FlowType> outputs;
  for (size_t v = 0; v < carried; ++v) {
    outputs.push_back(inference.carried_output(2 + v, varying[v]));
    outputs.back().element_rank = types[2 + v].element_rank;
    // A carried optional the body returns as what it holds leaves the loop as that.
    outputs.back().form = inference.body_output(0, 1 + v).form;
  }
  std::optional<DimExpr> count;
  for (size_t k = 0; k < scans; ++k) {
    if (!count) count = inference.data();
    KILN_ASSIGN_OR_RETURN(
        FlowType scan, inference.scan_output(inference.body_output(0, 1 + carried + k), 0, *count));
    outputs.push_back(std::move(scan));
  }
  inference.write_outputs(outputs);
  return ok_status();
}

Status infer_scan(BodyInference& inference) {
  const ir::Node& node = inference.node();
  KILN_RETURN_IF_ERROR(check_body_count(node, 1));
  KILN_ASSIGN_OR_RETURN(size_t captures, captures_of(node, 0));
  const size_t formal = node.inputs.size() - captures;
  KILN_ASSIGN_OR_RETURN(
      control_flow::ScanAttributes attrs,
      control_flow::parse_scan_attributes(node.attributes, formal, node.outputs.size(), "Scan"));
  const auto m = static_cast<size_t>(attrs.num_scan_inputs);
  const size_t states = formal - m;
  const size_t scans = node.outputs.size() - states;
  KILN_RETURN_IF_ERROR(inference.check_output_count(0, states + scans));
  std::vector<FlowType> types;
  for (size_t i = 0; i < states; ++i) {
    if (node.inputs[i] == ir::kAbsent) return invalid_argument("state input {} is absent", i);
    FlowType type = inference.input_type(i);
    type.shape = inference.general(type.shape, fmt::format("in{}", i));
    types.push_back(std::move(type));
  }
  std::optional<DimExpr> length;
  for (size_t j = 0; j < m; ++j) {
    if (node.inputs[states + j] == ir::kAbsent)
      return invalid_argument("scan input {} is absent", j);
    FlowType type = inference.input_type(states + j);
    KILN_ASSIGN_OR_RETURN(
        int64_t axis,
        control_flow::normalize_axis(attrs.input_axes[j], static_cast<int64_t>(type.shape.size()),
                                     fmt::format("scan_input_axes[{}]", j)));
    if (!length) length = type.shape[axis];
    type.shape.erase(type.shape.begin() + axis);
    type.shape = inference.general(type.shape, fmt::format("in{}", states + j));
    types.push_back(std::move(type));
  }
  for (size_t i = formal; i < node.inputs.size(); ++i) {
    FlowType type = inference.input_type(i);
    type.shape = inference.general(type.shape, fmt::format("in{}", i));
    types.push_back(std::move(type));
  }
  KILN_ASSIGN_OR_RETURN(auto varying, inference.settle_carried(types, 0, 0, states));
  std::vector<FlowType> outputs;
  for (size_t v = 0; v < states; ++v) {
    outputs.push_back(inference.carried_output(v, varying[v]));
    outputs.back().element_rank = types[v].element_rank;
  }
  for (size_t k = 0; k < scans; ++k) {
    const FlowType slice = inference.body_output(0, states + k);
    KILN_ASSIGN_OR_RETURN(int64_t axis,
                          control_flow::normalize_axis(attrs.output_axes[k],
                                                       static_cast<int64_t>(slice.shape.size()) + 1,
                                                       fmt::format("scan_output_axes[{}]", k)));
    KILN_ASSIGN_OR_RETURN(FlowType scan, inference.scan_output(slice, axis, *length));
    outputs.push_back(std::move(scan));
  }
  inference.write_outputs(outputs);
  return ok_status();
}

Status infer_if(BodyInference& inference) {
  const ir::Node& node = inference.node();
  KILN_RETURN_IF_ERROR(check_body_count(node, 2));
  KILN_ASSIGN_OR_RETURN(size_t captures, captures_of(node, 1));
  if (node.inputs.size() != 1 + captures || node.inputs[0] == ir::kAbsent) {
    return invalid_argument("takes the condition and {} captures, got {} inputs", captures,
                            node.inputs.size());
  }
  KILN_RETURN_IF_ERROR(
      check_scalar_input(inference.graph_value(node.inputs[0]), DType::kBool, "the condition"));
  const size_t then_inputs = node.bodies[0]->inputs().size();
  if (then_inputs > captures || then_inputs + node.bodies[1]->inputs().size() != captures) {
    return invalid_argument("the branches take {} and {} captures; the node has {}", then_inputs,
                            node.bodies[1]->inputs().size(), captures);
  }
  for (size_t b = 0; b < 2; ++b) {
    KILN_RETURN_IF_ERROR(inference.check_output_count(b, node.outputs.size()));
    std::vector<FlowType> types;
    const size_t first = b == 0 ? 1 : 1 + then_inputs;
    const size_t end = b == 0 ? 1 + then_inputs : node.inputs.size();
    for (size_t i = first; i < end; ++i) {
      FlowType type = inference.input_type(i);
      type.shape = inference.general(type.shape, fmt::format("in{}", i));
      types.push_back(std::move(type));
    }
    KILN_RETURN_IF_ERROR(inference.infer_body(b, types));
  }
  std::vector<FlowType> outputs;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const FlowType then_type = inference.body_output(0, i);
    const FlowType else_type = inference.body_output(1, i);
    if (then_type.dtype != else_type.dtype || then_type.shape.size() != else_type.shape.size() ||
        then_type.form != else_type.form) {
      return invalid_argument(
          "output {} is {} from the then branch and {} from the else branch; the form, dtype and "
          "rank must agree",
          i, describe(then_type), describe(else_type));
    }
    FlowType type{then_type.dtype,
                  {},
                  then_type.form,
                  merge_element_rank(then_type.element_rank, else_type.element_rank)};
    for (size_t d = 0; d < then_type.shape.size(); ++d) {
      type.shape.push_back(then_type.shape[d] == else_type.shape[d]
                               ? inference.outer_or_data(then_type.shape[d])
                               : inference.data());
    }
    outputs.push_back(std::move(type));
  }
  inference.write_outputs(outputs);
  return ok_status();
}

// SequenceMap (base/sequence_ops.h): the body takes one tensor of each sequence input (of the
// sequence's element rank, dims fresh symbols) and every tensor input whole, then the captures;
// each output is the sequence of a body output, which must be a tensor.
Status infer_sequence_map(BodyInference& inference) {
  const ir::Node& node = inference.node();
  KILN_RETURN_IF_ERROR(check_body_count(node, 1));
  KILN_ASSIGN_OR_RETURN(size_t captures, captures_of(node, 1));
  const size_t formal = node.inputs.size() - captures;
  std::vector<FlowType> types;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == ir::kAbsent) return invalid_argument("input {} is absent", i);
    FlowType type = inference.input_type(i);
    if (i == 0 && type.form != ValueForm::kSequence) {
      return invalid_argument("input 0 must be a sequence, got {}", describe(type));
    }
    if (i < formal && type.form == ValueForm::kSequence) {
      if (type.element_rank < 0) {
        return invalid_argument(
            "the rank of the tensors in sequence input {} '{}' is not known; the body needs it", i,
            inference.graph_value(node.inputs[i]).name);
      }
      FlowType element{type.dtype, {}};
      for (int64_t d = 0; d < type.element_rank; ++d) {
        element.shape.push_back(inference.fresh(fmt::format("in{}_{}", i, d)));
      }
      types.push_back(std::move(element));
      continue;
    }
    if (i < formal && type.form != ValueForm::kTensor) {
      return invalid_argument("input {} must be a sequence or a tensor, got {}", i, describe(type));
    }
    type.shape = inference.general(type.shape, fmt::format("in{}", i));
    types.push_back(std::move(type));
  }
  KILN_RETURN_IF_ERROR(inference.check_output_count(0, node.outputs.size()));
  KILN_RETURN_IF_ERROR(inference.infer_body(0, types));
  std::vector<FlowType> outputs;
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    const FlowType out = inference.body_output(0, k);
    if (out.form != ValueForm::kTensor) {
      return invalid_argument("body output {} is {}; it must be a tensor", k, describe(out));
    }
    outputs.push_back(
        {out.dtype, {}, ValueForm::kSequence, static_cast<int64_t>(out.shape.size())});
  }
  inference.write_outputs(outputs);
  return ok_status();
}

// The per-iteration type of a node output that no iteration produced, from inference.
StatusOr<control_flow::SliceType> empty_slice(const ir::Value& value, int64_t axis) {
  control_flow::SliceType type{value.dtype, {}};
  for (size_t d = 0; d < value.shape.size(); ++d) {
    if (static_cast<int64_t>(d) == axis) continue;
    auto n = value.shape[d].constant_value();
    if (!n) {
      return invalid_argument(
          "the loop ran zero times and dim {} of scan output '{}' ({}) is not known without an "
          "iteration",
          d, value.name, shape_to_string(value.shape));
    }
    type.shape.push_back(*n);
  }
  return type;
}

}  // namespace

Status infer_control_flow(ir::Graph& graph, ir::NodeId id, const Registry& registry) {
  BodyInference inference(graph, id, registry);
  const std::string op = graph.node(id).op_type;
  Status status = op == "Loop"          ? infer_loop(inference)
                  : op == "Scan"        ? infer_scan(inference)
                  : op == "If"          ? infer_if(inference)
                  : op == "SequenceMap" ? infer_sequence_map(inference)
                                        : unimplemented("op {} has no bodies kiln can run", op);
  if (!status.ok()) return with_node_note(std::move(status), graph.node(id));
  return ok_status();
}

StatusOr<std::vector<HostValue>> evaluate_control_flow(const ir::Graph& graph, ir::NodeId id,
                                                       std::span<const HostValue> inputs,
                                                       const Registry& registry) {
  const ir::Node& node = graph.node(id);
  auto runner = [&](size_t b) -> control_flow::BodyRunner {
    return [&, b](std::vector<HostValue> body_inputs) -> StatusOr<std::vector<HostValue>> {
      auto outputs = evaluate_graph_values(*node.bodies.at(b), body_inputs, registry);
      if (!outputs.ok()) return std::move(outputs).status().with_note(fmt::format("in body {}", b));
      return outputs;
    };
  };
  StatusOr<std::vector<HostValue>> result = [&]() -> StatusOr<std::vector<HostValue>> {
    if (inputs.size() != node.inputs.size()) {
      return invalid_argument("got {} input values for {} node inputs", inputs.size(),
                              node.inputs.size());
    }
    if (node.op_type == "If") {
      KILN_RETURN_IF_ERROR(check_body_count(node, 2));
      KILN_ASSIGN_OR_RETURN(bool cond,
                            control_flow::read_condition(inputs[0].tensor(), "the condition"));
      const size_t then_inputs = node.bodies[0]->inputs().size();
      if (1 + then_inputs > inputs.size()) return invalid_argument("too few captures");
      std::vector<HostValue> taken =
          cond ? std::vector<HostValue>(inputs.begin() + 1, inputs.begin() + 1 + then_inputs)
               : std::vector<HostValue>(inputs.begin() + 1 + then_inputs, inputs.end());
      return runner(cond ? 0 : 1)(std::move(taken));
    }
    if (node.op_type == "SequenceMap") {
      KILN_RETURN_IF_ERROR(check_body_count(node, 1));
      sequence_ops::OpArgs args;
      args.where = node.describe();
      args.attributes = &node.attributes;
      for (ir::ValueId out : node.outputs) args.output_dtypes.push_back(graph.value(out).dtype);
      args.body = runner(0);
      return sequence_ops::run(node.op_type, inputs, args);
    }
    KILN_RETURN_IF_ERROR(check_body_count(node, 1));
    control_flow::LoopArgs args;
    args.where = node.op_type;
    KILN_ASSIGN_OR_RETURN(args.captures, captures_of(node, 0));
    args.output_count = node.outputs.size();
    args.body = runner(0);
    const size_t states = node.inputs.size() - args.captures - (node.op_type == "Loop" ? 2 : 0);
    if (node.op_type == "Loop") {
      for (size_t v = 0; v < states; ++v) {
        args.carried_forms.push_back(graph.value(node.outputs.at(v)).form);
      }
      args.empty_scan_shape = [&](size_t k) {
        return empty_slice(graph.value(node.outputs.at(states + k)), 0);
      };
      return control_flow::run_loop(inputs, args);
    }
    if (node.op_type != "Scan")
      return unimplemented("op {} has no bodies kiln can run", node.op_type);
    KILN_ASSIGN_OR_RETURN(
        control_flow::ScanAttributes attrs,
        control_flow::parse_scan_attributes(node.attributes, node.inputs.size() - args.captures,
                                            node.outputs.size(), args.where));
    const size_t scan_states = node.inputs.size() - args.captures - attrs.num_scan_inputs;
    args.empty_scan_shape = [&](size_t k) -> StatusOr<control_flow::SliceType> {
      const ir::Value& value = graph.value(node.outputs.at(scan_states + k));
      KILN_ASSIGN_OR_RETURN(
          int64_t axis,
          control_flow::normalize_axis(
              attrs.output_axes[k], static_cast<int64_t>(value.shape.size()), "scan_output_axes"));
      return empty_slice(value, axis);
    };
    return control_flow::run_scan(inputs, node.attributes, args);
  }();
  if (!result.ok()) return with_node_note(std::move(result).status(), node);
  return result;
}

}  // namespace kiln::graph_eval
