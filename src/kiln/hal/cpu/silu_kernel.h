// kiln's f32 SiLU, y = x * sigmoid(x), on AVX2 + FMA or AVX-512: the activation a conv fused from
// Mul(y, Sigmoid(y)) (passes/fuse_conv.cc), applied by ActivationStep right after the conv
// (activation_step.h). oneDNN's swish post-op inside the conv cost more than this separate pass:
// EfficientNet-B0's 8x32x112x112 depthwise conv took 1.1-1.2 ms with it and 0.7-0.8 ms followed
// by this kernel, and the whole model ran 8-13% faster at batch 8 and 4-18% at batch 1 (2
// threads, AVX-512, alternating processes).
//
// Numerics: each element goes through one fixed sequence of IEEE operations, the same on both
// ISAs, so AVX2 and AVX-512 give the same bits, whatever the element's position or the count:
// e = exp(-|x|) as softmax_kernel.h computes exp (within 2 ulp; 0 below -87.33654), then
// y = x * (e / (1 + e)) where x < 0 and x * (1 / (1 + e)) elsewhere. So NaN stays NaN, +inf gives
// +inf, -inf gives NaN (-inf * 0, as Mul(y, Sigmoid(y)) gives), -0 gives -0, and x below -87.3
// gives -0 (the exact value is below the smallest normal float).
#pragma once

#include <cstdint>

#include "kiln/hal/cpu/cpu_isa.h"

namespace kiln::hal::cpu::silu {

// y[i] = SiLU(x[i]) for i < n, on the calling thread (`y` may equal `x`). Call only where the CPU
// has AVX2 + FMA; `isa`'s code, AVX2's where the CPU lacks AVX-512F.
void apply(const float* x, float* y, int64_t n, Isa isa = best_isa());

namespace detail {
// As apply(); call each only where the CPU has its ISA.
void apply_avx2(const float* x, float* y, int64_t n);
void apply_avx512(const float* x, float* y, int64_t n);
}  // namespace detail

}  // namespace kiln::hal::cpu::silu
