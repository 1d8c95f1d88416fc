// For the Vulkan backend's tests: turns the Khronos validation layer on for the whole test
// process (before any Vulkan context exists), and makes the device under test: the Vulkan device
// with the CPU backend as its fallback.
#pragma once

#include <memory>

#include "kiln/hal/device.h"

namespace kiln::hal::vulkan::testing {

// The Vulkan device of DeviceOptions (validation on); the test fails when there is none.
std::unique_ptr<Device> make_vulkan_device(DeviceOptions options = {});

}  // namespace kiln::hal::vulkan::testing
