// A RunObserver that records the OpenMP team size each dispatch of an observed run ran with, as
// the calling thread sees it right after the dispatch (header only: tests of the CPU backend's
// thread policy, its one-thread plan and the runtime's sessions).
#pragma once

#include <omp.h>

#include <cstdint>
#include <span>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/hal/executable.h"

namespace kiln::testing {

class TeamSizes : public hal::RunObserver {
 public:
  Status after_dispatch(int32_t, double, std::span<const Tensor>) override {
    sizes.push_back(omp_get_max_threads());
    return ok_status();
  }
  std::vector<int> sizes;
};

}  // namespace kiln::testing
