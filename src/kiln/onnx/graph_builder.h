// Builds an ir::Graph from an ONNX GraphProto whose opset is already the target. Internal to
// kiln_onnx; importer.cc parses, checks domains and upgrades the opset first.
#pragma once

#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

#include "kiln/base/status.h"
#include "kiln/ir/graph.h"
#include "kiln/onnx/importer.h"

namespace kiln::onnx_import {

// One name per node, in order: the ONNX name, or "<OpType>_<index>" when empty; duplicates get a
// "__<n>" suffix so that every name is unique in the graph.
std::vector<std::string> unique_node_names(const onnx::GraphProto& graph);

// Unimplemented listing every op type the default registry lacks, each with all its node names
// ("unsupported ops: Foo (node 'a', node 'b'), Bar (node 'c')"), looked up at `opset`; OK when
// all are supported.
Status check_supported_ops(const onnx::GraphProto& graph, int64_t opset);

// Converts inputs, initializers, nodes and outputs, then runs graph_eval::infer_graph and checks
// the declared output types. `opset` is the graph's default-domain opset. See importer.h for the
// rules.
StatusOr<ir::Graph> build_graph(const onnx::GraphProto& graph, int64_t opset,
                                const std::string& model_dir, const ImportOptions& options);

}  // namespace kiln::onnx_import
