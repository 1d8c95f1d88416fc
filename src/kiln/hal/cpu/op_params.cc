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

const Attributes& OpReader::attributes() const {
  return dispatch_.attributes ? *dispatch_.attributes : empty_attributes();
}

}  // namespace kiln::hal::cpu
