#include "kiln/ops/registry.h"
#include "kiln/passes/passes.h"

namespace kiln::passes {

StatusOr<int> fold_constants(ir::Graph& graph) {
  int rewrites = 0;
  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(graph.nodes().size()); ++id) {
    const ir::Node& node = graph.node(id);
    bool all_constant = !node.inputs.empty();
    std::vector<Tensor> inputs;
    for (ir::ValueId in : node.inputs) {
      if (in == ir::kAbsent) {
        inputs.emplace_back();
        continue;
      }
      if (!graph.is_constant(in)) {
        all_constant = false;
        break;
      }
      inputs.push_back(*graph.value(in).constant);
    }
    if (!all_constant) continue;
    auto outputs = ops::evaluate_node(graph, id, inputs);
    if (!outputs.ok()) return std::move(outputs).status().with_note("while folding " + node.describe());
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      ir::Value& out = graph.value(node.outputs[i]);
      out.constant = std::move((*outputs)[i]);
    }
    graph.erase_node(id);
    ++rewrites;
  }
  if (rewrites) graph.remove_dead();
  return rewrites;
}

}  // namespace kiln::passes
