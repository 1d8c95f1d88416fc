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
  kI16 = 9,
  kU16 = 10,
  kU32 = 11,
  kU64 = 12,
  kBF16 = 13,
};

// Codes are stable (the module file stores them); the last one is kLastDType.
inline constexpr int kLastDTypeCode = 13;

// Bytes per element.
size_t dtype_size(DType dtype);
// Short name: "f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8",
// "bool".
std::string_view dtype_name(DType dtype);
// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> parse_dtype(std::string_view name);
// True for a value that is a valid DType enumerator (for untrusted numeric codes).
bool is_valid_dtype_code(int code);
// f16, bf16, f32, f64.
bool is_float(DType dtype);
// Signed and unsigned integers (not bool).
bool is_integer(DType dtype);
bool is_unsigned(DType dtype);

}  // namespace kiln
