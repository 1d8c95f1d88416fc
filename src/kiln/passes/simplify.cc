#include <algorithm>

#include "kiln/passes/passes.h"

namespace kiln::passes {

namespace {

// A Dropout is the identity when its training_mode is absent or a constant false; in training
// mode it draws a mask.
bool inference_dropout(const ir::Graph& graph, const ir::Node& node) {
  if (node.op_type != "Dropout" || node.outputs.size() != 1) return false;
  if (node.inputs.size() < 3 || node.inputs[2] == ir::kAbsent) return true;
  if (!graph.is_constant(node.inputs[2])) return false;
  const Tensor& mode = *graph.value(node.inputs[2]).constant;
  return mode.element_count() == 1 && element_as_int64(mode, 0) == 0;
}

}  // namespace

StatusOr<int> simplify(ir::Graph& graph) {
  int rewrites = 0;
  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(graph.nodes().size()); ++id) {
    const ir::Node& node = graph.node(id);
    bool pass_through = node.op_type == "Identity" || inference_dropout(graph, node);
    if (!pass_through || node.inputs.empty() || node.inputs[0] == ir::kAbsent) continue;
    ir::ValueId in = node.inputs[0];
    ir::ValueId out = node.outputs[0];
    // A graph output keeps its name; bypassing would rename it, so only bypass internal values.
    bool is_graph_output =
        std::find(graph.outputs().begin(), graph.outputs().end(), out) != graph.outputs().end();
    bool in_is_graph_input =
        std::find(graph.inputs().begin(), graph.inputs().end(), in) != graph.inputs().end();
    if (is_graph_output && (in_is_graph_input || graph.is_constant(in))) continue;
    if (is_graph_output) {
      // Rename the producer's output to the graph output name by swapping roles.
      std::string name = graph.value(out).name;
      graph.value(out).name = graph.value(in).name;
      graph.value(in).name = name;
    }
    graph.replace_uses(out, in);
    graph.erase_node(id);
    ++rewrites;
  }
  if (rewrites) graph.remove_dead();
  return rewrites;
}

StatusOr<int> remove_dead(ir::Graph& graph) {
  size_t before = graph.nodes().size();
  graph.remove_dead();
  return static_cast<int>(before - graph.nodes().size());
}

}  // namespace kiln::passes
