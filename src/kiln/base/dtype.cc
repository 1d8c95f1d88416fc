#include "kiln/base/dtype.h"

namespace kiln {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64:
    case DType::kU64: return 8;
    case DType::kF32:
    case DType::kI32:
    case DType::kU32: return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16:
    case DType::kU16: return 2;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kI64: return "i64";
    case DType::kI32: return "i32";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kBool: return "bool";
    case DType::kI16: return "i16";
    case DType::kU16: return "u16";
    case DType::kU32: return "u32";
    case DType::kU64: return "u64";
    case DType::kBF16: return "bf16";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (int code = 1; code <= kLastDTypeCode; ++code) {
    auto dtype = static_cast<DType>(code);
    if (dtype_name(dtype) == name) return dtype;
  }
  return std::nullopt;
}

bool is_valid_dtype_code(int code) { return code >= 1 && code <= kLastDTypeCode; }

bool is_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 ||
         dtype == DType::kBF16;
}

bool is_integer(DType dtype) { return !is_float(dtype) && dtype != DType::kBool; }

bool is_unsigned(DType dtype) {
  return dtype == DType::kU8 || dtype == DType::kU16 || dtype == DType::kU32 ||
         dtype == DType::kU64;
}

}  // namespace kiln
