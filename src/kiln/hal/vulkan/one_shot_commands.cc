#include "kiln/hal/vulkan/one_shot_commands.h"

#include <utility>

#include "kiln/hal/vulkan/vulkan_status.h"

namespace kiln::hal::vulkan {

StatusOr<OneShotCommands> OneShotCommands::begin(VulkanContext& context) {
  OneShotCommands result(context);
  VkDevice device = context.device();
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pool.queueFamilyIndex = context.queue_family();
  KILN_VK_RETURN_IF_ERROR(vkCreateCommandPool(device, &pool, nullptr, &result.pool_));
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = result.pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  KILN_VK_RETURN_IF_ERROR(vkAllocateCommandBuffers(device, &alloc, &result.commands_));
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  KILN_VK_RETURN_IF_ERROR(vkCreateFence(device, &fence, nullptr, &result.fence_));
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  KILN_VK_RETURN_IF_ERROR(vkBeginCommandBuffer(result.commands_, &begin));
  return result;
}

OneShotCommands::OneShotCommands(OneShotCommands&& other) noexcept
    : context_(other.context_),
      pool_(std::exchange(other.pool_, VK_NULL_HANDLE)),
      commands_(std::exchange(other.commands_, VK_NULL_HANDLE)),
      fence_(std::exchange(other.fence_, VK_NULL_HANDLE)) {}

OneShotCommands::~OneShotCommands() {
  VkDevice device = context_->device();
  if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device, fence_, nullptr);
  // Destroying the pool frees its command buffer.
  if (pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device, pool_, nullptr);
}

Status OneShotCommands::submit_and_wait() {
  KILN_VK_RETURN_IF_ERROR(vkEndCommandBuffer(commands_));
  return context_->submit_and_wait(commands_, fence_);
}

}  // namespace kiln::hal::vulkan
