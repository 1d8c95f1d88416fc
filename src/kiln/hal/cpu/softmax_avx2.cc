// softmax_kernel.h and vector_map_kernels.h on AVX2 + FMA: 16 lanes as two 8-float
// vectors, lanes 0-7 and 8-15.
#include <immintrin.h>

#include <cstdint>

// Every header with inline code but the vector template goes before the target options
// (isa_target.h).
#include "kiln/hal/cpu/isa_target.h"
#include "kiln/hal/cpu/softmax_kernel.h"
#include "kiln/hal/cpu/vector_map_kernels.h"

// Everything below is compiled for AVX2 + FMA, so this file adds no such instruction anywhere
// else; softmax_kernel.cc and vector_map_kernels.cc call it only where the CPU has them.
KILN_ISA_TARGET_BEGIN("avx2,fma")

#include "kiln/hal/cpu/softmax_math.h"

namespace kiln::hal::cpu::softmax::detail {
namespace {

struct Avx2 {
  struct R {
    __m256 lo, hi;
  };
  using Flags = __m256;
  static __m256i lanes(int64_t count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static R load(const float* p) { return R{_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static void store(float* p, R x) {
    _mm256_storeu_ps(p, x.lo);
    _mm256_storeu_ps(p + 8, x.hi);
  }
  // The first `count` (< 16) floats at p; the other lanes hold `fill`.
  static R load_partial(const float* p, int64_t count, float fill) {
    const __m256i lo = lanes(count), hi = lanes(count - 8);
    const __m256 f = _mm256_set1_ps(fill);
    return R{_mm256_blendv_ps(f, _mm256_maskload_ps(p, lo), _mm256_castsi256_ps(lo)),
             _mm256_blendv_ps(f, _mm256_maskload_ps(p + 8, hi), _mm256_castsi256_ps(hi))};
  }
  static void store_partial(float* p, int64_t count, R x) {
    _mm256_maskstore_ps(p, lanes(count), x.lo);
    _mm256_maskstore_ps(p + 8, lanes(count - 8), x.hi);
  }
  static R set1(float x) { return R{_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static R add(R a, R b) { return R{_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static R sub(R a, R b) { return R{_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
  static R mul(R a, R b) { return R{_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static R max(R a, R b) { return R{_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
  static R min(R a, R b) { return R{_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)}; }
  static R div(R a, R b) { return R{_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
  // `then` where x < 0, else `other` (false for NaN and -0).
  static R where_negative(R x, R then, R other) {
    const __m256 zero = _mm256_setzero_ps();
    return R{_mm256_blendv_ps(other.lo, then.lo, _mm256_cmp_ps(x.lo, zero, _CMP_LT_OQ)),
             _mm256_blendv_ps(other.hi, then.hi, _mm256_cmp_ps(x.hi, zero, _CMP_LT_OQ))};
  }
  // `then` where x >= limit, else `other` (NaN: other).
  static R where_not_below(R x, float limit, R then, R other) {
    const __m256 l = _mm256_set1_ps(limit);
    return R{_mm256_blendv_ps(other.lo, then.lo, _mm256_cmp_ps(x.lo, l, _CMP_GE_OQ)),
             _mm256_blendv_ps(other.hi, then.hi, _mm256_cmp_ps(x.hi, l, _CMP_GE_OQ))};
  }
  static R fmadd(R a, R b, R c) {
    return R{_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
  }
  static R round(R x) {
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    return R{_mm256_round_ps(x.lo, kNearest), _mm256_round_ps(x.hi, kNearest)};
  }
  // 2^n for integral n in [-126, 0].
  static __m256 pow2(__m256 n) {
    const __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_castsi256_ps(bits);
  }
  static R pow2(R n) { return R{pow2(n.lo), pow2(n.hi)}; }
  // 0 where t < limit, else x.
  static R zero_below(R t, float limit, R x) {
    const __m256 l = _mm256_set1_ps(limit);
    return R{_mm256_and_ps(_mm256_cmp_ps(t.lo, l, _CMP_GE_OQ), x.lo),
             _mm256_and_ps(_mm256_cmp_ps(t.hi, l, _CMP_GE_OQ), x.hi)};
  }
  static Flags no_flags() { return _mm256_setzero_ps(); }
  // `flags` plus the lanes where !(v < limit): NaN, or at least `limit`.
  static Flags flag_not_below(Flags flags, R v, float limit) {
    const __m256 l = _mm256_set1_ps(limit);
    return _mm256_or_ps(flags, _mm256_or_ps(_mm256_cmp_ps(v.lo, l, _CMP_NLT_UQ),
                                            _mm256_cmp_ps(v.hi, l, _CMP_NLT_UQ)));
  }
  static bool any(Flags flags) { return _mm256_movemask_ps(flags) != 0; }
  static float max_lanes(R v) { return detail::max_lanes(v.lo, v.hi); }
  static float sum_lanes(R v) { return detail::sum_lanes(v.lo, v.hi); }
};

}  // namespace

void rows_avx2(const float* x, float* y, int64_t first, int64_t last, int64_t n) {
  softmax_rows<Avx2, 2>(x, y, first, last, n);
}

}  // namespace kiln::hal::cpu::softmax::detail

namespace kiln::hal::cpu::vector_map::detail {

void apply_avx2(Function f, const float* x, float* y, int64_t n) {
  softmax::detail::map_function<softmax::detail::Avx2>(f, x, y, n);
}

}  // namespace kiln::hal::cpu::vector_map::detail

KILN_ISA_TARGET_END()
