// kiln's f32 softmax over contiguous rows (Softmax along its last axis), on AVX2 + FMA or
// AVX-512: y = exp(x - max(x)) / sum(exp(x - max(x))), row by row.
//
// Numerics: each element of a row goes through one fixed sequence of IEEE operations, the same on
// both ISAs, so AVX2 and AVX-512 give the same bits, and a row's result depends on that row only
// (not on the row count, its position or the thread count: batch invariance, docs/architecture.md
// invariant 4):
//   - m = the row's maximum (exact in any order);
//   - e = exp(x - m) by Cody-Waite reduction, x - m = n ln2 + r with |r| <= ln2/2, and the
//     degree-7 polynomial of Cephes' expf for e^r, times 2^n (within 2 ulp of exp); 0 where
//     x - m < -87.33654 (exp below 2^-126, the smallest normal float);
//   - s = the sum of the row's e: element i goes to lane i mod 16 of 16 running sums, in order,
//     which then add pairwise (lane l with l + 8, then l + 4, l + 2, l + 1);
//   - y = e * (1 / s).
// A row that holds a NaN or +inf, or whose values are all -inf, is NaN throughout, as the
// definition gives (x - m is NaN there); -inf elements of another row give 0.
#pragma once

#include <cstdint>

#include "kiln/hal/cpu/cpu_isa.h"

namespace kiln::hal::cpu::softmax {

// Softmax of `rows` rows of `n` floats: row r at x + r * n into y + r * n (`y` may equal `x`).
// Call only where the CPU has AVX2 + FMA (cpu_has(Isa::kAvx2)). Runs on the calling thread's
// OpenMP team, with `isa`'s code (AVX2 where the CPU lacks AVX-512F).
void rows(const float* x, float* y, int64_t rows, int64_t n, Isa isa = best_isa());

// As rows(), on the calling thread alone (a caller that already runs on a team: kiln's gemm
// applying a MatMul's fused softmax to the rows it has just computed).
void rows_on_this_thread(const float* x, float* y, int64_t rows, int64_t n, Isa isa = best_isa());

namespace detail {
// Rows [first, last) as above, on one thread; call each only where the CPU has its ISA.
void rows_avx2(const float* x, float* y, int64_t first, int64_t last, int64_t n);
void rows_avx512(const float* x, float* y, int64_t first, int64_t last, int64_t n);
}  // namespace detail

}  // namespace kiln::hal::cpu::softmax
