// The vector code of softmax_kernel.h and silu_kernel.h (which share its exp), written once over
// an ISA's 16-lane vector operations `V` and compiled in softmax_avx2.cc and softmax_avx512.cc
// under their target options. Include only there, inside those options.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <limits>

namespace kiln::hal::cpu::softmax::detail {

// exp(t) for t <= 0 (t = x - max, never NaN here): see softmax_kernel.h.
template <class V>
typename V::R exp_non_positive(typename V::R t) {
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

template <class V>
void softmax_rows(const float* x, float* y, int64_t first, int64_t last, int64_t n) {
  using R = typename V::R;
  constexpr int64_t kWidth = 16;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int64_t full = n / kWidth * kWidth, tail = n - full;
  for (int64_t row = first; row < last; ++row) {
    const float* xr = x + row * n;
    float* yr = y + row * n;
    // The maximum, and whether any element is NaN or +inf.
    R top = V::set1(-kInf);
    typename V::Flags poisoned = V::no_flags();
    for (int64_t i = 0; i < full; i += kWidth) {
      const R v = V::load(xr + i);
      top = V::max(top, v);
      poisoned = V::flag_not_below(poisoned, v, kInf);
    }
    if (tail > 0) {
      const R v = V::load_partial(xr + full, tail, -kInf);
      top = V::max(top, v);
      poisoned = V::flag_not_below(poisoned, v, kInf);
    }
    const float m = V::max_lanes(top);
    if (V::any(poisoned) || m == -kInf) {
      for (int64_t i = 0; i < n; ++i) yr[i] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    // exp(x - m), stored, and summed lane by lane (a tail's missing lanes add +0).
    const R mv = V::set1(m);
    R sum = V::set1(0.0f);
    for (int64_t i = 0; i < full; i += kWidth) {
      const R e = exp_non_positive<V>(V::sub(V::load(xr + i), mv));
      V::store(yr + i, e);
      sum = V::add(sum, e);
    }
    if (tail > 0) {
      const R e = exp_non_positive<V>(V::sub(V::load_partial(xr + full, tail, -kInf), mv));
      V::store_partial(yr + full, tail, e);
      sum = V::add(sum, e);
    }
    const R scale = V::set1(1.0f / V::sum_lanes(sum));
    for (int64_t i = 0; i < full; i += kWidth) V::store(yr + i, V::mul(V::load(yr + i), scale));
    if (tail > 0) {
      V::store_partial(yr + full, tail, V::mul(V::load_partial(yr + full, tail, 0.0f), scale));
    }
  }
}

// SiLU of n floats (silu_kernel.h): x * (num / (1 + e)) with e = exp(-|x|) and num = e where
// x < 0, else 1. A tail shorter than 16 goes through the same lanes (its other lanes hold 0).
template <class V>
typename V::R silu(typename V::R x) {
  using R = typename V::R;
  const R one = V::set1(1.0f);
  const R e = exp_non_positive<V>(V::min(x, V::sub(V::set1(0.0f), x)));
  return V::mul(x, V::div(V::where_negative(x, e, one), V::add(one, e)));
}

template <class V>
void silu_span(const float* x, float* y, int64_t n) {
  constexpr int64_t kWidth = 16;
  const int64_t full = n / kWidth * kWidth, tail = n - full;
  for (int64_t i = 0; i < full; i += kWidth) V::store(y + i, silu<V>(V::load(x + i)));
  if (tail > 0) V::store_partial(y + full, tail, silu<V>(V::load_partial(x + full, tail, 0.0f)));
}

}  // namespace kiln::hal::cpu::softmax::detail
