#include "kiln/ops/registry.h"

#include <algorithm>

#include "kiln/ops/families.h"

namespace kiln::ops {
namespace {

Status with_node_note(Status status, const ir::Node& node) {
  return std::move(status).with_note("in " + node.describe());
}

StatusOr<const OpDef*> lookup(const ir::Graph& graph, const ir::Node& node,
                              const Registry& registry) {
  if (const OpDef* def = registry.find(node.op_type, graph.opset)) return def;
  if (registry.find(node.op_type) != nullptr) {
    return unimplemented("op {} is not supported at opset {}", node.op_type, graph.opset);
  }
  return unimplemented("unsupported op type '{}'", node.op_type);
}

}  // namespace

void Registry::add(OpDef def) {
  int64_t version = def.since_version;
  std::string op_type = def.op_type;
  defs_[op_type].insert_or_assign(version, std::move(def));
}

const OpDef* Registry::find(std::string_view op_type) const {
  auto it = defs_.find(op_type);
  if (it == defs_.end() || it->second.empty()) return nullptr;
  return &it->second.rbegin()->second;
}

const OpDef* Registry::find(std::string_view op_type, int64_t opset) const {
  auto it = defs_.find(op_type);
  if (it == defs_.end()) return nullptr;
  auto version = it->second.upper_bound(opset);
  if (version == it->second.begin()) return nullptr;
  return &std::prev(version)->second;
}

std::vector<std::string> Registry::op_types() const {
  std::vector<std::string> out;
  for (const auto& [name, versions] : defs_) out.push_back(name);
  return out;
}

void register_all(Registry& registry) {
  register_elementwise_ops(registry);
  register_normalization_ops(registry);
  register_softmax_ops(registry);
  register_shape_ops(registry);
  register_portable_ops(registry);
}

const Registry& default_registry() {
  static const Registry registry = [] {
    Registry r;
    register_all(r);
    return r;
  }();
  return registry;
}

Status infer_node(ir::Graph& graph, ir::NodeId id, const Registry& registry) {
  if (id < 0 || static_cast<size_t>(id) >= graph.nodes().size()) {
    return invalid_argument("node id {} is out of range (graph has {} nodes)", id,
                            graph.nodes().size());
  }
  const ir::Node& node = graph.node(id);
  auto def = lookup(graph, node, registry);
  if (!def.ok()) return with_node_note(std::move(def).status(), node);
  for (ir::ValueId out : node.outputs) {
    if (out != ir::kAbsent && (out < 0 || static_cast<size_t>(out) >= graph.values().size())) {
      return with_node_note(internal_error("output value id {} is out of range", out), node);
    }
  }
  InferContext ctx{node, {}, {}, {}};
  for (ir::ValueId in : node.inputs) {
    if (in == ir::kAbsent) {
      ctx.inputs.emplace_back(std::nullopt);
      ctx.constants.push_back(nullptr);
      ctx.values.push_back(nullptr);
      continue;
    }
    if (in < 0 || static_cast<size_t>(in) >= graph.values().size()) {
      return with_node_note(internal_error("input value id {} is out of range", in), node);
    }
    const ir::Value& v = graph.value(in);
    ctx.inputs.emplace_back(ValueType{v.dtype, v.shape});
    ctx.constants.push_back(v.constant ? &*v.constant : nullptr);
    ctx.values.push_back(v.dim_values.empty() ? nullptr : &v.dim_values);
    ctx.value_denominators.resize(ctx.values.size(), 1);
    ctx.value_denominators.back() = v.dim_values_denominator;
  }
  if (ctx.values.size() < ctx.inputs.size()) ctx.values.resize(ctx.inputs.size(), nullptr);
  std::vector<std::string> data_symbols;
  ctx.data_dim = [&](size_t index) -> StatusOr<DimExpr> {
    if (index != data_symbols.size()) {
      return internal_error("data-dependent size {} asked for before size {}", index,
                            data_symbols.size());
    }
    data_symbols.push_back(data_symbol_name(node.name, index));
    return DimExpr::symbol(data_symbols.back());
  };
  AssumptionRecorder recorder;
  Status status = (*def)->infer(ctx);
  if (!status.ok()) return with_node_note(std::move(status), node);
  for (Assumption assumption : recorder.assumptions()) {
    if (std::find(graph.assumptions.begin(), graph.assumptions.end(), assumption) !=
        graph.assumptions.end()) {
      continue;
    }
    assumption.origin = node.describe();
    graph.assumptions.push_back(std::move(assumption));
  }
  if (ctx.outputs.size() != node.outputs.size()) {
    return with_node_note(internal_error("infer gave {} output types for {} outputs",
                                         ctx.outputs.size(), node.outputs.size()),
                          node);
  }
  // Copy before writing: `node` refers into the graph, which the writes do not reshape.
  std::vector<ir::ValueId> outputs = node.outputs;
  graph.node(id).data_symbols = std::move(data_symbols);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] == ir::kAbsent) continue;
    ir::Value& v = graph.value(outputs[i]);
    v.dtype = ctx.outputs[i].dtype;
    v.shape = std::move(ctx.outputs[i].shape);
    v.dim_values.clear();
    v.dim_values_denominator = 1;
    if (i < ctx.output_values.size() && ctx.output_values[i] && !v.constant) {
      v.dim_values = std::move(*ctx.output_values[i]);
      if (i < ctx.output_value_denominators.size()) {
        v.dim_values_denominator = ctx.output_value_denominators[i];
      }
    }
  }
  return ok_status();
}

