// evaluate_graph (declared in registry.h): binds symbols from the inputs, then runs each node's
// reference evaluation in order.
#include "kiln/graph_eval/control_flow.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/graph_eval/lookup.h"
#include "kiln/graph_eval/sequence.h"

namespace kiln::graph_eval {
namespace {

// Ids are validated up front so that the evaluation loop can index freely (verify_graph does
// more, but evaluate_graph must not crash on a graph that skipped it).
Status check_ids(const ir::Graph& graph) {
  const auto count = static_cast<ir::ValueId>(graph.values().size());
  auto valid = [&](ir::ValueId id) { return id >= 0 && id < count; };
  for (ir::ValueId id : graph.inputs()) {
    if (!valid(id)) return invalid_argument("graph input value id {} is out of range", id);
  }
  for (ir::ValueId id : graph.outputs()) {
    if (!valid(id)) return invalid_argument("graph output value id {} is out of range", id);
  }
  for (const ir::Node& node : graph.nodes()) {
    for (ir::ValueId id : node.inputs) {
      if (id != ir::kAbsent && !valid(id)) {
        return invalid_argument("input value id {} is out of range", id)
            .with_note("in " + node.describe());
      }
    }
    for (ir::ValueId id : node.outputs) {
      if (id != ir::kAbsent && !valid(id)) {
        return invalid_argument("output value id {} is out of range", id)
            .with_note("in " + node.describe());
      }
    }
  }
  return ok_status();
}

Status bind_inputs(const ir::Graph& graph, std::span<const HostValue> inputs, Bindings& bindings) {
  if (inputs.size() != graph.inputs().size()) {
    return invalid_argument("graph '{}' has {} inputs, got {} tensors", graph.name,
                            graph.inputs().size(), inputs.size());
  }
  // Sequences and optionals: their form and dtype (their tensors' dims are their own).
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value& v = graph.value(graph.inputs()[i]);
    if (v.form == inputs[i].form() &&
        (v.form == ValueForm::kTensor || v.dtype == inputs[i].dtype()))
      continue;
    return invalid_argument("graph input {} '{}' must be a {} of {}, got {}", i, v.name,
                            value_form_name(v.form), dtype_name(v.dtype), inputs[i].describe());
  }
  // Bind plain symbols first so that a later dim such as 2*N can be checked whatever the order.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value& v = graph.value(graph.inputs()[i]);
    if (v.form != ValueForm::kTensor) continue;
    const Tensor& t = inputs[i].tensor();
    if (t.empty_storage()) return invalid_argument("graph input {} '{}' has no data", i, v.name);
    if (t.dtype() != v.dtype) {
      return invalid_argument("graph input {} '{}' must have dtype {}, got {}", i, v.name,
                              dtype_name(v.dtype), dtype_name(t.dtype()));
    }
    if (t.shape().size() != v.shape.size()) {
      return invalid_argument("graph input {} '{}' must have shape {} (rank {}), got {}", i, v.name,
                              shape_to_string(v.shape), v.shape.size(), shape_to_string(t.shape()));
    }
    for (size_t d = 0; d < v.shape.size(); ++d) {
      if (!v.shape[d].is_symbol()) continue;
      std::string name = v.shape[d].symbols().front();
      auto [it, inserted] = bindings.emplace(name, t.shape()[d]);
      if (!inserted && it->second != t.shape()[d]) {
        return invalid_argument(
            "graph input {} '{}' dim {} is symbol '{}' = {}, but '{}' is already bound to {} by "
            "an earlier dim",
            i, v.name, d, name, t.shape()[d], name, it->second);
      }
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value& v = graph.value(graph.inputs()[i]);
    if (v.form != ValueForm::kTensor) continue;
    const Tensor& t = inputs[i].tensor();
    for (size_t d = 0; d < v.shape.size(); ++d) {
      auto expected = v.shape[d].evaluate(bindings);
      if (!expected.ok()) {
        return std::move(expected).status().with_note(
            fmt::format("in dim {} of graph input {} '{}'", d, i, v.name));
      }
      if (*expected != t.shape()[d]) {
        return invalid_argument(
            "graph input {} '{}' must have shape {}, got {}: dim {} ({}) "
            "must be {}",
            i, v.name, shape_to_string(v.shape), shape_to_string(t.shape()), d,
            v.shape[d].to_string(), *expected);
      }
    }
  }
  return ok_status();
}

// One node on host values: control flow, a sequence op, or an op definition on tensors.
StatusOr<std::vector<HostValue>> evaluate_node_values(const ir::Graph& graph, ir::NodeId id,
                                                      std::span<const HostValue> inputs,
                                                      const Registry& registry) {
  const ir::Node& node = graph.node(id);
  if (is_control_flow(node)) return evaluate_control_flow(graph, id, inputs, registry);
  if (is_sequence_node(graph, node)) return evaluate_sequence_node(graph, id, inputs);
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_tensor()) {
      return with_node_note(
          invalid_argument("input {} is {}; the op takes tensors", i, inputs[i].describe()), node);
    }
    tensors.push_back(inputs[i].tensor());
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, evaluate_node(graph, id, tensors, registry));
  return tensor_values(outputs);
}

