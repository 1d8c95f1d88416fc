#include "kiln/hal/cpu/op_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace kiln::hal::cpu {
namespace {

const Attributes& empty_attributes() {
  static const Attributes empty;
  return empty;
}

std::string name_of(const ValueSpec& v) { return v.name; }

}  // namespace

Status OpReader::check_indices() const {
  const auto n = static_cast<int32_t>(values_.size());
  for (size_t i = 0; i < dispatch_.inputs.size(); ++i) {
    const int32_t v = dispatch_.inputs[i];
    if (v < -1 || v >= n) {
      return invalid_argument("input {} refers to value {}, but the program has {} values", i, v,
                              n);
    }
  }
  for (size_t i = 0; i < dispatch_.outputs.size(); ++i) {
    const int32_t v = dispatch_.outputs[i];
    if (v < 0 || v >= n) {
      return invalid_argument("output {} refers to value {}, but the program has {} values", i, v,
                              n);
    }
  }
  return ok_status();
}

size_t OpReader::input_count() const {
  size_t count = dispatch_.inputs.size();
  while (count > 0 && dispatch_.inputs[count - 1] < 0) --count;
  return count;
}

bool OpReader::has_input(size_t i) const {
  return i < dispatch_.inputs.size() && dispatch_.inputs[i] >= 0;
}

Status OpReader::expect_inputs(size_t min, size_t max) const {
  const size_t count = input_count();
  if (count < min || count > max) {
    if (min == max) return invalid_argument("expects {} inputs, got {}", min, count);
    return invalid_argument("expects {} to {} inputs, got {}", min, max, count);
  }
  for (size_t i = 0; i < min; ++i) {
    if (!has_input(i)) return invalid_argument("required input {} is absent", i);
  }
  return ok_status();
}

Status OpReader::expect_outputs(size_t min, size_t max) const {
  const size_t count = dispatch_.outputs.size();
  if (count < min || count > max) {
    if (min == max) return invalid_argument("expects {} outputs, got {}", min, count);
    return invalid_argument("expects {} to {} outputs, got {}", min, max, count);
  }
  return ok_status();
}

Status OpReader::expect_attributes(std::initializer_list<std::string_view> known) const {
  if (dispatch_.attributes == nullptr) return ok_status();
  for (const auto& [name, value] : dispatch_.attributes->all()) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return unimplemented("attribute '{}' is not supported", name);
    }
  }
  return ok_status();
}

Status OpReader::expect_input_dtype(size_t i, DType dtype) const {
  const ValueSpec& v = input(i);
  if (v.dtype != dtype) {
    return unimplemented("input {} '{}' must be {}, got {}", i, name_of(v), dtype_name(dtype),
                         dtype_name(v.dtype));
  }
  return ok_status();
}

Status OpReader::expect_output_dtype(size_t i, DType dtype) const {
  const ValueSpec& v = output(i);
  if (v.dtype != dtype) {
    return unimplemented("output {} '{}' must be {}, got {}", i, name_of(v), dtype_name(dtype),
                         dtype_name(v.dtype));
  }
  return ok_status();
}

Status OpReader::expect_input_rank(size_t i, size_t min, size_t max) const {
  const size_t rank = input(i).shape.size();
  if (rank < min || rank > max) {
    if (min == max) {
      return invalid_argument("input {} '{}' must have rank {}, got {}", i, input(i).name, min,
                              rank);
    }
    return unimplemented("input {} '{}' must have rank {} to {}, got {}", i, input(i).name, min,
                         max, rank);
  }
  return ok_status();
}

StatusOr<int64_t> OpReader::get_int(const std::string& name, int64_t fallback) const {
  const Attributes& a = dispatch_.attributes ? *dispatch_.attributes : empty_attributes();
  return a.get_int(name, fallback);
}
StatusOr<double> OpReader::get_float(const std::string& name, double fallback) const {
  const Attributes& a = dispatch_.attributes ? *dispatch_.attributes : empty_attributes();
  return a.get_float(name, fallback);
}
StatusOr<std::string> OpReader::get_string(const std::string& name, std::string fallback) const {
  const Attributes& a = dispatch_.attributes ? *dispatch_.attributes : empty_attributes();
  return a.get_string(name, std::move(fallback));
}
StatusOr<std::vector<int64_t>> OpReader::get_ints(const std::string& name,
                                                  std::vector<int64_t> fallback) const {
  const Attributes& a = dispatch_.attributes ? *dispatch_.attributes : empty_attributes();
  return a.get_ints(name, std::move(fallback));
}

const Attributes& OpReader::attributes() const {
  return dispatch_.attributes ? *dispatch_.attributes : empty_attributes();
}

StatusOr<kernels::FusedActivation> OpReader::fused_activation() const {
  return kernels::read_fused_activation(dispatch_.attributes ? *dispatch_.attributes
                                                             : empty_attributes());
}

StatusOr<bool> OpReader::relu_activation() const {
  return kernels::read_fused_relu(dispatch_.attributes ? *dispatch_.attributes
                                                       : empty_attributes());
}

}  // namespace kiln::hal::cpu
