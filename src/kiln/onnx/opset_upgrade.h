// Default-domain opset upgrade through ONNX's version converter. Internal to kiln_onnx.
#pragma once

#include <cstdint>

#include "onnx/onnx_pb.h"

#include "kiln/base/status.h"

namespace kiln::onnx_import {

// Returns `model` converted from default-domain opset `from` to `target` (from < target). Takes
// the model by value so a caller that moves it in does not hold two copies of the weights.
// Before converting, each node's input and output counts are checked against its schema at
// `from`, and its attributes for a type and divisors (strides, dilations, kernel_shape,
// blocksize) >= 1 (an error names the node; the converter or ONNX's shape inference would
// crash), and PRelu slopes of opsets < 7
// keep their per-channel meaning. Resize nodes made from Upsample or Resize-10 keep their
// asymmetric / floor semantics, which the converter alone would lose.
// libonnx's exceptions are caught here. On failure the error names the single step that failed
// ("opset 9 -> 10") and the model's nodes whose op changes at that step, which is where the
// converter's adapters run.
StatusOr<onnx::ModelProto> upgrade_opset(onnx::ModelProto model, int64_t from, int64_t target);

}  // namespace kiln::onnx_import
