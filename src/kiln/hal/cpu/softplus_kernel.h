// kiln's f32 Softplus, y = log(1 + e^x), on AVX2 + FMA or AVX-512: the ONNX op (YOLOv4's Mish,
// Softplus -> Tanh -> Mul, runs it over every activation), which the portable kernel computed a
// scalar expf and log1pf at a time (10 ns an element; this kernel about 0.2, AVX-512, 2 threads).
//
// Numerics: each element goes through one fixed sequence of IEEE operations, the same on both
// ISAs, so AVX2 and AVX-512 give the same bits, whatever the element's position or the count:
// y = max(x, 0) + log1p(e) with e = exp(-|x|) as softmax_kernel.h computes exp (within 2 ulp; 0
// below -87.33654), and log1p(e) for e in [0, 1] by Cephes' logf polynomial: of e itself below
// sqrt(2) - 1 (no rounding of 1 + e), else of (1 + e) / 2 - 1 plus ln 2 in two parts. Within 2 ulp
// of the exact function over the floats (softplus_kernel_test.cc). NaN stays NaN, +inf gives +inf,
// -inf gives 0, and below -87.3 the result is 0 (the exact value is below the smallest normal
// float).
#pragma once

#include <cstdint>

#include "kiln/hal/cpu/cpu_isa.h"

namespace kiln::hal::cpu::softplus {

// y[i] = Softplus(x[i]) for i < n, on the calling thread (`y` may equal `x`). Call only where the
// CPU has AVX2 + FMA; `isa`'s code, AVX2's where the CPU lacks AVX-512F.
void apply(const float* x, float* y, int64_t n, Isa isa = best_isa());

namespace detail {
// As apply(); call each only where the CPU has its ISA.
void apply_avx2(const float* x, float* y, int64_t n);
void apply_avx512(const float* x, float* y, int64_t n);
}  // namespace detail

}  // namespace kiln::hal::cpu::softplus
