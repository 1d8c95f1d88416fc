// gemm_activation.h on AVX-512: 16-float vectors.
#include <immintrin.h>

#include <cstdint>

// Every header with inline code but the vector template goes before the target options
// (isa_target.h).
#include "kiln/hal/cpu/gemm_activation.h"
#include "kiln/hal/cpu/isa_target.h"

// Everything below is compiled for AVX-512, so this file adds no such instruction anywhere
// else; gemm_kernel.cc calls it only where the CPU has AVX-512F.
KILN_ISA_TARGET_BEGIN("avx512f,avx2,fma")

#include "kiln/hal/cpu/gemm_activation_math.h"

namespace kiln::hal::cpu::gemm::detail {
namespace {

struct Avx512 {
  using R = __m512;
  using Mask = __mmask16;
  static constexpr int64_t kWidth = 16;
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R x) { _mm512_storeu_ps(p, x); }
  static Mask mask(int64_t count) { return static_cast<Mask>((1u << count) - 1u); }
  static R load_partial(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store_partial(float* p, Mask m, R x) { _mm512_mask_storeu_ps(p, m, x); }
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  // (The masked form with every lane set: GCC 12's plain _mm512_max_ps trips
  // -Wmaybe-uninitialized on its undefined pass-through operand.)
  static R max(R a, R b) { return _mm512_maskz_max_ps(0xffff, a, b); }
  // `then` where x >= limit (x <= limit), else `other`; false for NaN.
  static R where_at_least(R x, float limit, R then, R other) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, set1(limit), _CMP_GE_OQ), other, then);
  }
  static R where_at_most(R x, float limit, R then, R other) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, set1(limit), _CMP_LE_OQ), other, then);
  }
};

}  // namespace

void activate_avx512(Activation activation, float* y, int64_t ldy, int64_t rows, int64_t cols) {
  activate_rows<Avx512>(activation, y, ldy, rows, cols);
}

}  // namespace kiln::hal::cpu::gemm::detail

KILN_ISA_TARGET_END()
