// Element conversions between kernel compute types (dtype_dispatch.h) with every case defined:
// Cast, and ops whose result is computed in another type (Pow of an integer base). Rules:
//   - float to integer truncates toward zero, saturates out-of-range values to the integer's
//     range, and gives 0 for NaN (C leaves these undefined; numpy's result is platform-dependent);
//   - integer to integer wraps (two's complement, as numpy's astype);
//   - anything to bool is `value != 0` (NaN is true, as numpy); bool to a number is 0 or 1;
//   - to f16/bf16 storage: see to_half_value / to_bfloat16_bits.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kiln/kernels/dtype_dispatch.h"

namespace kiln::kernels {

// Float (float or double) to integer I, with the rules above.
template <typename I, typename F>
I float_to_int(F x) {
  static_assert(std::is_integral_v<I> && std::is_floating_point_v<F>);
  if (std::isnan(x)) return 0;
  // (F)max may round up to 2^bits; any x at or above it saturates, anything below converts.
  constexpr F lo = static_cast<F>(std::numeric_limits<I>::lowest());
  constexpr F hi = static_cast<F>(std::numeric_limits<I>::max());
  if (x <= lo) return std::numeric_limits<I>::lowest();
  if (x >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

// A double rounded to float so that a later rounding to f16 is correctly rounded: round to odd
// (truncate, then set the lowest bit when inexact) keeps the information that the value was
// not exactly halfway, avoiding double rounding.
inline float double_to_float_round_to_odd(double x) {
  float f = static_cast<float>(x);
  if (!std::isfinite(x) || static_cast<double>(f) == x) return f;
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) --bits;  // step toward zero
  return std::bit_cast<float>(bits | 1u);
}

// The compute value of destination storage type D for source compute value v.
template <typename D, typename S>
compute_t<D> convert_value(S v) {
  using C = compute_t<D>;
  if constexpr (std::is_same_v<C, bool>) {
    return v != S(0);
  } else if constexpr (std::is_same_v<S, bool>) {
    return static_cast<C>(v ? 1 : 0);
  } else if constexpr (std::is_integral_v<C> && std::is_floating_point_v<S>) {
    return float_to_int<C>(v);
  } else if constexpr (std::is_same_v<D, Half> && std::is_same_v<S, double>) {
    return double_to_float_round_to_odd(v);
  } else {
    return static_cast<C>(v);  // int to int wraps (C++20); int/float to float rounds
  }
}

}  // namespace kiln::kernels
