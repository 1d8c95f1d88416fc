#include "kiln/hal/vulkan/vulkan_queue.h"

#include "kiln/hal/vulkan/transfer.h"
#include "kiln/hal/vulkan/vulkan_buffer.h"

namespace kiln::hal::vulkan {

Status VulkanQueue::write(const BufferRef& dst, std::span<const std::byte> src) {
  const VulkanBuffer* buffer = as_vulkan(dst);
  if (buffer == nullptr) return invalid_argument("write: the buffer is not a Vulkan buffer");
  return write_buffer(*context_, *buffer, dst.offset, src);
}

Status VulkanQueue::read(const BufferRef& src, std::span<std::byte> dst) {
  const VulkanBuffer* buffer = as_vulkan(src);
  if (buffer == nullptr) return invalid_argument("read: the buffer is not a Vulkan buffer");
  return read_buffer(*context_, *buffer, src.offset, dst);
}

Status VulkanQueue::submit(Executable& executable, const RunArgs& args) {
  return executable.run(args);
}

Status VulkanQueue::finish() { return context_->validation_status(); }

}  // namespace kiln::hal::vulkan
