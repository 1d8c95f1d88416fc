// The vector instruction sets kiln's own CPU kernels have code for (gemm_kernel.h,
// winograd_conv.h), and which one this process runs.
#pragma once

#include <vector>

namespace kiln::hal::cpu {

enum class Isa { kAvx2, kAvx512 };

// Whether this CPU has the instructions `isa`'s code uses: AVX2 and FMA, plus AVX-512F for
// kAvx512.
bool cpu_has(Isa isa);
// AVX-512 when the CPU has AVX-512F and oneDNN's effective ISA (the CPU capped by
// DNNL_MAX_CPU_ISA, dnnl_allows_avx512) includes it; else AVX2. Fixed for the process: a kernel
// choice that depends on it depends on the machine only.
Isa best_isa();
// "avx2" or "avx512", for kernel names in plans.
const char* isa_name(Isa isa);
// The instruction sets whose code this CPU runs (cpu_has), AVX2 first: the kernels' tests run
// each of them, whatever best_isa picks.
std::vector<Isa> runnable_isas();

}  // namespace kiln::hal::cpu
