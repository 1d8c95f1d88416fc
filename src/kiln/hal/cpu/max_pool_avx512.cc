// max_pool_step.h on AVX-512: 16-float vectors.
#include <immintrin.h>

#include <cstdint>

// Every header with inline code but the vector template goes before the target options
// (isa_target.h).
#include "kiln/hal/cpu/isa_target.h"
#include "kiln/hal/cpu/max_pool_step.h"

// Everything below is compiled for AVX-512, so this file adds no such instruction anywhere else;
// max_pool_step.cc calls it only where the CPU has AVX-512F.
KILN_ISA_TARGET_BEGIN("avx512f,avx2,fma")

#include "kiln/hal/cpu/max_pool_math.h"

namespace kiln::hal::cpu::detail {
namespace {

struct Avx512 {
  using R = __m512;
  using Flags = __mmask16;
  using Tail = __mmask16;
  static constexpr int64_t kWidth = 16;
  static Tail tail(int64_t count) { return static_cast<__mmask16>((1u << count) - 1u); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load(const float* p, Tail t) { return _mm512_maskz_loadu_ps(t, p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, R v, Tail t) { _mm512_mask_storeu_ps(p, t, v); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static Flags none() { return 0; }
  // (The masked form with every lane set: GCC 12's plain _mm512_max_ps trips
  // -Wmaybe-uninitialized on its undefined pass-through operand.)
  static R take_max(R v, R m) { return _mm512_maskz_max_ps(0xffff, v, m); }
  static Flags is_nan(R v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q); }
  static Flags first_nan(Flags nan, Flags seen) { return static_cast<Flags>(nan & ~seen); }
  static R select(Flags f, R then, R other) { return _mm512_mask_mov_ps(other, f, then); }
  static Flags either(Flags a, Flags b) { return a | b; }
  static Flags outside(R v, R bound) {
    const R magnitude = _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
    return _mm512_cmp_ps_mask(magnitude, bound, _CMP_NLE_UQ);
  }
  static Flags outside(R v, R bound, Tail t) { return outside(v, bound) & t; }
  static bool any(Flags f) { return f != 0; }
};

}  // namespace

bool max_pool_rows_avx512(const MaxPoolShape& s, const float* x, float* y, int64_t first,
                          int64_t last, float bound) {
  return max_pool_rows<Avx512>(s, x, y, first, last, bound);
}

}  // namespace kiln::hal::cpu::detail

KILN_ISA_TARGET_END()
