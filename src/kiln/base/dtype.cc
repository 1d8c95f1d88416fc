#include "kiln/base/dtype.h"

namespace kiln {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64: return 8;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF16: return 2;
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
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (int code = 1; code <= 8; ++code) {
    auto dtype = static_cast<DType>(code);
    if (dtype_name(dtype) == name) return dtype;
  }
  return std::nullopt;
}

bool is_valid_dtype_code(int code) { return code >= 1 && code <= 8; }

}  // namespace kiln
