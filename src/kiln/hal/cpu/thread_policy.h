// How many OpenMP threads one dispatch runs with. A fork and join of the team costs microseconds
// (more when the workers have gone to sleep), which is more than a small op gains from a second
// core, so a dispatch whose work is small runs on the calling thread alone; the others use all
// of the device's threads. oneDNN sizes a primitive's work partition from the team size when the
// primitive is created, so ProgramBuilder creates each dispatch's primitives under the dispatch's
// team size and CpuExecutable runs them under the same.
//
// Batch invariance (docs/architecture.md invariant 4): gemm-based oneDNN kernels may split a
// reduction over threads, so a sample must meet the same team size at every batch size. The
// decision therefore depends on the work of one sample (the output's dim 0), never on the batch.
#pragma once

#include <cstdint>
#include <span>

#include "kiln/hal/device.h"

namespace kiln::hal::cpu {

// Work below which a dispatch runs on one thread, in flop-equivalents per sample (about 10-30 us
// of one core): convolutions and matrix products count their multiply-adds twice, other ops 16 per
// element they read or write.
inline constexpr double kSmallDispatchWork = 5e5;

// The work estimate above for one sample of `dispatch` (values: the program's value specs).
double work_per_sample(const DispatchSpec& dispatch, std::span<const ValueSpec> values);

// 1 when work_per_sample is below kSmallDispatchWork, else `device_threads`.
int dispatch_threads(const DispatchSpec& dispatch, std::span<const ValueSpec> values,
                     int device_threads);

}  // namespace kiln::hal::cpu
