#include <algorithm>

#include "kiln/base/sequence_ops.h"
#include "kiln/graph_eval/control_flow.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/graph_eval/lookup.h"

namespace kiln::graph_eval {

StatusOr<const OpDef*> lookup(const ir::Graph& graph, ir::NodeId id, const Registry& registry) {
  if (id < 0 || static_cast<size_t>(id) >= graph.nodes().size()) {
    return invalid_argument("node id {} is out of range (graph has {} nodes)", id,
                            graph.nodes().size());
  }
  const ir::Node& node = graph.node(id);
  if (const OpDef* def = registry.find(node.op_type, graph.opset)) return def;
  if (registry.find(node.op_type) != nullptr) {
    return with_node_note(
        unimplemented("op {} is not supported at opset {}", node.op_type, graph.opset), node);
  }
  return with_node_note(unimplemented("unsupported op type '{}'", node.op_type), node);
}

Status with_node_note(Status status, const ir::Node& node) {
  return std::move(status).with_note("in " + node.describe());
}

void Registry::add(const OpDef& def) {
  defs_[std::string(def.op_type)].insert_or_assign(def.since_version, def);
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

const Registry& default_registry() {
  static const Registry registry = [] {
    Registry r;
    for (const OpDef& def : kernels::all_op_defs()) r.add(def);
    return r;
  }();
  return registry;
}

namespace {

// Every node of `graph` and of its bodies whose op the registry lacks, grouped by op type.
void collect_unsupported(const ir::Graph& graph, const Registry& registry,
                         std::vector<std::pair<std::string, std::vector<std::string>>>& missing) {
  for (const ir::Node& node : graph.nodes()) {
    if (is_control_flow(node)) {
      for (const auto& body : node.bodies) {
        if (body != nullptr) collect_unsupported(*body, registry, missing);
      }
      continue;
    }
    if (registry.find(node.op_type, graph.opset) != nullptr ||
        sequence_ops::is_sequence_op(node.op_type)) {
      continue;
    }
    auto it = std::find_if(missing.begin(), missing.end(),
                           [&](const auto& entry) { return entry.first == node.op_type; });
    if (it == missing.end()) {
      missing.push_back({node.op_type, {}});
      it = std::prev(missing.end());
    }
    it->second.push_back(fmt::format("node '{}'", node.name));
  }
}

}  // namespace

std::vector<std::string> unsupported_ops(const ir::Graph& graph, const Registry& registry) {
  std::vector<std::pair<std::string, std::vector<std::string>>> missing;
  collect_unsupported(graph, registry, missing);
  std::vector<std::string> out;
  for (const auto& [op, nodes] : missing) {
    out.push_back(fmt::format("{} ({})", op, fmt::join(nodes, ", ")));
  }
  return out;
}

}  // namespace kiln::graph_eval
