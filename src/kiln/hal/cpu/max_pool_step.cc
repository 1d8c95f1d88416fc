#include "kiln/hal/cpu/max_pool_step.h"

#include <omp.h>

#include <algorithm>

namespace kiln::hal::cpu {

bool max_pool_channels_last(const MaxPoolShape& shape, const float* x, float* y, float bound,
                            Isa isa) {
  if (isa == Isa::kAvx512 && !cpu_has(Isa::kAvx512)) isa = Isa::kAvx2;
  const auto rows_of =
      isa == Isa::kAvx512 ? detail::max_pool_rows_avx512 : detail::max_pool_rows_avx2;
  const int64_t rows = shape.n * shape.out_h;
  // Blocks of output rows of about 16K floats each; a row's values do not depend on its block.
  const int64_t per_block =
      std::max<int64_t>(1, 16384 / std::max<int64_t>(1, shape.out_w * shape.c));
  const int64_t blocks = (rows + per_block - 1) / per_block;
  bool within = true;
#pragma omp parallel for schedule(static) reduction(&& : within) if (blocks > 1)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t first = block * per_block;
    within = rows_of(shape, x, y, first, std::min(rows, first + per_block), bound) && within;
  }
  return within;
}

Status MaxPoolStep::run(const ExecContext& ctx) {
  const auto* x = reinterpret_cast<const float*>(ctx.resolve(x_));
  auto* y = reinterpret_cast<float*>(ctx.resolve(y_));
  const bool within = max_pool_channels_last(shape_, x, y, bound_);
  if (vouches_ >= 0 && ctx.vouched != nullptr) ctx.vouched[vouches_] = within ? 1 : 0;
  return ok_status();
}

}  // namespace kiln::hal::cpu
