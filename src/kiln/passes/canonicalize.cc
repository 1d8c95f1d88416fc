#include "kiln/passes/canonical_windows.h"
#include "kiln/passes/passes.h"

namespace kiln::passes {
namespace {

// Before opset 13, Softmax, LogSoftmax and Hardmax flattened their input to 2-D at `axis`
// (default 1) and normalized the whole second part; from 13 they normalize along `axis` only.
// Modules carry the opset-13 form, which equals the old one exactly when `axis` is the last dim.
Status canonicalize_legacy_axis_op(ir::Graph& graph, ir::NodeId id) {
  ir::Node& node = graph.node(id);
  const int64_t rank = static_cast<int64_t>(graph.value(node.inputs.at(0)).shape.size());
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.attributes.get_int("axis", 1));
  if (axis < 0) axis += rank;
  if (axis != rank - 1) {
    return unimplemented(
        "{} before opset 13 with axis {} of a rank-{} input normalizes several dims at once; "
        "kiln supports it only on the last axis (import with --opset-version 17 after re-export)",
        node.op_type, axis, rank);
  }
  node.attributes.set("axis", int64_t{-1});
  return ok_status();
}

}  // namespace

StatusOr<int> canonicalize(ir::Graph& graph) {
  int rewrites = 0;
  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(graph.nodes().size()); ++id) {
    const std::string& op = graph.node(id).op_type;
    Status status;
    if (op == "Conv" || op == "MaxPool" || op == "AveragePool") {
      status = canonicalize_window_attributes(graph, id);
    } else if ((op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") && graph.opset < 13) {
      status = canonicalize_legacy_axis_op(graph, id);
    } else {
      continue;
    }
    if (!status.ok()) return std::move(status).with_note("in " + graph.node(id).describe());
    ++rewrites;
  }
  return rewrites;
}

}  // namespace kiln::passes
