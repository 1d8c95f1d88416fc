#include "kiln/ops/conv_geometry.h"
#include "kiln/passes/passes.h"

namespace kiln::passes {

StatusOr<int> canonicalize(ir::Graph& graph) {
  int rewrites = 0;
  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(graph.nodes().size()); ++id) {
    const std::string& op = graph.node(id).op_type;
    if (op != "Conv" && op != "MaxPool" && op != "AveragePool") continue;
    Status status = ops::canonicalize_window_attributes(graph, id);
    if (!status.ok()) return std::move(status).with_note("in " + graph.node(id).describe());
    ++rewrites;
  }
  return rewrites;
}

}  // namespace kiln::passes
