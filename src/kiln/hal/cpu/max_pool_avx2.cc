// max_pool_step.h on AVX2: 8-float vectors (a lane's max does not depend on the width).
#include <immintrin.h>

#include <cstdint>

// Every header with inline code but the vector template goes before the target options
// (isa_target.h).
#include "kiln/hal/cpu/isa_target.h"
#include "kiln/hal/cpu/max_pool_step.h"

// Everything below is compiled for AVX2 + FMA, so this file adds no such instruction anywhere
// else; max_pool_step.cc calls it only where the CPU has them.
KILN_ISA_TARGET_BEGIN("avx2,fma")

#include "kiln/hal/cpu/max_pool_math.h"

namespace kiln::hal::cpu::detail {
namespace {

struct Avx2 {
  using R = __m256;
  using Flags = __m256;  // all ones in a flagged lane
  using Tail = __m256i;
  static constexpr int64_t kWidth = 8;
  static Tail tail(int64_t count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static R load(const float* p, Tail t) { return _mm256_maskload_ps(p, t); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, R v, Tail t) { _mm256_maskstore_ps(p, t, v); }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static Flags none() { return _mm256_setzero_ps(); }
  static R take_max(R v, R m) { return _mm256_max_ps(v, m); }
  static Flags is_nan(R v) { return _mm256_cmp_ps(v, v, _CMP_UNORD_Q); }
  static Flags first_nan(Flags nan, Flags seen) { return _mm256_andnot_ps(seen, nan); }
  static R select(Flags f, R then, R other) { return _mm256_blendv_ps(other, then, f); }
  static Flags either(Flags a, Flags b) { return _mm256_or_ps(a, b); }
  static Flags outside(R v, R bound) {
    return _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v), bound, _CMP_NLE_UQ);
  }
  static Flags outside(R v, R bound, Tail t) {
    return _mm256_and_ps(outside(v, bound), _mm256_castsi256_ps(t));
  }
  static bool any(Flags f) { return _mm256_movemask_ps(f) != 0; }
};

}  // namespace

bool max_pool_rows_avx2(const MaxPoolShape& s, const float* x, float* y, int64_t first,
                        int64_t last, float bound) {
  return max_pool_rows<Avx2>(s, x, y, first, last, bound);
}

}  // namespace kiln::hal::cpu::detail

KILN_ISA_TARGET_END()
