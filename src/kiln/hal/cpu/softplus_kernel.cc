#include "kiln/hal/cpu/softplus_kernel.h"

namespace kiln::hal::cpu::softplus {

void apply(const float* x, float* y, int64_t n, Isa isa) {
  if (n <= 0) return;
  if (isa == Isa::kAvx512 && cpu_has(Isa::kAvx512)) return detail::apply_avx512(x, y, n);
  detail::apply_avx2(x, y, n);
}

}  // namespace kiln::hal::cpu::softplus
