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
  // Present inputs: indices 0..count-1 with trailing absent (-1) inputs ignored. Errors name the
  // expected range.
  Status expect_inputs(size_t min, size_t max) const;
  Status expect_outputs(size_t min, size_t max) const;
  // Rejects attributes not in `known` (an ignored attribute could change the result).
  Status expect_attributes(std::initializer_list<std::string_view> known) const;

  bool has_input(size_t i) const;
  int32_t input_index(size_t i) const { return dispatch_.inputs[i]; }
  int32_t output_index(size_t i) const { return dispatch_.outputs[i]; }
  const ValueSpec& input(size_t i) const { return values_[dispatch_.inputs[i]]; }
  const ValueSpec& output(size_t i) const { return values_[dispatch_.outputs[i]]; }
  size_t output_count() const { return dispatch_.outputs.size(); }
  // Number of present inputs counted as in expect_inputs.
  size_t input_count() const;

  // Input/output i has dtype `dtype`; the error names it ("input 1 'W' must be f32, got i64").
  Status expect_input_dtype(size_t i, DType dtype) const;
  Status expect_output_dtype(size_t i, DType dtype) const;
  Status expect_input_rank(size_t i, size_t min, size_t max) const;

  // The dispatch's attributes (empty when it has none).
  const Attributes& attributes() const;
  // Attribute getters with ONNX defaults when absent (also when the dispatch has none).
  StatusOr<int64_t> get_int(const std::string& name, int64_t fallback) const;
  StatusOr<double> get_float(const std::string& name, double fallback) const;
  StatusOr<std::string> get_string(const std::string& name, std::string fallback) const;
  StatusOr<std::vector<int64_t>> get_ints(const std::string& name,
                                          std::vector<int64_t> fallback) const;
  // kiln's fused activation (kernels/activation.h), checked.
  StatusOr<kernels::FusedActivation> fused_activation() const;
  // For ops that fuse only ReLU: true for "relu", false for none, Unimplemented for the others.
  StatusOr<bool> relu_activation() const;

 private:
  const DispatchSpec& dispatch_;
  std::span<const ValueSpec> values_;
};

}  // namespace kiln::hal::cpu
