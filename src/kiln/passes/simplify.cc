#include <algorithm>

#include "kiln/passes/passes.h"

namespace kiln::passes {

StatusOr<int> simplify(ir::Graph& graph) {
  int rewrites = 0;
  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(graph.nodes().size()); ++id) {
    const ir::Node& node = graph.node(id);
    bool pass_through =
        node.op_type == "Identity" || (node.op_type == "Dropout" && node.outputs.size() == 1);
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
