// The Vulkan device's queue. Every call completes before it returns: write and read copy (through
// staging where the buffer is not host-visible, transfer.h), submit runs the executable, which
// submits its command buffers and waits for them. finish() has no work left to wait for and
// reports the validation layer's messages, if any (vulkan_context.h). It holds no state of its
// own, so any number of threads may use it at once; the VkQueue itself is locked by the context.
#pragma once

#include <memory>

#include "kiln/hal/queue.h"
#include "kiln/hal/vulkan/vulkan_context.h"

namespace kiln::hal::vulkan {

class VulkanQueue : public Queue {
 public:
  explicit VulkanQueue(std::shared_ptr<VulkanContext> context) : context_(std::move(context)) {}
  // Errors: a buffer of another device, a range outside the buffer, driver errors.
  Status write(const BufferRef& dst, std::span<const std::byte> src) override;
  Status read(const BufferRef& src, std::span<std::byte> dst) override;
  Status submit(Executable& executable, const RunArgs& args) override;
  Status finish() override;

 private:
  std::shared_ptr<VulkanContext> context_;
};

}  // namespace kiln::hal::vulkan
