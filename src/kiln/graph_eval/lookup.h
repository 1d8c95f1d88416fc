// Internal to kiln_graph_eval: finding a node's op definition, and the node note on errors.
#pragma once

#include "kiln/graph_eval/graph_eval.h"

namespace kiln::graph_eval {

// The definition of node `id`'s op at the graph's opset. Errors: an id out of range; Unimplemented
// naming the op (and the opset when only other versions exist), with the node note.
StatusOr<const OpDef*> lookup(const ir::Graph& graph, ir::NodeId id, const Registry& registry);
// `status` with the note "in node 'X' (Op)".
Status with_node_note(Status status, const ir::Node& node);

}  // namespace kiln::graph_eval
