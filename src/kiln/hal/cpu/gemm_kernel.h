// kiln's f32 matrix product for MatMul and Gemm, on AVX2 + FMA or AVX-512: Y = alpha * A B
// (+ beta * C).
//
// B is packed in panels of 16 columns ([n/16][k][16], zero padded at the last panel), once at
// prepare time for a constant, else at run time; A is read in place (rows with a stride,
// contiguous along k). On AVX2 one register block of 6 rows x 16 columns keeps 12 accumulators; on
// AVX-512 a register block is 8 rows x 3 panels (24 zmm accumulators, one per row and panel; the
// last panels of a row go 2 + 2 where 4 remain, and as a block of 2 where 2 remain; rows that
// would leave a tail of 1 or 2 go as blocks of 8 and 7). The k axis is walked in blocks of 768,
// with the partial sums stored to Y and loaded back in between. While the register blocks of rows
// use one group of panels, the first of them prefetch the next group into L2, so that a B larger
// than the caches streams from memory behind the arithmetic.
//
// Numerics (docs/architecture.md invariant 4): every element of Y is one accumulator that starts at
// 0 and adds A[i,0]*B[0,j], A[i,1]*B[1,j], ... in order, each by one fused multiply-add, then the
// epilogue. A partial sum stored and loaded back is the same float, and a block of fewer rows or
// columns computes each element it holds the same way, so an element depends only on its row of
// A, its column of B, alpha, beta and C: not on the number of rows (M, or any product of A's
// leading dims folded into M), its row's position among them, the number of columns, the thread
// count or how the work is split over threads. A sample's rows therefore get the same bits in a
// batch of any size, whichever leading dim of A the batch is. (oneDNN 2.6's gemm-based matmul on
// AVX2 does not give that: it changes kernels and the order of a row's sums with the row count,
// the row's position in a block of 6 and the thread split; see matmul_op.cc.)
//
// Both ISAs compute every element by that same sequence, so they give the same bits: the ISA
// (best_isa: AVX-512 where the CPU has it and oneDNN's DNNL_MAX_CPU_ISA allows it) is a matter of
// speed only.
//
// NaN and Inf propagate as IEEE arithmetic says (no early outs, no clamping).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kiln/hal/cpu/cpu_isa.h"

