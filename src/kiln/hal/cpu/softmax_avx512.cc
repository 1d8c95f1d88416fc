// softmax_kernel.h and vector_map_kernels.h on AVX-512: one 16-float vector.
#include <immintrin.h>

#include <cstdint>

// Every header with inline code but the vector template goes before the target options
// (isa_target.h).
#include "kiln/hal/cpu/isa_target.h"
#include "kiln/hal/cpu/softmax_kernel.h"
#include "kiln/hal/cpu/vector_map_kernels.h"

// Everything below is compiled for AVX-512, so this file adds no such instruction anywhere
// else; softmax_kernel.cc and vector_map_kernels.cc call it only where the CPU has AVX-512F.
KILN_ISA_TARGET_BEGIN("avx512f,avx2,fma")

#include "kiln/hal/cpu/softmax_math.h"

namespace kiln::hal::cpu::softmax::detail {
namespace {

struct Avx512 {
  using R = __m512;
  using Flags = __mmask16;
  static __mmask16 lanes(int64_t count) { return static_cast<__mmask16>((1u << count) - 1u); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R x) { _mm512_storeu_ps(p, x); }
  // The first `count` (< 16) floats at p; the other lanes hold `fill`.
  static R load_partial(const float* p, int64_t count, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), lanes(count), p);
  }
  static void store_partial(float* p, int64_t count, R x) {
    _mm512_mask_storeu_ps(p, lanes(count), x);
  }
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  // The zero-masking forms with every lane set: GCC 12's plain forms read an undefined register
  // (-Wmaybe-uninitialized, GCC bug 105593).
  static constexpr __mmask16 kAll = 0xFFFF;
  static R max(R a, R b) { return _mm512_maskz_max_ps(kAll, a, b); }
  static R min(R a, R b) { return _mm512_maskz_min_ps(kAll, a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  // `then` where x < 0, else `other` (false for NaN and -0).
  static R where_negative(R x, R then, R other) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, set1(0.0f), _CMP_LT_OQ), other, then);
  }
  // `then` where x >= limit, else `other` (NaN: other).
  static R where_not_below(R x, float limit, R then, R other) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, set1(limit), _CMP_GE_OQ), other, then);
  }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R round(R x) { return _mm512_maskz_roundscale_ps(kAll, x, _MM_FROUND_TO_NEAREST_INT); }
  // 2^n for integral n in [-126, 0].
  static R pow2(R n) {
    const __m512i biased =
        _mm512_add_epi32(_mm512_maskz_cvtps_epi32(kAll, n), _mm512_set1_epi32(127));
    const __m512i bits = _mm512_maskz_slli_epi32(kAll, biased, 23);
    return _mm512_castsi512_ps(bits);
  }
  // 0 where t < limit, else x.
  static R zero_below(R t, float limit, R x) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(t, set1(limit), _CMP_GE_OQ), x);
  }
  static Flags no_flags() { return 0; }
  // `flags` plus the lanes where !(v < limit): NaN, or at least `limit`.
  static Flags flag_not_below(Flags flags, R v, float limit) {
    return flags | _mm512_cmp_ps_mask(v, set1(limit), _CMP_NLT_UQ);
  }
  static bool any(Flags flags) { return flags != 0; }
  // Lanes 0-7 and 8-15, in registers (zero-masking forms, as above). Through memory, a 64-byte
  // store read back as two 32-byte loads, it stalled twice a row on the row's critical path.
  static void halves(R v, __m256& lo, __m256& hi) {
    lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 0));
    hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 1));
  }
  static float max_lanes(R v) {
    __m256 lo, hi;
    halves(v, lo, hi);
    return detail::max_lanes(lo, hi);
  }
  static float sum_lanes(R v) {
    __m256 lo, hi;
    halves(v, lo, hi);
    return detail::sum_lanes(lo, hi);
  }
};

}  // namespace

void rows_avx512(const float* x, float* y, int64_t first, int64_t last, int64_t n) {
  softmax_rows<Avx512, 4>(x, y, first, last, n);
}

}  // namespace kiln::hal::cpu::softmax::detail

namespace kiln::hal::cpu::vector_map::detail {

void apply_avx512(Function f, const float* x, float* y, int64_t n) {
  softmax::detail::map_function<softmax::detail::Avx512>(f, x, y, n);
}

}  // namespace kiln::hal::cpu::vector_map::detail

KILN_ISA_TARGET_END()
