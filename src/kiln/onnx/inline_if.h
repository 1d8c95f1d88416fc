// Small Ifs as dataflow. Internal to kiln_onnx; the importer runs it before opset conversion.
//
// The size rule: an If whose two branches together hold at most kMaxInlinedIfNodes nodes
// (counting the nodes of subgraphs inside them), no Loop, Scan or sequence or optional op
// (base/sequence_ops.h) and no sequence or optional output is inlined as below; any
// other If stays an If node whose branches the importer builds as bodies (ir::Node::bodies),
// and the runtime runs only the branch the condition takes, as a nested program. The rule counts
// nodes, a property of the graph alone: a model with symbolic dims and the same model with them
// bound make the same choice (and so the same dispatches), and a tiny branch costs less run twice
// than a stage boundary. Small Ifs inside bodies (Loop, Scan, large If) are inlined there.
//
// kiln compiles both branches of a small If into the enclosing graph and selects each output with
// Where on the condition: for `If(cond) then T else E` with outputs y_i,
//
//   c   = Reshape(cond, [])              (the single-element condition as a scalar)
//   t_i = the then branch's nodes, values renamed "<if>/then/<name>"
//   e_i = the else branch's nodes, values renamed "<if>/else/<name>"
//   y_i = Where(c, t_i, e_i)
//
// so a module serves either outcome at any input size with one static dispatch list, and the
// rest of kiln (shape inference, fusion, the reference evaluator, triage) sees ordinary nodes.
// Branch nodes keep reading outer-scope values by name. Ifs nested in branches are flattened
// first. Both branches run on every call, so a branch that cannot run on the given input (an
// out-of-range index in the branch not taken) fails the run with that node's error instead of
// being skipped; the selected outputs are exact either way.
//
// Errors (InvalidArgument, naming the If node): Ifs nested more than kMaxIfNesting deep, a
// missing branch, branch inputs, a branch with
// another output count than the node, a sparse initializer in a branch. Unimplemented: models
// below opset 9 (no Where). Branch outputs of different dtypes or shapes that do not broadcast
// are refused later by Where's shape inference, which names the generated "<if>/select_<i>".
#pragma once

#include <cstdint>

#include "onnx/onnx_pb.h"

#include "kiln/base/status.h"

namespace kiln::onnx_import {

inline constexpr int kMaxIfNesting = 16;
inline constexpr int kMaxInlinedIfNodes = 8;

// Replaces every small default-domain If node of `graph` (recursively, bodies included) as above.
// `opset` is the model's default-domain opset.
Status inline_if_nodes(onnx::GraphProto& graph, int64_t opset);

}  // namespace kiln::onnx_import
