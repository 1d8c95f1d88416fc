// Device memory of the Vulkan backend: one VkBuffer with its own VkDeviceMemory per kiln Buffer,
// usable as a storage buffer addressed by pointer (bufferDeviceAddress) and as a transfer source
// and destination.
//
// Memory types: a buffer asked for as device-local gets device-local memory, host-visible too
// when the device has a type with both (integrated GPUs, lavapipe, resizable-BAR discrete
// GPUs): its bytes are then mapped for the buffer's life and Buffer::host_data() is set, so
// transfers and the CPU fallback read them in place. Otherwise the host reaches them through
// staging copies (vulkan_queue.h). Host-visible memory is always coherent here.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>

#include "kiln/hal/allocator.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/vulkan/vulkan_context.h"

namespace kiln::hal::vulkan {

class VulkanBuffer : public Buffer {
 public:
  // Errors: no memory type with what `wanted` asks for; out of device memory (naming the size).
  static StatusOr<std::unique_ptr<VulkanBuffer>> create(VulkanContext& context, size_t bytes,
                                                        MemoryType wanted);
  ~VulkanBuffer() override;

  VkBuffer handle() const { return buffer_; }
  // The device address of byte 0 (for shaders' buffer references).
  VkDeviceAddress address() const { return address_; }

 private:
  VulkanBuffer(VulkanContext& context, size_t size, MemoryType type, std::byte* host)
      : Buffer(size, type, host), context_(context) {}

  VulkanContext& context_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceAddress address_ = 0;
};

// The VulkanBuffer behind `ref`, or null when the buffer is not one (a host buffer of another
// device).
const VulkanBuffer* as_vulkan(const BufferRef& ref);

// Tests only, process-wide: buffers asked for as device-local are not mapped even where their
// memory is host-visible (lavapipe), as on a discrete GPU, so that the staging transfers and the
// CPU fallback's copies run on machines without one.
void set_device_memory_hidden_for_testing(bool hidden);

class VulkanAllocator : public Allocator {
 public:
  explicit VulkanAllocator(VulkanContext& context) : context_(context) {}
  StatusOr<std::unique_ptr<Buffer>> allocate(size_t bytes, MemoryType wanted) override;

 private:
  VulkanContext& context_;
};

}  // namespace kiln::hal::vulkan
