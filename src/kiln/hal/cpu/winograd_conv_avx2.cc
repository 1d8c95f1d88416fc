// The Winograd convolution's AVX2 + FMA kernels (winograd_conv_kernels.h): 8-float vectors, a
// register block of 6 tiles x 16 output channels.
#include <immintrin.h>

#include "kiln/hal/cpu/isa_target.h"
#include "kiln/hal/cpu/winograd_conv_kernels.h"

// Everything below is compiled for AVX2 + FMA, so this file adds no such instruction anywhere
// else; winograd_conv.cc calls it only where the CPU has them.
KILN_ISA_TARGET_BEGIN("avx2,fma")

#include "kiln/hal/cpu/winograd_transforms.h"

namespace kiln::hal::cpu::winograd::detail {
namespace {

constexpr int64_t kTilesPerBlock = 6;
constexpr int64_t kOutPerBlock = 16;

struct Avx2 {
  using R = __m256;
  static constexpr int64_t kWidth = 8;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R x) { _mm256_storeu_ps(p, x); }
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  static R below_zero(R y, R a) {
    return _mm256_blendv_ps(y, a, _mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_LT_OQ));
  }
};

// One register block: 6 tiles x 16 output channels in 12 accumulators, summing the channels in
// order, 8 per step. Written in assembly so that the accumulators stay in registers (compilers
// spill some of them here): per channel, 2 weight loads, 6 broadcasts and 12 FMAs.
#define KILN_WINOGRAD_CHANNEL(ci)           \
  "vmovups " #ci                            \
  "*64(%[u]), %%ymm12\n\t"                  \
  "vmovups " #ci                            \
  "*64+32(%[u]), %%ymm13\n\t"               \
  "vbroadcastss (0*8+" #ci                  \
  ")*4(%[v]), %%ymm14\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm14, %[a0]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm14, %[b0]\n\t" \
  "vbroadcastss (1*8+" #ci                  \
  ")*4(%[v]), %%ymm15\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm15, %[a1]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm15, %[b1]\n\t" \
  "vbroadcastss (2*8+" #ci                  \
  ")*4(%[v]), %%ymm14\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm14, %[a2]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm14, %[b2]\n\t" \
  "vbroadcastss (3*8+" #ci                  \
  ")*4(%[v]), %%ymm15\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm15, %[a3]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm15, %[b3]\n\t" \
  "vbroadcastss (4*8+" #ci                  \
  ")*4(%[v]), %%ymm14\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm14, %[a4]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm14, %[b4]\n\t" \
  "vbroadcastss (5*8+" #ci                  \
  ")*4(%[v]), %%ymm15\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm15, %[a5]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm15, %[b5]\n\t"

// `outs` is always 16 (one panel) here. A block with fewer live tiles computes all 6 (its
// padding tiles' products are never read).
void multiply_block(const float* v, const float* u, int64_t /*panel_stride*/,
                    int64_t channel_blocks, int64_t /*outs*/, int64_t /*tiles*/, float* m,
                    int64_t ldm, const float* /*next*/) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
  for (int64_t c = 0; c < channel_blocks; ++c) {
    asm(KILN_WINOGRAD_CHANNEL(0) KILN_WINOGRAD_CHANNEL(1) KILN_WINOGRAD_CHANNEL(2)
            KILN_WINOGRAD_CHANNEL(3) KILN_WINOGRAD_CHANNEL(4) KILN_WINOGRAD_CHANNEL(5)
                KILN_WINOGRAD_CHANNEL(6) KILN_WINOGRAD_CHANNEL(7)
        : [a0] "+x"(a0), [a1] "+x"(a1), [a2] "+x"(a2), [a3] "+x"(a3), [a4] "+x"(a4), [a5] "+x"(a5),
          [b0] "+x"(b0), [b1] "+x"(b1), [b2] "+x"(b2), [b3] "+x"(b3), [b4] "+x"(b4), [b5] "+x"(b5)
        : [v] "r"(v), [u] "r"(u), "m"(*reinterpret_cast<const float(*)[48]>(v)),
          "m"(*reinterpret_cast<const float(*)[128]>(u))
        : "xmm12", "xmm13", "xmm14", "xmm15");
    v += kTilesPerBlock * Avx2::kWidth;
    u += Avx2::kWidth * kOutPerBlock;
  }
  const __m256 lo[6] = {a0, a1, a2, a3, a4, a5}, hi[6] = {b0, b1, b2, b3, b4, b5};
  for (int j = 0; j < 6; ++j) {
    _mm256_storeu_ps(m + j * ldm, lo[j]);
    _mm256_storeu_ps(m + j * ldm + Avx2::kWidth, hi[j]);
  }
}
#undef KILN_WINOGRAD_CHANNEL

}  // namespace
}  // namespace kiln::hal::cpu::winograd::detail

KILN_ISA_TARGET_END()

namespace kiln::hal::cpu::winograd::detail {

const Kernels& avx2_kernels() {
  static constexpr Kernels kKernels{Blocking{Avx2::kWidth, kTilesPerBlock, kOutPerBlock},
                                    Transforms{transform_input<Avx2, 2>, transform_output<Avx2, 2>},
                                    Transforms{transform_input<Avx2, 4>, transform_output<Avx2, 4>},
                                    multiply_block};
  return kKernels;
}

}  // namespace kiln::hal::cpu::winograd::detail
