// IR → ONNX: writing a piece of an imported graph back out as a standalone model (triage's
// minimal repro), and copying a model with intermediate values exposed as graph outputs (so that
// ONNX Runtime reports them). Lives here because only this folder may include protobuf/ONNX.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/ir/graph.h"

namespace kiln::onnx_import {

// Writes `nodes` of `graph` (ids in topological order, all from an imported, unfused graph with
// plain ONNX attributes) as an ONNX model at `path`, atomically. Values the nodes read that are
// constants become initializers; the other values they read but do not produce become graph
// inputs, in order of first use; `outputs` (values produced by the nodes) become graph outputs.
// Dims keep their form: integers as dim_value, symbols as dim_param, other expressions unnamed.
// The model declares opset graph.opset and passes onnx::checker::check_model before it is
// written. Errors: empty `nodes` or `outputs`, an id out of range, an output not produced by the
// nodes, a kiln-only op or attribute ("kiln_activation"), an f16 constant, a checker failure
// (with the checker's message); each names the node or value.
Status export_subgraph(const ir::Graph& graph, std::span<const ir::NodeId> nodes,
                       std::span<const ir::ValueId> outputs, const std::string& graph_name,
                       const std::string& path);

// Copies the ONNX model at `model_path` to `out_path` (atomically) with each (name, dtype) of
// `extra_outputs` that is not already a graph output appended as one, typed but without a shape.
// Errors: the model cannot be read or parsed, a name is not produced by any node or is a graph
// input, the model keeps tensors in external data files (the copy would not find them).
Status write_model_with_outputs(const std::string& model_path,
                                std::span<const std::pair<std::string, DType>> extra_outputs,
                                const std::string& out_path);

}  // namespace kiln::onnx_import
