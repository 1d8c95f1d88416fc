#include "kiln/hal/cpu/cpu_isa.h"

#include "kiln/hal/cpu/dnnl_util.h"

namespace kiln::hal::cpu {

bool cpu_has(Isa isa) {
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return isa == Isa::kAvx512 ? avx2 && __builtin_cpu_supports("avx512f") : avx2;
}

Isa best_isa() {
  static const Isa isa = cpu_has(Isa::kAvx512) && dnnl_allows_avx512() ? Isa::kAvx512 : Isa::kAvx2;
  return isa;
}

const char* isa_name(Isa isa) { return isa == Isa::kAvx512 ? "avx512" : "avx2"; }

std::vector<Isa> runnable_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (cpu_has(isa)) isas.push_back(isa);
  }
  return isas;
}

}  // namespace kiln::hal::cpu