namespace kiln::hal::cpu::gemm {

inline constexpr int64_t kPanelColumns = 16;  // columns per packed panel of B
inline constexpr int64_t kBlockRows = 6;      // rows per register block

// Whether this machine runs the kernels (AVX2 and FMA).
bool cpu_supported();

// The instruction sets the kernel has code for, and the one this process runs (cpu_isa.h).
using cpu::best_isa;
using cpu::Isa;
using cpu::isa_name;

// Panels of a B with n columns: ceil(n/16).
int64_t panel_count(int64_t n);
// Floats one packed B matrix [k, n] takes: panel_count(n) * 16 * k.
int64_t packed_floats(int64_t k, int64_t n);

// Packs `offsets.size()` matrices [k, n]: matrix i holds element (r, c) at
// src[offsets[i] + r * row_stride + c * col_stride]; it goes to packed + i * packed_floats(k, n)
// (`packed` 32-byte aligned). Runs on the calling thread's OpenMP team.
void pack(int64_t k, int64_t n, const float* src, std::span<const int64_t> offsets,
          int64_t row_stride, int64_t col_stride, float* packed);

// The function applied to each element of Y last, after the epilogue: GELU in its erf form
// (ONNX Gelu) or its tanh form (approximate = "tanh"), each by one fixed sequence of operations,
// the same on both ISAs, within 1.5e-6 * max(1, |GELU(x)|) of the exact function
// (gemm_activation.h); or relu, exact, as kiln's rule (kernels/activation.h): x < 0 ? +0 : x, so
// NaN and -0 stay.
enum class Activation : uint8_t { kNone, kGelu, kGeluTanh, kRelu };

// One product's sizes and epilogue: Y[i, j] = act(alpha * sum_k A[i, k] B[k, j] + beta * C[i, j]
// (+ R[i, j])), rounded after each step in that order: the sum, times alpha (when not 1), one FMA
// with beta * C, one addition of the residual R, the activation; then, when asked, the softmax of
// each row.
struct Product {
  int64_t m = 0, k = 0, n = 0;
  int64_t lda = 0;  // A's row stride (its columns are contiguous)
  int64_t ldy = 0;  // Y's row stride (its columns are contiguous)
  float alpha = 1.0f;
  // beta * C, when `c` is set: C[i, j] at c[i * c_row_stride + j * c_col_stride], c_col_stride
  // 0 (one value per row) or 1.
  const float* c = nullptr;
  float beta = 0.0f;
  int64_t c_row_stride = 0, c_col_stride = 0;
  // R[i, j] at residual[i * residual_row_stride + j], when set: row stride n, or 0 for one row
  // added to every row (attention's mask).
  const float* residual = nullptr;
  int64_t residual_row_stride = 0;
  // Where multiply() finds product i's R: residual + residual_offsets[i] when set (one offset per
  // product: a residual broadcast over products), else at its Y's offset (below).
  const int64_t* residual_offsets = nullptr;
  Activation activation = Activation::kNone;
  // Then Softmax along each row of Y (a MatMul's kiln_softmax), with softmax_kernel.h's kernel
  // and so its bits: a work item computes whole rows and applies it to them while they are in
  // its cache. Needs ldy == n.
  bool softmax = false;
};

// The product of a row-major A [m, k] and Y [m, n] (lda k, ldy n), without epilogue.
inline Product dense_product(int64_t m, int64_t k, int64_t n) {
  Product p;
  p.m = m;
  p.k = k;
  p.n = n;
  p.lda = k;
  p.ldy = n;
  return p;
}

// `a_offsets.size()` products of one shape: product i reads A at a + a_offsets[i] and the packed
// B at packed + b_offsets[i] (a multiple of 8 floats) and writes Y at y + i * y_stride (and reads
// its residual, when set, at p.residual + i * y_stride, or where p.residual_offsets says). Products
// must not write over each other or over their operands. Runs on the calling thread's OpenMP team,
// with `isa`'s code (AVX2 where the CPU lacks AVX-512F).
void multiply(const Product& p, const float* a, std::span<const int64_t> a_offsets,
              const float* packed, std::span<const int64_t> b_offsets, float* y, int64_t y_stride,
              Isa isa = best_isa());
// As above, product i writing Y at y + y_offsets[i] (a product's rows p.ldy apart): Y laid out
// as a later transpose wants it (attention's head merge). No residual.
void multiply(const Product& p, const float* a, std::span<const int64_t> a_offsets,
              const float* packed, std::span<const int64_t> b_offsets, float* y,
              std::span<const int64_t> y_offsets, Isa isa = best_isa());

// Attention's probabilities times its values (a MatMul's kiln_values): for each product i, the
// scores product `p` (p.softmax set; its residual, when set, at p.residual + p.residual_offsets[i],
// which must then be set) followed by the softmax of each row, times V_i (`v`: v.m = p.m, v.k =
// p.n, v.n the values' columns, v.ldy Y's row stride, no epilogue), V_i packed at packed_v +
// v_offsets[i]; Y at y + y_offsets[i], or at y + i * y_stride where y_offsets is empty. A work
// item computes a chunk of whole rows of the scores into its thread's buffer (at most 128 rows,
// kept for the thread's next call and grown for a longer sequence), normalizes them and
// multiplies them by V_i while they are in its cache: the probabilities are never written out,
// and each element of Y is the one multiply() gives the second product of the stored
// probabilities (every element is the same sum in the same order). Runs on the calling thread's
// OpenMP team, with `isa`'s code.
void attend(const Product& p, const float* a, std::span<const int64_t> a_offsets,
            const float* packed, std::span<const int64_t> b_offsets, const Product& v,
            const float* packed_v, std::span<const int64_t> v_offsets, float* y, int64_t y_stride,
            std::span<const int64_t> y_offsets, Isa isa = best_isa());

}  // namespace kiln::hal::cpu::gemm
