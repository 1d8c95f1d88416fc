#include "kiln/hal/cpu/softmax_kernel.h"

#include <omp.h>

#include <algorithm>

namespace kiln::hal::cpu::softmax {

namespace {

using RowsFunction = void (*)(const float*, float*, int64_t, int64_t, int64_t);

// `isa`'s code, AVX2's where the CPU lacks AVX-512F.
RowsFunction rows_function(Isa isa) {
  if (isa == Isa::kAvx512 && !cpu_has(Isa::kAvx512)) isa = Isa::kAvx2;
  return isa == Isa::kAvx512 ? detail::rows_avx512 : detail::rows_avx2;
}

}  // namespace

void rows_on_this_thread(const float* x, float* y, int64_t rows, int64_t n, Isa isa) {
  if (rows > 0 && n > 0) rows_function(isa)(x, y, 0, rows, n);
}

void rows(const float* x, float* y, int64_t count, int64_t n, Isa isa) {
  if (count <= 0 || n <= 0) return;
  const RowsFunction run = rows_function(isa);
  // Blocks of rows of about 16K floats each; a row's result does not depend on its block.
  const int64_t per_block = std::max<int64_t>(1, 16384 / n);
  const int64_t blocks = (count + per_block - 1) / per_block;
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t first = block * per_block;
    run(x, y, first, std::min(count, first + per_block), n);
  }
}

}  // namespace kiln::hal::cpu::softmax
