// Vulkan results as kiln Statuses: every Vulkan call whose result can fail goes through
// vk_check, so a failure reaches the user as an error naming the call and the result
// ("vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY") instead of an abort.
#pragma once

#include <vulkan/vulkan.h>

#include <string_view>

#include "kiln/base/status.h"

namespace kiln::hal::vulkan {

// "VK_ERROR_DEVICE_LOST"; "VkResult(-13)" for a value this build does not know.
std::string_view vk_result_name(VkResult result);

// OK for VK_SUCCESS (and the other non-negative results); else an error naming `call` and the
// result: OutOfRange for out-of-memory results, FailedPrecondition for a lost device, a missing
// driver, layer or extension, Internal otherwise.
Status vk_check(VkResult result, std::string_view call);

}  // namespace kiln::hal::vulkan

#define KILN_VK_RETURN_IF_ERROR(call) \
  KILN_RETURN_IF_ERROR(::kiln::hal::vulkan::vk_check((call), #call))
