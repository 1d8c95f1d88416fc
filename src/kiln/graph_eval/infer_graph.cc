// infer_node and infer_graph (graph_eval.h): each node's definition (kernels::OpDef::infer) run
// on the symbolic types, shape values and constants of its inputs.
#include <algorithm>

#include "kiln/graph_eval/control_flow.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/graph_eval/lookup.h"
#include "kiln/graph_eval/sequence.h"
#include "kiln/shape/assumption.h"

namespace kiln::graph_eval {

std::string data_symbol_name(std::string_view node_name, size_t index) {
  return fmt::format("{}.size{}", node_name, index);
}

Status infer_node(ir::Graph& graph, ir::NodeId id, const Registry& registry) {
  if (id >= 0 && static_cast<size_t>(id) < graph.nodes().size() &&
      is_sequence_node(graph, graph.node(id))) {
    return infer_sequence_node(graph, id);
  }
  if (id >= 0 && static_cast<size_t>(id) < graph.nodes().size() &&
      is_control_flow(graph.node(id))) {
    return infer_control_flow(graph, id, registry);
  }
  KILN_ASSIGN_OR_RETURN(const OpDef* def, lookup(graph, id, registry));
  const ir::Node& node = graph.node(id);
  for (ir::ValueId out : node.outputs) {
    if (out != ir::kAbsent && (out < 0 || static_cast<size_t>(out) >= graph.values().size())) {
      return with_node_note(internal_error("output value id {} is out of range", out), node);
    }
  }
  kernels::InferArgs args{node.attributes, {}, {}, node.outputs.size(), {}, {}, {}, {}, {}, {}};
  for (ir::ValueId in : node.inputs) {
    if (in == ir::kAbsent) {
      args.inputs.emplace_back(std::nullopt);
      args.constants.push_back(nullptr);
      args.values.push_back(nullptr);
      continue;
    }
    if (in < 0 || static_cast<size_t>(in) >= graph.values().size()) {
      return with_node_note(internal_error("input value id {} is out of range", in), node);
    }
    const ir::Value& v = graph.value(in);
    if (v.form != ValueForm::kTensor) {
      return with_node_note(invalid_argument("input '{}' is a {}; {} takes tensors", v.name,
                                             value_form_name(v.form), node.op_type),
                            node);
    }
    args.inputs.emplace_back(ValueType{v.dtype, v.shape});
    args.constants.push_back(v.constant ? &*v.constant : nullptr);
    args.values.push_back(v.dim_values.empty() ? nullptr : &v.dim_values);
    args.value_denominators.resize(args.values.size(), 1);
    args.value_denominators.back() = v.dim_values_denominator;
  }
  if (args.values.size() < args.inputs.size()) args.values.resize(args.inputs.size(), nullptr);
  std::vector<std::string> data_symbols;
  args.data_dim = [&](size_t index) -> StatusOr<DimExpr> {
    if (index != data_symbols.size()) {
      return internal_error("data-dependent size {} asked for before size {}", index,
                            data_symbols.size());
    }
    data_symbols.push_back(data_symbol_name(node.name, index));
    return DimExpr::symbol(data_symbols.back());
  };
  AssumptionRecorder recorder;
  Status status = def->infer(args);
  if (status.ok() && args.outputs.size() != node.outputs.size()) {
    status = internal_error("infer gave {} output types for {} outputs", args.outputs.size(),
                            node.outputs.size());
  }
  if (!status.ok()) return with_node_note(std::move(status), node);
  for (Assumption assumption : recorder.assumptions()) {
    if (std::find(graph.assumptions.begin(), graph.assumptions.end(), assumption) !=
        graph.assumptions.end()) {
      continue;
    }
    assumption.origin = node.describe();
    graph.assumptions.push_back(std::move(assumption));
  }
  // Copy before writing: `node` refers into the graph, which the writes do not reshape.
  std::vector<ir::ValueId> outputs = node.outputs;
  graph.node(id).data_symbols = std::move(data_symbols);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] == ir::kAbsent) continue;
    ir::Value& v = graph.value(outputs[i]);
    v.form = ValueForm::kTensor;
    v.element_rank = -1;
    v.dtype = args.outputs[i].dtype;
    v.shape = std::move(args.outputs[i].shape);
    v.dim_values.clear();
    v.dim_values_denominator = 1;
    if (i < args.output_values.size() && args.output_values[i] && !v.constant) {
      v.dim_values = std::move(*args.output_values[i]);
      if (i < args.output_value_denominators.size()) {
        v.dim_values_denominator = args.output_value_denominators[i];
      }
    }
  }
  return ok_status();
}

Status infer_graph(ir::Graph& graph, const Registry& registry) {
  graph.assumptions.clear();
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    KILN_RETURN_IF_ERROR(infer_node(graph, static_cast<ir::NodeId>(i), registry));
  }
  return ok_status();
}

}  // namespace kiln::graph_eval
