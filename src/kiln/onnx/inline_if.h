// If as dataflow. Internal to kiln_onnx; the importer runs it before opset conversion.
//
// kiln compiles both branches of an If into the enclosing graph and selects each output with
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

// Replaces every default-domain If node of `graph` (recursively) as above. `opset` is the
// model's default-domain opset.
Status inline_if_nodes(onnx::GraphProto& graph, int64_t opset);

}  // namespace kiln::onnx_import
