// KILN_ISA_TARGET_BEGIN("avx2,fma") ... KILN_ISA_TARGET_END(): every function defined between
// them is compiled for that instruction set (GCC's target options, clang's target attribute),
// so that a file of per-ISA kernels adds no such instruction anywhere else. Callers run that code
// only where the CPU has the ISA (cpu_isa.h).
//
// Include every header with inline code but the ISA's own vector template before the BEGIN: a
// function compiled for the ISA in one file and without it in another is one symbol, and the
// linker could pick the ISA's copy for any caller.
#pragma once

#define KILN_ISA_PRAGMA(text) _Pragma(#text)

#if defined(__clang__)
#define KILN_ISA_TARGET_BEGIN(isa) \
  KILN_ISA_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define KILN_ISA_TARGET_END() KILN_ISA_PRAGMA(clang attribute pop)
#else
#define KILN_ISA_TARGET_BEGIN(isa) \
  KILN_ISA_PRAGMA(GCC push_options) KILN_ISA_PRAGMA(GCC target(isa))
#define KILN_ISA_TARGET_END() KILN_ISA_PRAGMA(GCC pop_options)
#endif
