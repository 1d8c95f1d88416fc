#include "kiln/backends/builtin.h"

#include <mutex>

#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/null/null_device.h"
#include "kiln/hal/registry.h"
#include "kiln/hal/vulkan/vulkan_device.h"

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
    KILN_CHECK(hal::register_device(
                   "vulkan",
                   "compute shaders on a Vulkan 1.2 GPU, the CPU for what they do not cover "
                   "(vulkan:N picks a device; kiln devices lists them)",
                   [](const hal::DeviceOptions& options) {
                     return hal::vulkan::create_vulkan_device(options, hal::cpu::create_cpu_device);
                   },
                   hal::DeviceResults::kComputed, hal::vulkan::list_vulkan_instances)
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
