// A command buffer recorded once and submitted once, with its own pool and fence, so that any
// thread can use one without locking (transfers, the observer's dispatch-by-dispatch runs).
#pragma once

#include <vulkan/vulkan.h>

#include "kiln/base/status.h"
#include "kiln/hal/vulkan/vulkan_context.h"

namespace kiln::hal::vulkan {

class OneShotCommands {
 public:
  // A command buffer in the recording state.
  static StatusOr<OneShotCommands> begin(VulkanContext& context);
  OneShotCommands(OneShotCommands&& other) noexcept;
  OneShotCommands& operator=(OneShotCommands&&) = delete;
  ~OneShotCommands();

  VkCommandBuffer buffer() const { return commands_; }
  // Ends recording, submits, and waits until the device has run it.
  Status submit_and_wait();

 private:
  explicit OneShotCommands(VulkanContext& context) : context_(&context) {}

  VulkanContext* context_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

}  // namespace kiln::hal::vulkan
