// State a CPU device shares with the executables it prepares (they may outlive the device).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/hal/cpu/weight_cache.h"

namespace kiln::hal::cpu {

struct DeviceState {
  dnnl::engine engine;
  WeightCache weights;
  int threads = 1;  // resolved: DeviceOptions::threads, or all cores when that is 0
};

// Makes `threads` the OpenMP team size of the calling thread; oneDNN sizes its work partition
// from it at primitive creation and execution alike.
void use_threads(int threads);

}  // namespace kiln::hal::cpu
