#include "kiln/triage/layers.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace kiln::triage {

StatusOr<Tolerance> layer_tolerance(const LayerTolerance& settings, double expected_max_abs) {
  for (auto [name, value] :
       {std::pair{"atol", settings.atol_floor}, std::pair{"rtol", settings.rtol},
        std::pair{"scale", settings.scale}}) {
    if (!(value >= 0) || !std::isfinite(value)) {
      return invalid_argument("tolerance {} must be a finite number >= 0, got {}", name, value);
    }
  }
  return Tolerance{settings.atol_floor + settings.scale * expected_max_abs, settings.rtol, false};
}

std::vector<std::string> reference_names(const module::ModuleContents& module,
                                         const ir::Graph* graph) {
  std::vector<std::string> names;
  names.reserve(module.values.size());
  for (const module::ModuleValue& value : module.values) names.push_back(value.name);
  if (graph == nullptr) return names;
  std::map<std::string, ir::NodeId> nodes;
  for (size_t n = 0; n < graph->nodes().size(); ++n)
    nodes.emplace(graph->nodes()[n].name, static_cast<ir::NodeId>(n));
  for (const module::Dispatch& dispatch : module.dispatches) {
    if (dispatch.origins.empty()) continue;
    auto it = nodes.find(dispatch.origins.back());
    if (it == nodes.end()) continue;
    const ir::Node& last = graph->node(it->second);
    for (size_t i = 0; i < dispatch.outputs.size() && i < last.outputs.size(); ++i) {
      if (last.outputs[i] != ir::kAbsent)
        names[dispatch.outputs[i]] = graph->value(last.outputs[i]).name;
    }
  }
  return names;
}

Status check_module_matches_graph(const module::ModuleContents& module, const ir::Graph& graph,
                                  const std::string& what) {
  auto names = [](const auto& ids, auto&& name_of) {
    std::vector<std::string> out;
    for (auto id : ids) out.push_back(name_of(id));
    return out;
  };
  auto module_name = [&](int32_t v) { return module.values[v].name; };
  auto graph_name = [&](ir::ValueId v) { return graph.value(v).name; };
  const auto module_inputs = names(module.inputs, module_name),
             graph_inputs = names(graph.inputs(), graph_name);
  const auto module_outputs = names(module.outputs, module_name),
             graph_outputs = names(graph.outputs(), graph_name);
  if (module_inputs != graph_inputs || module_outputs != graph_outputs) {
    return invalid_argument(
        "{} was not built from this model: it has inputs [{}] and outputs [{}], "
        "the model has inputs [{}] and outputs [{}]",
        what, fmt::join(module_inputs, ", "), fmt::join(module_outputs, ", "),
        fmt::join(graph_inputs, ", "), fmt::join(graph_outputs, ", "));
  }
  for (size_t i = 0; i < module.inputs.size(); ++i) {
    const module::ModuleValue& m = module.values[module.inputs[i]];
    const ir::Value& g = graph.value(graph.inputs()[i]);
    if (m.dtype != g.dtype || m.shape.size() != g.shape.size()) {
      return invalid_argument(
          "{} was not built from this model: input '{}' is {}{} there, {}{} in "
          "the model",
          what, m.name, dtype_name(m.dtype), shape_to_string(m.shape), dtype_name(g.dtype),
          shape_to_string(g.shape));
    }
  }
  std::set<std::string> nodes;
  for (const ir::Node& node : graph.nodes()) nodes.insert(node.name);
  std::vector<std::string> unknown;
  for (const module::Dispatch& dispatch : module.dispatches) {
    for (const std::string& origin : dispatch.origins) {
      if (!nodes.count(origin))
        unknown.push_back(fmt::format("'{}' (dispatch '{}')", origin, dispatch.name));
    }
  }
  if (!unknown.empty()) {
    if (unknown.size() > 5) {
      const size_t more = unknown.size() - 5;
      unknown.resize(5);
      unknown.push_back(fmt::format("and {} more", more));
    }
    return invalid_argument(
        "{} was not built from this model: its dispatches come from ONNX nodes "
        "the model does not have: {}",
        what, fmt::join(unknown, ", "));
  }
  return ok_status();
}

}  // namespace kiln::triage
