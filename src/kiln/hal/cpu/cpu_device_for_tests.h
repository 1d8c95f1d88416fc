// The CPU device with default options (all cores, the adaptive team policy), for the CPU
// backend's tests; a failure to create it stops the test binary.
#pragma once

#include <memory>

#include "kiln/base/status.h"
#include "kiln/hal/cpu/cpu_device.h"

namespace kiln::hal::cpu {

inline std::unique_ptr<Device> default_cpu_device() {
  auto d = create_cpu_device({});
  KILN_CHECK(d.ok());
  return std::move(d).value();
}

}  // namespace kiln::hal::cpu
