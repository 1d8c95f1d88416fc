// Internal to kiln_graph_eval: shape inference and reference evaluation of control-flow nodes
// (ir::Node::bodies: Loop, Scan, If, and SequenceMap, whose semantics are
// base/sequence_ops.h's), which infer_node and evaluate_node hand over here. A loop-carried value,
// a captured value and an If output may be a sequence or an optional (ir::Value::form): its form
// must not change, and its element rank is what every iteration or branch agrees on. The
// semantics around a body run are kiln/base/control_flow.h's, shared with the runtime.
//
// Inference gives each body its input types and infers it (recursively):
//   - formal inputs: Loop's iteration number (i64 []) and condition (bool []); the carried or
//     state values and captures with the outer types, except that a dim that is not a number or
//     a bare symbol becomes a fresh symbol (a body binds its symbols from its own inputs' shapes
//     each time it runs); Scan's slices are the scan inputs without their scan axis.
//   - a loop-carried (Loop) or state (Scan) value whose dim the body changes gets a fresh symbol
//     for that dim ("<node>.carried<v>_<d>"), and the body is inferred again until no dim
//     changes; a rank or dtype change is an error.
// The node's outputs: carried values with the dims that never change; scan outputs with a leading
// (Loop) or scan-axis (Scan, the scan inputs' length) iteration count; If outputs with the dims
// both branches agree on. Every other dim (a changing carried dim, Loop's iteration count, a dim
// the branches disagree on, a body-local symbol) is a data-dependent size of the node
// (ir::Node::data_symbols, named by data_symbol_name), which the runtime binds from the outputs
// once the node has run.
//
// Errors name the node: body input or output counts that do not fit the node (inputs, outputs,
// kiln_captures), a trip count that is not int64 or a condition that is not bool, mismatched
// branch dtypes or ranks, Scan attributes (control_flow::parse_scan_attributes).
#pragma once

#include <span>
#include <vector>

#include "kiln/base/host_value.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/ir/graph.h"

namespace kiln::graph_eval {

class Registry;

// Whether `node` is control flow run through its bodies.
inline bool is_control_flow(const ir::Node& node) { return !node.bodies.empty(); }

Status infer_control_flow(ir::Graph& graph, ir::NodeId id, const Registry& registry);

StatusOr<std::vector<HostValue>> evaluate_control_flow(const ir::Graph& graph, ir::NodeId id,
                                                       std::span<const HostValue> inputs,
                                                       const Registry& registry);

}  // namespace kiln::graph_eval
