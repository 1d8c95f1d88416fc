// The vector code of softmax_kernel.h and vector_map_kernels.h (which share its exp),
// written once over an ISA's 16-lane vector operations `V` and compiled in softmax_avx2.cc and
// softmax_avx512.cc under their target options. Include only there, inside those options.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <limits>

#include "kiln/hal/cpu/vector_map_kernels.h"

namespace kiln::hal::cpu::softmax::detail {

// exp(t) for t <= 0 (t = x - max, never NaN here): see softmax_kernel.h. Always inlined: as a
// call, AVX2's two-vector R goes through the stack (2.4x slower rows).
template <class V>
[[gnu::always_inline]] inline typename V::R exp_non_positive(typename V::R t) {
  using R = typename V::R;
  constexpr float kLowest = -87.33654f;  // ln(2^-126)
  const R tc = V::max(t, V::set1(kLowest));
  const R n = V::round(V::mul(tc, V::set1(1.44269504088896341f)));
  R r = V::fmadd(n, V::set1(-0.693359375f), tc);
  r = V::fmadd(n, V::set1(2.12194440e-4f), r);
  const R z = V::mul(r, r);
  R p = V::set1(1.9875691500e-4f);
  p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
  p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
  p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
  p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
  p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
  R e = V::add(V::fmadd(p, z, r), V::set1(1.0f));
  e = V::mul(e, V::pow2(n));
  return V::zero_below(t, kLowest, e);
}

// The 16 lanes (lo: 0-7, hi: 8-15) added pairwise: lane l with l + 8, then l + 4, l + 2, l + 1.
// Static: each ISA's file keeps its own copy, compiled for that ISA.
static inline float sum_lanes(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The largest of the 16 lanes (exact in any order; no NaN reaches it that matters).
static inline float max_lanes(__m256 lo, __m256 hi) {
  const __m256 m8 = _mm256_max_ps(lo, hi);
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
}

// G rows from x into y (row g at x + g * n, y + g * n), each step of the definition done for the
// G rows side by side: a row of attention's 128-197 floats is too short for the core to overlap
// its steps (maximum, exp and sum, scale), each waiting on the one before through a horizontal
// reduction, and rows side by side give it independent work. Each row goes through exactly the
// operations it would alone, so its bits do not depend on G or on its neighbours.
template <class V, int G>
void softmax_row_group(const float* x, float* y, int64_t n) {
  using R = typename V::R;
  constexpr int64_t kWidth = 16;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int64_t full = n / kWidth * kWidth, tail = n - full;
  // The maxima, and whether any element is NaN or +inf. A single row runs four maxima, so that it
  // is not one chain of dependent maxima; the maximum of finite values is exact in any order (and
  // where it is a zero, its sign changes no x - m).
  constexpr int kChains = G == 1 ? 4 : 1;
  R top[G][kChains];
  typename V::Flags poisoned[G];
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < kChains; ++c) top[g][c] = V::set1(-kInf);
    poisoned[g] = V::no_flags();
  }
  int64_t i = 0;
  for (; i + kChains * kWidth <= full; i += kChains * kWidth) {
    for (int c = 0; c < kChains; ++c) {
      for (int g = 0; g < G; ++g) {
        const R v = V::load(x + g * n + i + c * kWidth);
        top[g][c] = V::max(top[g][c], v);
        poisoned[g] = V::flag_not_below(poisoned[g], v, kInf);
      }
    }
  }
  for (; i < full; i += kWidth) {
    for (int g = 0; g < G; ++g) {
      const R v = V::load(x + g * n + i);
      top[g][0] = V::max(top[g][0], v);
      poisoned[g] = V::flag_not_below(poisoned[g], v, kInf);
    }
  }
  if (tail > 0) {
    for (int g = 0; g < G; ++g) {
      const R v = V::load_partial(x + g * n + full, tail, -kInf);
      top[g][0] = V::max(top[g][0], v);
      poisoned[g] = V::flag_not_below(poisoned[g], v, kInf);
    }
  }
  // exp(x - m), stored, and summed lane by lane (a tail's missing lanes add +0). A row that holds
  // NaN or +inf, or only -inf, goes through too (its values are then overwritten).
  R mv[G], sum[G];
  bool nan_row[G];
  for (int g = 0; g < G; ++g) {
    R m = top[g][0];
    for (int c = 1; c < kChains; ++c) m = V::max(m, top[g][c]);
    const float mg = V::max_lanes(m);
    nan_row[g] = V::any(poisoned[g]) || mg == -kInf;
    mv[g] = V::set1(mg);
    sum[g] = V::set1(0.0f);
  }
  for (i = 0; i < full; i += kWidth) {
    for (int g = 0; g < G; ++g) {
      const R e = exp_non_positive<V>(V::sub(V::load(x + g * n + i), mv[g]));
      V::store(y + g * n + i, e);
      sum[g] = V::add(sum[g], e);
    }
  }
  if (tail > 0) {
    for (int g = 0; g < G; ++g) {
      const R e =
          exp_non_positive<V>(V::sub(V::load_partial(x + g * n + full, tail, -kInf), mv[g]));
      V::store_partial(y + g * n + full, tail, e);
      sum[g] = V::add(sum[g], e);
    }
  }
  for (int g = 0; g < G; ++g) {
    float* yr = y + g * n;
    if (nan_row[g]) {
      for (int64_t j = 0; j < n; ++j) yr[j] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const R scale = V::set1(1.0f / V::sum_lanes(sum[g]));
    for (int64_t j = 0; j < full; j += kWidth) V::store(yr + j, V::mul(V::load(yr + j), scale));
    if (tail > 0) {
      V::store_partial(yr + full, tail, V::mul(V::load_partial(yr + full, tail, 0.0f), scale));
    }
  }
}

// Rows [first, last) of n floats, kGroup at a time, then one at a time.
template <class V, int kGroup>
void softmax_rows(const float* x, float* y, int64_t first, int64_t last, int64_t n) {
  int64_t row = first;
  for (; row + kGroup <= last; row += kGroup) {
    softmax_row_group<V, kGroup>(x + row * n, y + row * n, n);
  }
  for (; row < last; ++row) softmax_row_group<V, 1>(x + row * n, y + row * n, n);
}

// log(1 + e) for e in [0, 1] (vector_map_kernels.h): Cephes' logf polynomial of x = e below
// sqrt(2) - 1, else of x = (1 + e) / 2 - 1 = (e - 1) / 2, with k ln 2 added in two parts (k = 1
// there, else 0).
template <class V>
[[gnu::always_inline]] inline typename V::R log1p_unit(typename V::R e) {
  using R = typename V::R;
  const R half = V::set1(0.5f);
  const R x = V::where_not_below(e, 0.41421356f, V::fmadd(e, half, V::set1(-0.5f)), e);
  const R k = V::where_not_below(e, 0.41421356f, V::set1(1.0f), V::set1(0.0f));
  const R z = V::mul(x, x);
  R p = V::set1(7.0376836292e-2f);
  p = V::fmadd(p, x, V::set1(-1.1514610310e-1f));
  p = V::fmadd(p, x, V::set1(1.1676998740e-1f));
  p = V::fmadd(p, x, V::set1(-1.2420140846e-1f));
  p = V::fmadd(p, x, V::set1(1.4249322787e-1f));
  p = V::fmadd(p, x, V::set1(-1.6668057665e-1f));
  p = V::fmadd(p, x, V::set1(2.0000714765e-1f));
  p = V::fmadd(p, x, V::set1(-2.4999993993e-1f));
  p = V::fmadd(p, x, V::set1(3.3333331174e-1f));
  R y = V::mul(V::mul(p, x), z);
  y = V::fmadd(k, V::set1(-2.12194440e-4f), y);
  y = V::fmadd(z, V::set1(-0.5f), y);
  return V::fmadd(k, V::set1(0.693359375f), V::add(x, y));
}

// Softplus of one vector: max(x, 0) + log1p(exp(-|x|)). x86's max returns its second operand
// where either is NaN, so max(0, x) keeps a NaN.
template <class V>
typename V::R softplus(typename V::R x) {
  using R = typename V::R;
  const R zero = V::set1(0.0f);
  const R negative_abs = V::min(x, V::sub(zero, x));
  const R e = exp_non_positive<V>(negative_abs);
  return V::add(V::max(zero, x), log1p_unit<V>(e));
}

// SiLU of one vector (vector_map_kernels.h): x * (num / (1 + e)) with e = exp(-|x|) and num = e
// where x < 0, else 1.
template <class V>
typename V::R silu(typename V::R x) {
  using R = typename V::R;
  const R one = V::set1(1.0f);
  const R e = exp_non_positive<V>(V::min(x, V::sub(V::set1(0.0f), x)));
  return V::mul(x, V::div(V::where_negative(x, e, one), V::add(one, e)));
}

// Mish of one vector (vector_map_kernels.h): x * (num / (num + d)) with e = exp(-|x|), num =
// 1 + 2e and d = 2e^2 where x >= 0, num = e(2 + e) and d = 2 where x < 0.
template <class V>
typename V::R mish(typename V::R x) {
  using R = typename V::R;
  const R one = V::set1(1.0f), two = V::set1(2.0f);
  const R e = exp_non_positive<V>(V::min(x, V::sub(V::set1(0.0f), x)));
  const R two_e = V::add(e, e);
  const R num = V::where_negative(x, V::mul(e, V::add(two, e)), V::add(one, two_e));
  const R d = V::where_negative(x, two, V::mul(two_e, e));
  return V::mul(x, V::div(num, V::add(num, d)));
}

// f applied to n floats, 16 at a time; a tail shorter than 16 goes through the same lanes (its
// other lanes hold 0), so an element's bits do not depend on where it falls.
template <class V, typename V::R (*F)(typename V::R)>
void map_span(const float* x, float* y, int64_t n) {
  constexpr int64_t kWidth = 16;
  const int64_t full = n / kWidth * kWidth, tail = n - full;
  for (int64_t i = 0; i < full; i += kWidth) V::store(y + i, F(V::load(x + i)));
  if (tail > 0) V::store_partial(y + full, tail, F(V::load_partial(x + full, tail, 0.0f)));
}

// vector_map::apply's body on one ISA.
template <class V>
void map_function(vector_map::Function f, const float* x, float* y, int64_t n) {
  switch (f) {
    case vector_map::Function::kSilu: return map_span<V, silu<V>>(x, y, n);
    case vector_map::Function::kSoftplus: return map_span<V, softplus<V>>(x, y, n);
    case vector_map::Function::kMish: return map_span<V, mish<V>>(x, y, n);
  }
}

}  // namespace kiln::hal::cpu::softmax::detail
