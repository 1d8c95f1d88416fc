// Calling a template with the C++ element type of a DType. f16 and bf16 are distinct storage
// types (Half, BFloat16) that kernels load into float and store back with rounding; bool is
// stored as one byte (Bool).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kiln/base/dtype.h"
#include "kiln/base/half.h"

namespace kiln::kernels {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
struct Bool {
  uint8_t value;
};

// The type a kernel computes in for storage type T: float for f16/bf16, bool for Bool, T else.
template <typename T>
struct ComputeOf {
  using type = T;
};
template <>
struct ComputeOf<Half> {
  using type = float;
};
template <>
struct ComputeOf<BFloat16> {
  using type = float;
};
template <>
struct ComputeOf<Bool> {
  using type = bool;
};
template <typename T>
using compute_t = typename ComputeOf<T>::type;

template <typename T>
inline compute_t<T> load(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, Half>) {
    return half_bits_to_float(p[i].bits);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return bfloat16_bits_to_float(p[i].bits);
  } else if constexpr (std::is_same_v<T, Bool>) {
    return p[i].value != 0;
  } else {
    return p[i];
  }
}

template <typename T>
inline void store(T* p, int64_t i, compute_t<T> v) {
  if constexpr (std::is_same_v<T, Half>) {
    p[i].bits = float_to_half_bits(v);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    p[i].bits = float_to_bfloat16_bits(v);
  } else if constexpr (std::is_same_v<T, Bool>) {
    p[i].value = v ? 1 : 0;
  } else {
    p[i] = v;
  }
}

template <typename T>
inline constexpr bool is_float_storage_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Calls f.template operator()<T>() with T the storage type of `dtype`, returning its result.
template <typename F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f.template operator()<float>();
    case DType::kF64: return f.template operator()<double>();
    case DType::kF16: return f.template operator()<Half>();
    case DType::kBF16: return f.template operator()<BFloat16>();
    case DType::kI64: return f.template operator()<int64_t>();
    case DType::kI32: return f.template operator()<int32_t>();
    case DType::kI16: return f.template operator()<int16_t>();
    case DType::kI8: return f.template operator()<int8_t>();
    case DType::kU64: return f.template operator()<uint64_t>();
    case DType::kU32: return f.template operator()<uint32_t>();
    case DType::kU16: return f.template operator()<uint16_t>();
    case DType::kU8: return f.template operator()<uint8_t>();
    case DType::kBool: return f.template operator()<Bool>();
  }
  return f.template operator()<float>();
}

}  // namespace kiln::kernels
