// The host-side semantics of ONNX control flow (Loop, Scan, If), shared by the float64 reference
// evaluator (graph_eval, which runs a body by recursion over its IR graph) and the runtime (which
// runs a body as a nested program of the module on the session's device). The caller supplies
// how to run a body; this file owns everything ONNX says around it: the trip count and the
// condition, loop-carried values, slicing scan inputs, stacking scan outputs, and the checks.
//
// Node inputs are passed as host values in the node's order (base/host_value.h: a loop-carried
// value may be a sequence or an optional); an omitted optional input is an empty
// (default-constructed) value. A body's inputs are the op's formal body inputs followed by the
// captures (outer-scope values the body reads, which the node lists as its last inputs, in the
// same order). Each `BodyRunner` call gets the body's inputs and returns its outputs.
//
//   Loop  inputs (M, cond, v_initial..., captures...); body (iter_num i64 [], cond bool [],
//         v..., captures...) -> (cond_out, v..., scan...); outputs (v_final..., scan...), each
//         scan output its per-iteration values stacked along a new axis 0. M absent: no bound;
//         cond absent: the body's cond_out is ignored (ONNX). Both absent is an error (kiln does
//         not run unbounded loops). Carried values keep their form and dtype (an optional may
//         become what it holds, LoopArgs::carried_forms); their shapes may change.
//   Scan  inputs (state..., scan_input..., captures...) with attributes num_scan_inputs,
//         scan_input_axes/directions, scan_output_axes/directions (opset 9+ semantics); body
//         (state..., scan slices..., captures...) -> (state..., scan output slices...).
//   If    see read_condition: the caller runs the branch it picks.
//
// Errors (InvalidArgument unless said): a trip count that is not one int64 element or is
// negative, or over kMaxLoopIterations (OutOfRange); a condition that is not one bool element;
// a body that returns another number of outputs, another form or dtype for a carried value, or scan
// output slices whose shapes differ between iterations; scan outputs over `max_bytes`
// (OutOfRange); scan inputs whose lengths differ. Each names the node (`where`).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/host_value.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln::control_flow {

// More iterations than this are refused before the first runs: a hostile or corrupt trip count
// must not keep a run busy for days.
inline constexpr int64_t kMaxLoopIterations = int64_t{1} << 31;

using BodyRunner = std::function<StatusOr<std::vector<HostValue>>(std::vector<HostValue> inputs)>;
// The dtype and dims of scan output `index` per iteration when the loop ran zero times (the body
// never said): the caller knows them from shape inference, or fails naming the output.
struct SliceType {
  DType dtype = DType::kF32;
  ConcreteShape shape;
};
using EmptyScanShape = std::function<StatusOr<SliceType>(size_t index)>;

struct LoopArgs {
  std::string where;  // "node 'loop' (Loop)", for errors
  size_t captures = 0;
  size_t output_count = 0;  // the node's outputs: carried values, then scan outputs
  uint64_t max_bytes = UINT64_MAX;
  BodyRunner body;
  EmptyScanShape empty_scan_shape;
  // Loop: the forms of the node's carried outputs, when known (empty: each keeps its input's).
  // A carried optional the body returns as what it holds (ONNX's test_loop16_seq_none: an empty
  // optional sequence that the first iteration fills) enters every iteration as an optional and
  // leaves the loop as what it holds; an empty one left by zero iterations is an error.
  std::vector<ValueForm> carried_forms;
};

StatusOr<std::vector<HostValue>> run_loop(std::span<const HostValue> inputs, const LoopArgs& args);

// Scan's attributes, checked against the node: num_scan_inputs M in [1, inputs], each list of
// axes/directions as long as the inputs or outputs it describes, directions 0 or 1. Axes are
// normalized by the caller, who knows the ranks (normalize_axis).
struct ScanAttributes {
  int64_t num_scan_inputs = 0;
  std::vector<int64_t> input_axes, input_directions, output_axes, output_directions;
};
// `inputs`: the node's inputs without the captures; `outputs`: the node's outputs.
StatusOr<ScanAttributes> parse_scan_attributes(const Attributes& attributes, size_t inputs,
                                               size_t outputs, std::string_view where);
// `axis` in [-rank, rank) as a value in [0, rank); an error naming `what` otherwise.
StatusOr<int64_t> normalize_axis(int64_t axis, int64_t rank, std::string_view what);

// `attributes`: the Scan node's (num_scan_inputs and the axes/directions above).
StatusOr<std::vector<HostValue>> run_scan(std::span<const HostValue> inputs,
                                          const Attributes& attributes, const LoopArgs& args);

// A condition (If's, Loop's): one bool element, any rank. `what` names it in errors.
StatusOr<bool> read_condition(const Tensor& condition, std::string_view what);

// Slice `index` of `tensor` along `axis` (the axis removed), and per-slice tensors stacked along
// a new `axis`; all slices must have one shape. Exposed for tests.
Tensor slice_along(const Tensor& tensor, int64_t axis, int64_t index);
StatusOr<Tensor> stack_along(std::span<const Tensor> slices, int64_t axis, DType dtype,
                             const ConcreteShape& slice_shape);

// The product of dims [begin, end) of a valid tensor's shape (no overflow); also the sequence
// ops' (base/sequence_ops.h) split and concatenation strides.
int64_t span_product(const ConcreteShape& shape, size_t begin, size_t end);

}  // namespace kiln::control_flow
