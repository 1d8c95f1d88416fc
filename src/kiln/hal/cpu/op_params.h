// Reading one dispatch for the CPU backend's paths (op_table.h): its values, dtypes and ranks,
// and attributes with ONNX defaults. The op's definition has validated the dispatch before a path
// reads it; a path uses these to say what it can run. Errors say what is wrong; callers add the
// dispatch note.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/device.h"
#include "kiln/kernels/activation.h"

namespace kiln::hal::cpu {

class OpReader {
 public:
  OpReader(const DispatchSpec& dispatch, std::span<const ValueSpec> values)
      : dispatch_(dispatch), values_(values) {}

  const DispatchSpec& dispatch() const { return dispatch_; }
  // Every input/output index is -1 or a valid value index; no output is absent.
  Status check_indices() const;

  bool has_input(size_t i) const;
  int32_t input_index(size_t i) const { return dispatch_.inputs[i]; }
  int32_t output_index(size_t i) const { return dispatch_.outputs[i]; }
  const ValueSpec& input(size_t i) const { return values_[dispatch_.inputs[i]]; }
  const ValueSpec& output(size_t i) const { return values_[dispatch_.outputs[i]]; }
  size_t output_count() const { return dispatch_.outputs.size(); }
  // Number of present inputs: trailing absent (-1) inputs do not count.
  size_t input_count() const;

  // Input/output i has dtype `dtype`; the error names it ("input 1 'W' must be f32, got i64").
  Status expect_input_dtype(size_t i, DType dtype) const;
  Status expect_output_dtype(size_t i, DType dtype) const;
  Status expect_input_rank(size_t i, size_t min, size_t max) const;

  // The dispatch's attributes (empty when it has none), for the parsers of its op's definition
  // (kernels/op_attributes.h).
  const Attributes& attributes() const;

 private:
  const DispatchSpec& dispatch_;
  std::span<const ValueSpec> values_;
};

}  // namespace kiln::hal::cpu
