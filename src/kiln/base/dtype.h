// Element types kiln knows, with their byte sizes and names ("f32", "i64", ...), as used in the IR
// text form, the module file and `--input` specs.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint8_t {
  kF32 = 1,
  kF64 = 2,
  kF16 = 3,
  kI64 = 4,
  kI32 = 5,
  kI8 = 6,
  kU8 = 7,
  kBool = 8,
};

// Bytes per element.
size_t dtype_size(DType dtype);
// Short name: "f32", "f64", "f16", "i64", "i32", "i8", "u8", "bool".
std::string_view dtype_name(DType dtype);
// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> parse_dtype(std::string_view name);
// True for a value that is a valid DType enumerator (for untrusted numeric codes).
bool is_valid_dtype_code(int code);

}  // namespace kiln
