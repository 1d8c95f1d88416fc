// State a CPU device shares with the executables it prepares (they may outlive the device).
#pragma once

#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/hal/cpu/weight_cache.h"
#include "kiln/hal/device.h"

namespace kiln::hal::cpu {

struct DeviceState {
  dnnl::engine engine;
  WeightCache weights;
  int threads = 1;  // resolved: DeviceOptions::threads, or all cores when that is 0
  TeamPolicy team_policy = TeamPolicy::kAdaptive;
  // Sample groups (sample_groups.h): the bytes from which a dispatch is worth slicing;
  // UINT64_MAX: never.
  uint64_t sample_group_bytes = UINT64_MAX;
};

// Makes `threads` the OpenMP team size of the calling thread; oneDNN sizes its work partition
// from it at primitive creation and execution alike. OpenMP keeps the team size per thread
// (nthreads-var), so this changes nothing for other threads.
void use_threads(int threads);

// Gives the calling thread back the team size it had when this was made, once this goes:
// prepare() and run() set each dispatch's team size on the caller's thread and leave the caller
// its own.
class CallerThreads {
 public:
  CallerThreads();
  ~CallerThreads();
  CallerThreads(const CallerThreads&) = delete;
  CallerThreads& operator=(const CallerThreads&) = delete;

 private:
  int threads_;
};

}  // namespace kiln::hal::cpu
