#include "kiln/backends/builtin.h"

#include <mutex>

#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/null/null_device.h"
#include "kiln/hal/registry.h"

namespace kiln::backends {

void register_builtin_backends() {
  static std::once_flag once;
  std::call_once(once, [] {
    KILN_CHECK(hal::register_device("cpu", "oneDNN and kiln's own kernels on this machine's cores",
                                    hal::cpu::create_cpu_device)
                   .ok());
    KILN_CHECK(
        hal::register_device("null", "computes nothing; outputs are zeros (tests of the HAL)",
                             hal::null::create_null_device, hal::DeviceResults::kPlaceholders)
            .ok());
  });
}

namespace {

const bool registered = [] {
  register_builtin_backends();
  return true;
}();

}  // namespace
}  // namespace kiln::backends