std::string data_symbol_name(std::string_view node_name, size_t index) {
  return fmt::format("{}.size{}", node_name, index);
}

Status infer_graph(ir::Graph& graph, const Registry& registry) {
  graph.assumptions.clear();
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    KILN_RETURN_IF_ERROR(infer_node(graph, static_cast<ir::NodeId>(i), registry));
  }
  return ok_status();
}

std::vector<std::string> unsupported_ops(const ir::Graph& graph, const Registry& registry) {
  std::vector<std::pair<std::string, std::vector<std::string>>> missing;
  for (const ir::Node& node : graph.nodes()) {
    if (registry.find(node.op_type, graph.opset) != nullptr) continue;
    auto it = std::find_if(missing.begin(), missing.end(),
                           [&](const auto& entry) { return entry.first == node.op_type; });
    if (it == missing.end()) {
      missing.push_back({node.op_type, {}});
      it = std::prev(missing.end());
    }
    it->second.push_back(fmt::format("node '{}'", node.name));
  }
  std::vector<std::string> out;
  for (const auto& [op, nodes] : missing) {
    out.push_back(fmt::format("{} ({})", op, fmt::join(nodes, ", ")));
  }
  return out;
}

StatusOr<std::vector<Tensor>> evaluate_node(const ir::Graph& graph, ir::NodeId id,
                                            std::span<const Tensor> inputs,
                                            const Registry& registry) {
  if (id < 0 || static_cast<size_t>(id) >= graph.nodes().size()) {
    return invalid_argument("node id {} is out of range (graph has {} nodes)", id,
                            graph.nodes().size());
  }
  const ir::Node& node = graph.node(id);
  auto def = lookup(graph, node, registry);
  if (!def.ok()) return with_node_note(std::move(def).status(), node);
  if (inputs.size() != node.inputs.size()) {
    return with_node_note(invalid_argument("got {} input tensors for {} node inputs", inputs.size(),
                                           node.inputs.size()),
                          node);
  }
  std::vector<Tensor> outputs;
  Status status = (*def)->evaluate(node, inputs, outputs);
  if (!status.ok()) return with_node_note(std::move(status), node);
  if (outputs.size() != node.outputs.size()) {
    return with_node_note(internal_error("evaluation gave {} outputs for {} node outputs",
                                         outputs.size(), node.outputs.size()),
                          node);
  }
  return outputs;
}

}  // namespace kiln::ops
