// The Winograd convolution's AVX-512 kernels (winograd_conv_kernels.h): 16-float vectors, a
// register block of 8 tiles x 32 output channels (16 zmm accumulators).
#include <immintrin.h>

#include <cstdint>

#include "kiln/hal/cpu/isa_target.h"
#include "kiln/hal/cpu/winograd_conv_kernels.h"

// Everything below is compiled for AVX-512, so this file adds no such instruction anywhere else;
// winograd_conv.cc calls it only where the CPU has it.
KILN_ISA_TARGET_BEGIN("avx512f,avx2,fma")

#include "kiln/hal/cpu/winograd_transforms.h"

namespace kiln::hal::cpu::winograd::detail {
namespace {

constexpr int64_t kTilesPerBlock = 8;
constexpr int64_t kOutPerBlock = 32;
// How far ahead of its loads a panel's weights are prefetched into L1: 4 KiB, 4 steps of 16
// channels. (Measured on Zen 5 at 2 threads, ResNet-50 v1 at batch 1 in the model: the 3x3
// convs' total 6.3-6.5 ms against 6.8-8.1 without, 1 to 4 KiB alike; at batch 8 5-10% less.
// A layer's weights come from memory, and the hardware prefetcher alone left the kernel waiting
// on them. On AVX2, at half the FMA rate, the same prefetch gained nothing.)
constexpr int64_t kPrefetchFloats = 1024;

struct Avx512 {
  using R = __m512;
  static constexpr int64_t kWidth = 16;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R x) { _mm512_storeu_ps(p, x); }
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  // (Masked forms with every lane set: GCC 12's plain _mm512_max_ps/_mm512_min_ps trip
  // -Wmaybe-uninitialized on their undefined pass-through operand.)
  static R max(R a, R b) { return _mm512_maskz_max_ps(0xffff, a, b); }
  static R min(R a, R b) { return _mm512_maskz_min_ps(0xffff, a, b); }
  static R below_zero(R y, R a) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_LT_OQ), y, a);
  }
};

// The address `floats` floats from `base`, for a prefetch: it may lie past the end of the
// weights (a prefetch never faults), so it is computed as an integer, not by pointer arithmetic
// past the array.
const char* address_at(const float* base, int64_t floats) {
  return reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(base) +
                                       static_cast<uintptr_t>(floats) * sizeof(float));
}

// R tiles (at most kTilesPerBlock: fewer in a batch's last block) x W panels of 16 output
// channels, one accumulator each, summing the channels in order by one FMA each: per channel, W
// weight loads, R broadcasts, R W FMAs, and W prefetches kPrefetchFloats ahead. With kNext, also
// W prefetches into L2 of the next call's weights (`next`, its panels panel_stride apart).
template <int R, int W, bool kNext>
void multiply_tiles(const float* v, const float* u, int64_t panel_stride, int64_t channel_blocks,
                    float* m, int64_t ldm, const float* next) {
  constexpr int64_t kVec = Avx512::kWidth;
  __m512 acc[R][W];
#pragma GCC unroll 8
  for (int t = 0; t < R; ++t) {
#pragma GCC unroll 2
    for (int w = 0; w < W; ++w) acc[t][w] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < channel_blocks; ++c) {
#pragma GCC unroll 16
    for (int ci = 0; ci < kVec; ++ci) {
      __m512 b[W];
#pragma GCC unroll 2
      for (int w = 0; w < W; ++w) {
        b[w] = _mm512_loadu_ps(u + w * panel_stride + ci * kVec);
        _mm_prefetch(address_at(u, w * panel_stride + ci * kVec + kPrefetchFloats), _MM_HINT_T0);
        if constexpr (kNext) {
          _mm_prefetch(address_at(next, w * panel_stride + c * kVec * kVec + ci * kVec),
                       _MM_HINT_T1);
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < R; ++t) {
        const __m512 x = _mm512_set1_ps(v[t * kVec + ci]);
#pragma GCC unroll 2
        for (int w = 0; w < W; ++w) acc[t][w] = _mm512_fmadd_ps(x, b[w], acc[t][w]);
      }
    }
    v += kTilesPerBlock * kVec;
    u += kVec * kVec;
  }
#pragma GCC unroll 8
  for (int t = 0; t < R; ++t) {
#pragma GCC unroll 2
    for (int w = 0; w < W; ++w) _mm512_storeu_ps(m + t * ldm + w * kVec, acc[t][w]);
  }
}

template <int W, bool kNext>
void multiply_panels(const float* v, const float* u, int64_t panel_stride, int64_t channel_blocks,
                     int64_t tiles, float* m, int64_t ldm, const float* next) {
  switch (tiles) {
    case 1: multiply_tiles<1, W, kNext>(v, u, panel_stride, channel_blocks, m, ldm, next); break;
    case 2: multiply_tiles<2, W, kNext>(v, u, panel_stride, channel_blocks, m, ldm, next); break;
    case 3: multiply_tiles<3, W, kNext>(v, u, panel_stride, channel_blocks, m, ldm, next); break;
    case 4: multiply_tiles<4, W, kNext>(v, u, panel_stride, channel_blocks, m, ldm, next); break;
    case 5: multiply_tiles<5, W, kNext>(v, u, panel_stride, channel_blocks, m, ldm, next); break;
    case 6: multiply_tiles<6, W, kNext>(v, u, panel_stride, channel_blocks, m, ldm, next); break;
    case 7: multiply_tiles<7, W, kNext>(v, u, panel_stride, channel_blocks, m, ldm, next); break;
    default:
      multiply_tiles<kTilesPerBlock, W, kNext>(v, u, panel_stride, channel_blocks, m, ldm, next);
      break;
  }
}

template <bool kNext>
void multiply_outs(const float* v, const float* u, int64_t panel_stride, int64_t channel_blocks,
                   int64_t outs, int64_t tiles, float* m, int64_t ldm, const float* next) {
  if (outs >= kOutPerBlock) {
    multiply_panels<2, kNext>(v, u, panel_stride, channel_blocks, tiles, m, ldm, next);
  } else {
    multiply_panels<1, kNext>(v, u, panel_stride, channel_blocks, tiles, m, ldm, next);
  }
}

void multiply_block(const float* v, const float* u, int64_t panel_stride, int64_t channel_blocks,
                    int64_t outs, int64_t tiles, float* m, int64_t ldm, const float* next) {
  if (next != nullptr) {
    multiply_outs<true>(v, u, panel_stride, channel_blocks, outs, tiles, m, ldm, next);
  } else {
    multiply_outs<false>(v, u, panel_stride, channel_blocks, outs, tiles, m, ldm, next);
  }
}

}  // namespace
}  // namespace kiln::hal::cpu::winograd::detail

KILN_ISA_TARGET_END()

namespace kiln::hal::cpu::winograd::detail {

const Kernels& avx512_kernels() {
  static constexpr Kernels kKernels{
      Blocking{Avx512::kWidth, kTilesPerBlock, kOutPerBlock},
      Transforms{transform_input<Avx512, 2>, transform_output<Avx512, 2>},
      Transforms{transform_input<Avx512, 4>, transform_output<Avx512, 4>}, multiply_block};
  return kKernels;
}

}  // namespace kiln::hal::cpu::winograd::detail
