#include "kiln/hal/vulkan/vulkan_test_env.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/vulkan/vulkan_device.h"

namespace kiln::hal::vulkan::testing {
namespace {

// Before main: every context the tests create has the validation layer.
const bool validation_on = [] {
  setenv("KILN_VULKAN_VALIDATION", "1", 1);
  return true;
}();

}  // namespace

std::unique_ptr<Device> make_vulkan_device(DeviceOptions options) {
  StatusOr<std::unique_ptr<Device>> device =
      create_vulkan_device(options, hal::cpu::create_cpu_device);
  EXPECT_TRUE(device.ok()) << device.status().to_string();
  return device.ok() ? std::move(*device) : nullptr;
}

}  // namespace kiln::hal::vulkan::testing
