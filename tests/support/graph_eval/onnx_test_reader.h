// A minimal protobuf decoder for the ONNX backend test cases
// (/usr/share/libonnx-testdata/data/node/<case>/{model.onnx, test_data_set_0/*.pb}), so the op
// conformance smoke test does not depend on the importer (src/kiln/onnx). It understands just the
// fields those single-node models use; anything else is an error, never a crash.
#pragma once

#include <string>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::testing {

// Decodes a serialized TensorProto (float, double, int64, int32, bool, uint8 data).
StatusOr<Tensor> read_tensor_proto(const std::string& bytes);
StatusOr<Tensor> read_tensor_file(const std::string& path);

struct OnnxTestModel {
  ir::Graph graph;
  // Names of the graph inputs that are not initializers, in model order.
  std::vector<std::string> runtime_inputs;
};

// Builds an IR graph from model.onnx: inputs (dim_param and missing dims become symbols),
// initializers as constants, nodes with their attributes, outputs, and the default-domain opset.
StatusOr<OnnxTestModel> read_onnx_test_model(const std::string& path);

}  // namespace kiln::testing
