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
// Models below opset 7 whose declared dims are symbolic are converted with distinct stand-in
// numbers for those dims (ONNX's broadcasting adapters refuse symbols), and refused if a stand-in
// reaches a tensor of the result.
// libonnx's exceptions are caught here. On failure the error names the single step that failed
// ("opset 9 -> 10") and the model's nodes whose op changes at that step, which is where the
// converter's adapters run.
StatusOr<onnx::ModelProto> upgrade_opset(onnx::ModelProto model, int64_t from, int64_t target);

// Softmax, LogSoftmax and Hardmax before opset 13 flatten their input to 2-D at `axis` (default
// 1) and normalize each row; from 13 they work along `axis` alone. ONNX's converter cannot
// upgrade them without a known input shape (it fails, or for a symbolic dim writes a wrong
// Reshape), and it calls Hardmax's change compatible. So for a model at `opset` 5-12, each such
// node gets `axis` -1 where that is its last axis (its rank declared or found by ONNX's shape
// inference), and otherwise becomes Flatten(x, axis) -> op(axis=-1) -> Reshape(Shape(x)), which
// means the same at every opset and any rank. Nodes keep their names; the added ones are named
// "<node>/kiln_flatten" etc. A no-op for other opsets.
void spell_out_legacy_axis_ops(onnx::ModelProto& model, int64_t opset);

}  // namespace kiln::onnx_import
