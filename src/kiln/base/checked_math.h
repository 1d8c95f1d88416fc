// Overflow-checked integer arithmetic for sizes computed from untrusted dims.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace kiln {

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// Product of non-negative dims; nullopt on a negative dim or overflow.
inline std::optional<int64_t> checked_product(std::span<const int64_t> dims) {
  int64_t out = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    auto next = checked_mul(out, d);
    if (!next) return std::nullopt;
    out = *next;
  }
  return out;
}

}  // namespace kiln
