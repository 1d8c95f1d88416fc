// The host-side semantics of ONNX's sequence and optional ops (opset 17), shared by the float64
// reference evaluator (graph_eval) and the runtime, which runs each of these ops as a host stage
// of its own (runtime/stages.h): sequences and optionals live on the host as lists of host tensors
// (base/host_value.h), never on a device.
//
//   SequenceEmpty      () -> empty sequence of attribute kiln_dtype (the importer's form of ONNX
//                      `dtype`; default f32)
//   SequenceConstruct  (t...) -> sequence of the tensors, one dtype
//   SequenceAt         (seq, position) -> element; position i32/i64 in [-n, n-1]
//   SequenceInsert     (seq, t, position?) -> copy with t inserted; position in [-n, n], default n;
//                      t's dtype must be the sequence's
//   SequenceErase      (seq, position?) -> copy without an element; position in [-n, n-1],
//                      default -1
//   SequenceLength     (seq) -> i64 []
//   SplitToSequence    (t, split?) attributes axis (0), keepdims (1) -> sequence of slices along
//                      axis: of length 1 without `split` (axis removed unless keepdims), of length
//                      split (a scalar; the last may be shorter), or of the lengths split lists
//                      (1-D, summing to the axis' length)
//   ConcatFromSequence (seq) attributes axis (required), new_axis (0) -> the elements joined along
//                      axis (new_axis 1: stacked along a new axis, in [-r-1, r]); elements agree
//                      except on axis; an empty sequence is an error
//   Optional           (v?) -> optional holding v; without input: empty, of attributes kiln_form
//                      (a ValueForm code) and kiln_dtype (the importer's form of ONNX `type`)
//   OptionalHasElement (v?) -> bool []: whether v is present (a tensor or sequence is)
//   OptionalGetElement (v) -> what the optional holds (a tensor or sequence passes through); an
//                      empty optional is an error
//   Identity           (v) -> v, of any form
//   SequenceMap        (seq, inputs...) body -> sequences: the body runs once per element i of
//                      `seq`, on element i of every sequence input and on every tensor input
//                      whole, followed by the node's captures (attribute kiln_captures counts
//                      them); output k is the sequence of the body's outputs k. Sequence inputs
//                      must have one length.
//
// Errors are InvalidArgument and name the node (`where`): a position out of range or not one
// integer element, a dtype mismatch, an element count or length that does not fit, a body output
// of another form or dtype, an empty sequence to ConcatFromSequence, an empty optional to
// OptionalGetElement; OutOfRange when a result would exceed `max_bytes`.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/host_value.h"
#include "kiln/base/status.h"

namespace kiln::sequence_ops {

// Whether `op_type` is one of the ops above that always runs on the host (Identity runs there only
// on a sequence or an optional).
bool is_sequence_op(std::string_view op_type);

// Runs a SequenceMap body on its inputs, returning its outputs.
using BodyRunner = std::function<StatusOr<std::vector<HostValue>>(std::vector<HostValue> inputs)>;

struct OpArgs {
  std::string where;  // "node 'seq_at' (SequenceAt)", for errors
  const Attributes* attributes = nullptr;
  // The node's output dtypes (SequenceMap's outputs when the sequence is empty).
  std::vector<DType> output_dtypes;
  uint64_t max_bytes = UINT64_MAX;
  BodyRunner body;  // SequenceMap
};

// `inputs` in the node's order (a default HostValue for an omitted optional input).
StatusOr<std::vector<HostValue>> run(std::string_view op_type, std::span<const HostValue> inputs,
                                     const OpArgs& args);

// The attributes SequenceEmpty and an input-less Optional are given by the importer.
inline constexpr const char* kDtypeAttribute = "kiln_dtype";
inline constexpr const char* kFormAttribute = "kiln_form";

}  // namespace kiln::sequence_ops
