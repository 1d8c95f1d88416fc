#include "kiln/hal/vulkan/transfer.h"

#include <cstring>

#include "kiln/hal/vulkan/one_shot_commands.h"

namespace kiln::hal::vulkan {
namespace {

Status check_range(const VulkanBuffer& buffer, size_t offset, size_t bytes) {
  if (offset > buffer.size() || bytes > buffer.size() - offset) {
    return out_of_range("{} bytes at offset {} do not fit in a {}-byte Vulkan buffer", bytes,
                        offset, buffer.size());
  }
  return ok_status();
}

// Copies `bytes` bytes between two buffers on the device and waits.
Status copy_on_device(VulkanContext& context, VkBuffer from, size_t from_offset, VkBuffer to,
                      size_t to_offset, size_t bytes) {
  KILN_ASSIGN_OR_RETURN(OneShotCommands commands, OneShotCommands::begin(context));
  VkBufferCopy region{from_offset, to_offset, bytes};
  vkCmdCopyBuffer(commands.buffer(), from, to, 1, &region);
  return commands.submit_and_wait();
}

}  // namespace

Status write_buffer(VulkanContext& context, const VulkanBuffer& dst, size_t offset,
                    std::span<const std::byte> src) {
  KILN_RETURN_IF_ERROR(check_range(dst, offset, src.size()));
  if (src.empty()) return ok_status();
  if (dst.host_data() != nullptr) {
    std::memcpy(dst.host_data() + offset, src.data(), src.size());
    return ok_status();
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<VulkanBuffer> staging,
                        VulkanBuffer::create(context, src.size(), MemoryType::kHostVisible));
  std::memcpy(staging->host_data(), src.data(), src.size());
  return copy_on_device(context, staging->handle(), 0, dst.handle(), offset, src.size());
}

Status read_buffer(VulkanContext& context, const VulkanBuffer& src, size_t offset,
                   std::span<std::byte> dst) {
  KILN_RETURN_IF_ERROR(check_range(src, offset, dst.size()));
  if (dst.empty()) return ok_status();
  if (src.host_data() != nullptr) {
    std::memcpy(dst.data(), src.host_data() + offset, dst.size());
    return ok_status();
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<VulkanBuffer> staging,
                        VulkanBuffer::create(context, dst.size(), MemoryType::kHostVisible));
  KILN_RETURN_IF_ERROR(
      copy_on_device(context, src.handle(), offset, staging->handle(), 0, dst.size()));
  std::memcpy(dst.data(), staging->host_data(), dst.size());
  return ok_status();
}

}  // namespace kiln::hal::vulkan
