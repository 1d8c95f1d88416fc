#include "kiln/hal/cpu/vector_map_kernels.h"

namespace kiln::hal::cpu::vector_map {

const char* name_of(Function f) {
  switch (f) {
    case Function::kSilu: return "silu";
    case Function::kSoftplus: return "softplus";
    case Function::kMish: return "mish";
  }
  return "?";
}

void apply(Function f, const float* x, float* y, int64_t n, Isa isa) {
  if (n <= 0) return;
  if (isa == Isa::kAvx512 && cpu_has(Isa::kAvx512)) return detail::apply_avx512(f, x, y, n);
  detail::apply_avx2(f, x, y, n);
}

}  // namespace kiln::hal::cpu::vector_map
