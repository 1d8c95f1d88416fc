// Helpers shared by the gather/scatter kernels (index.cc, scatter.cc): dtype-agnostic element
// moves by element size (visit_element_size, strided_copy.h), reading i32/i64 indices, and index
// errors that name the element.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/strided_copy.h"  // visit_element_size

namespace kiln::kernels {

// Indices of gather/scatter ops.
inline constexpr DType kIndexDtypes[] = {DType::kI32, DType::kI64};

// Element `i` of an i32 or i64 buffer.
inline int64_t load_index(const ConstBuffer& b, int64_t i) {
  return b.dtype == DType::kI32 ? static_cast<int64_t>(b.as<int32_t>()[i]) : b.as<int64_t>()[i];
}

// "[1, 0, 2]": the coordinates of flat row-major index `flat` in `dims`.
std::string coords_of(int64_t flat, std::span<const int64_t> dims);

// `value` (element `flat` of input `index` 'name' with dims `dims`) made non-negative for an
// axis of size `size`: values in [-size, size - 1] are valid. Error otherwise:
// "input 1 'indices' element [0, 2] = 7 is out of range [-3, 2] (axis 0 of size 3)".
StatusOr<int64_t> normalize_index(int64_t value, int64_t size, size_t index, std::string_view name,
                                  int64_t flat, std::span<const int64_t> dims,
                                  std::string_view axis_what);

// For GatherElements and ScatterElements: indices must have data's rank, and each of their dims
// but `axis` must not exceed data's (Unimplemented when a symbol makes that unprovable).
Status check_element_indices(const ValueType& data, const ValueType& indices, int64_t axis);

}  // namespace kiln::kernels