StatusOr<std::vector<HostValue>> evaluate(const ir::Graph& graph, std::span<const HostValue> inputs,
                                          std::map<ir::ValueId, Tensor>* intermediates,
                                          const Registry& registry) {
  KILN_RETURN_IF_ERROR(check_ids(graph));
  Bindings bindings;
  KILN_RETURN_IF_ERROR(bind_inputs(graph, inputs, bindings));
  size_t value_count = graph.values().size();
  std::vector<std::optional<HostValue>> computed(value_count);
  for (size_t i = 0; i < inputs.size(); ++i) computed[graph.inputs()[i]] = inputs[i];

  // Remaining reads of each value, so that intermediates can be freed early (ResNet-sized
  // graphs at large batch would otherwise hold every activation).
  std::vector<int64_t> uses(value_count, 0);
  for (const ir::Node& node : graph.nodes()) {
    for (ir::ValueId in : node.inputs) {
      if (in != ir::kAbsent) ++uses[in];
    }
  }
  std::vector<bool> is_output(value_count, false);
  for (ir::ValueId out : graph.outputs()) is_output[out] = true;

  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const ir::Node& node = graph.node(static_cast<ir::NodeId>(n));
    std::vector<HostValue> args;
    args.reserve(node.inputs.size());
    for (ir::ValueId in : node.inputs) {
      if (in == ir::kAbsent) {
        args.emplace_back();
      } else if (computed[in]) {
        args.push_back(*computed[in]);
      } else if (graph.value(in).constant) {
        args.push_back(*graph.value(in).constant);
      } else {
        return invalid_argument(
                   "input '{}' has no value: it is not a graph input, a constant or "
                   "the output of an earlier node",
                   graph.value(in).name)
            .with_note("in " + node.describe());
      }
    }
    KILN_ASSIGN_OR_RETURN(std::vector<HostValue> outs,
                          evaluate_node_values(graph, static_cast<ir::NodeId>(n), args, registry));
    for (size_t i = 0; i < outs.size() && i < node.outputs.size(); ++i) {
      ir::ValueId out = node.outputs[i];
      if (out == ir::kAbsent) continue;
      if (intermediates != nullptr && outs[i].is_tensor()) (*intermediates)[out] = outs[i].tensor();
      computed[out] = std::move(outs[i]);
    }
    if (intermediates == nullptr) {
      for (ir::ValueId in : node.inputs) {
        if (in == ir::kAbsent) continue;
        if (--uses[in] == 0 && !is_output[in]) computed[in].reset();
      }
    }
  }

  std::vector<HostValue> results;
  for (ir::ValueId out : graph.outputs()) {
    if (computed[out]) {
      results.push_back(*computed[out]);
    } else if (graph.value(out).constant) {
      results.push_back(*graph.value(out).constant);
    } else {
      return invalid_argument("graph output '{}' is never computed", graph.value(out).name);
    }
  }
  return results;
}

}  // namespace

StatusOr<std::vector<Tensor>> evaluate_graph(const ir::Graph& graph, std::span<const Tensor> inputs,
                                             std::map<ir::ValueId, Tensor>* intermediates,
                                             const Registry& registry) {
  KILN_ASSIGN_OR_RETURN(std::vector<HostValue> outputs,
                        evaluate(graph, tensor_values(inputs), intermediates, registry));
  return value_tensors(std::move(outputs), "graph output");
}

StatusOr<std::vector<HostValue>> evaluate_graph_values(const ir::Graph& graph,
                                                       std::span<const HostValue> inputs,
                                                       const Registry& registry) {
  return evaluate(graph, inputs, nullptr, registry);
}

}  // namespace kiln::graph_eval
