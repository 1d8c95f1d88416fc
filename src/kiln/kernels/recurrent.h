// LSTM, GRU and RNN's kernel (recurrent.cc) for a backend that multiplies f32 weights faster
// than the portable loop: the CPU backend hands in its AVX2 gemm kernel (hal/cpu/recurrent_op.cc).
// The op definitions themselves are registered by register_recurrent_kernels (families.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "kiln/kernels/kernel.h"

namespace kiln::kernels {

// Products with one weight matrix w [n, k] (row-major; the product uses its transpose), made
// once per direction and run: y[i, j] = sum over kk of a[i * lda + kk] * w[j * k + kk], for
// i < m and j < n, written at y[i * ldy + j]. Each element must be computed by one fixed
// sequence of operations whatever m (docs/architecture.md invariant 4, batch invariance).
class WeightProduct {
 public:
  virtual ~WeightProduct() = default;
  virtual void multiply(int64_t m, const float* a, int64_t lda, float* y, int64_t ldy) const = 0;
};
// Makes the products of w [n, k] (n, k >= 1); w need not outlive the call.
using MakeWeightProduct = std::unique_ptr<WeightProduct> (*)(const float* w, int64_t n, int64_t k);

// The kernel of op_type ("LSTM", "GRU" or "RNN") for these arguments, as the op definition's
// make gives it, except that the weight products in f32 (the compute type of f32 and f16) go
// through `f32_products` (null: the portable loop); f64 always takes the portable loop.
StatusOr<std::unique_ptr<Kernel>> make_recurrent_kernel(const MakeArgs& args,
                                                        std::string_view op_type,
                                                        MakeWeightProduct f32_products);

}  // namespace kiln::kernels
