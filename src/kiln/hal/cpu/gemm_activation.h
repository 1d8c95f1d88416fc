// The activation kiln's matrix product applies last (gemm::Product::activation, gemm_kernel.h):
// GELU in its erf and tanh forms, or relu (max(+0, x), which keeps NaN and -0), over a block of Y
// in place. Internal to gemm_kernel.cc and its per-ISA halves (gemm_activation_avx2.cc,
// gemm_activation_avx512.cc); not for other callers.
//
// Numerics: every element goes through one fixed sequence of IEEE operations (multiplies, fused
// multiply-adds, one division, compares), the same on both ISAs, so AVX2 and AVX-512 give the
// same bits, and an element depends on its own value only:
//   erf(d), d = x * (1/sqrt 2): for |d| < 4 the rational approximation d P(d^2) / Q(d^2) (the
//     minimax fit Eigen and XLA use for f32; within 5e-7 of erf), else +-1 (erf(4) rounds to 1
//     in f32); gelu = (x * 0.5) * (1 + erf).
//   tanh(z), z = sqrt(2/pi) (x + 0.044715 x^3): for |z| < 7.9053111 the rational approximation
//     z P(z^2) / Q(z^2) (within 4e-7 of tanh), else +-1; gelu_tanh = (x * 0.5) * (1 + tanh).
// Both are within 1.5e-6 * max(1, |GELU(x)|) of the exact GELU (the most, about 1.2e-6, near
// x = 4.8). Relative to a tiny GELU of a negative x the error is larger, as in f32's own
// 1 + erf(d), whose cancellation loses the same digits.
// NaN stays NaN (the compares are false for it, so the approximation's NaN is kept); +inf gives
// +inf and -inf gives NaN (-inf * 0), as ONNX's Gelu and kiln's portable kernel give them.
#pragma once

#include <cstdint>

#include "kiln/hal/cpu/gemm_kernel.h"

namespace kiln::hal::cpu::gemm::detail {

// Applies `activation` (not kNone) to `rows` rows of `cols` floats, row r at y + r * ldy.
void activate_avx2(Activation activation, float* y, int64_t ldy, int64_t rows, int64_t cols);
// The same on AVX-512; call only where the CPU has AVX-512F.
void activate_avx512(Activation activation, float* y, int64_t ldy, int64_t rows, int64_t cols);

}  // namespace kiln::hal::cpu::gemm::detail
