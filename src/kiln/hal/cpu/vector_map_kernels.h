// kiln's f32 vector kernels of one input, y[i] = f(x[i]), on AVX2 + FMA or AVX-512, for the
// functions the portable kernel computed a scalar exp and log at a time (5-10 ns an element;
// these about 0.2, AVX-512, 2 threads):
//
// - SiLU, y = x * sigmoid(x): the activation a conv fused from Mul(y, Sigmoid(y))
//   (passes/fuse_conv.cc), applied by ActivationStep right after the conv (activation_step.h).
//   oneDNN's swish post-op inside the conv cost more than this separate pass: EfficientNet-B0's
//   8x32x112x112 depthwise conv took 1.1-1.2 ms with it and 0.7-0.8 ms followed by this kernel,
//   and the whole model ran 8-13% faster at batch 8 and 4-18% at batch 1 (2 threads, AVX-512,
//   alternating processes).
// - Softplus, y = log(1 + e^x): the ONNX op.
// - Mish, y = x * tanh(softplus(x)): the ONNX op (opset 18), which passes/fuse_mish.cc also makes
//   of the Softplus -> Tanh -> Mul chain older exporters write (YOLOv4's activation).
//
// Numerics: each element goes through one fixed sequence of IEEE operations per function, the
// same on both ISAs, so AVX2 and AVX-512 give the same bits, whatever the element's position or
// the count. Each starts from e = exp(-|x|) as softmax_kernel.h computes exp (within 2 ulp; 0
// below -87.33654):
// - SiLU: y = x * (e / (1 + e)) where x < 0 and x * (1 / (1 + e)) elsewhere. NaN stays NaN, +inf
//   gives +inf, -inf gives NaN (-inf * 0, as Mul(y, Sigmoid(y)) gives), -0 gives -0, and x below
//   -87.3 gives -0 (the exact value is below the smallest normal float).
// - Softplus: y = max(x, 0) + log1p(e), log1p of e in [0, 1] by Cephes' logf polynomial: of e
//   itself below sqrt(2) - 1 (no rounding of 1 + e), else of (1 + e) / 2 - 1 plus ln 2 in two
//   parts. Within 2 ulp of the exact function over the floats. NaN stays NaN, +inf gives +inf,
//   -inf gives 0, and below -87.3 the result is 0.
// - Mish: tanh(softplus(x)) = ((1 + e^x)^2 - 1) / ((1 + e^x)^2 + 1), written with e so that no
//   term cancels: y = x * n / (n + d) with n = 1 + 2e, d = 2e^2 where x >= 0, and n = e(2 + e),
//   d = 2 where x < 0. Within 5 ulp of the exact function where the result is a normal float
//   (4.23 at worst over every 37th float in [-100, 100]: exp's 2 ulp and four roundings).
//   NaN stays NaN, +inf gives +inf, -inf gives NaN (-inf * 0, as Mul(x, Tanh(Softplus(x)))
//   gives), -0 gives -0, and x below -87.3 gives -0.
// (vector_map_kernels_test.cc checks each bound, the bits on both ISAs and the edge values.)
#pragma once

#include <cstdint>

#include "kiln/hal/cpu/cpu_isa.h"

namespace kiln::hal::cpu::vector_map {

enum class Function : uint8_t { kSilu, kSoftplus, kMish };

// The function's name in kernel descriptions: "silu", "softplus", "mish".
const char* name_of(Function f);

// y[i] = f(x[i]) for i < n, on the calling thread (`y` may equal `x`). Call only where the CPU
// has AVX2 + FMA; `isa`'s code, AVX2's where the CPU lacks AVX-512F.
void apply(Function f, const float* x, float* y, int64_t n, Isa isa = best_isa());

namespace detail {
// As apply(); call each only where the CPU has its ISA.
void apply_avx2(Function f, const float* x, float* y, int64_t n);
void apply_avx512(Function f, const float* x, float* y, int64_t n);
}  // namespace detail

}  // namespace kiln::hal::cpu::vector_map
