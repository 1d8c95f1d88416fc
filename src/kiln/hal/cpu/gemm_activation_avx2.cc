// gemm_activation.h on AVX2 + FMA: 8-float vectors.
#include <immintrin.h>

#include <cstdint>

// Every header with inline code but the vector template goes before the target options
// (isa_target.h).
#include "kiln/hal/cpu/gemm_activation.h"
#include "kiln/hal/cpu/isa_target.h"

// Everything below is compiled for AVX2 + FMA, so this file adds no such instruction anywhere
// else; gemm_kernel.cc calls it only where the CPU has them.
KILN_ISA_TARGET_BEGIN("avx2,fma")

#include "kiln/hal/cpu/gemm_activation_math.h"

namespace kiln::hal::cpu::gemm::detail {
namespace {

struct Avx2 {
  using R = __m256;
  using Mask = __m256i;
  static constexpr int64_t kWidth = 8;
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R x) { _mm256_storeu_ps(p, x); }
  static Mask mask(int64_t count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static R load_partial(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void store_partial(float* p, Mask m, R x) { _mm256_maskstore_ps(p, m, x); }
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  // `then` where x >= limit (x <= limit), else `other`; false for NaN.
  static R where_at_least(R x, float limit, R then, R other) {
    return _mm256_blendv_ps(other, then, _mm256_cmp_ps(x, set1(limit), _CMP_GE_OQ));
  }
  static R where_at_most(R x, float limit, R then, R other) {
    return _mm256_blendv_ps(other, then, _mm256_cmp_ps(x, set1(limit), _CMP_LE_OQ));
  }
};

}  // namespace

void activate_avx2(Activation activation, float* y, int64_t ldy, int64_t rows, int64_t cols) {
  activate_rows<Avx2>(activation, y, ldy, rows, cols);
}

}  // namespace kiln::hal::cpu::gemm::detail

KILN_ISA_TARGET_END()
