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

class BufferPool;

// The Vulkan objects behind one buffer.
struct Allocation {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceAddress address = 0;
  std::byte* mapped = nullptr;  // while host-visible
  MemoryType type = MemoryType::kNone;
};

class VulkanBuffer : public Buffer {
 public:
  // Errors: no memory type with what `wanted` asks for; out of device memory (naming the size).
  static StatusOr<std::unique_ptr<VulkanBuffer>> create(VulkanContext& context, size_t bytes,
                                                        MemoryType wanted);
  // A buffer over `allocation`, which goes back to `pool` (when set) instead of being freed.
  VulkanBuffer(VulkanContext& context, size_t bytes, MemoryType wanted, Allocation allocation,
               std::shared_ptr<BufferPool> pool);
  ~VulkanBuffer() override;

  VkBuffer handle() const { return allocation_.buffer; }
  // The device address of byte 0 (for shaders' buffer references).
  VkDeviceAddress address() const { return allocation_.address; }

 private:
  VulkanContext& context_;
  MemoryType wanted_;
  Allocation allocation_;
  std::shared_ptr<BufferPool> pool_;
};

// Creates the objects of a `bytes`-byte buffer with what `wanted` asks for. Errors as
// VulkanBuffer::create.
StatusOr<Allocation> allocate_buffer(VulkanContext& context, size_t bytes, MemoryType wanted);
void free_buffer(VulkanContext& context, const Allocation& allocation);

// The VulkanBuffer behind `ref`, or null when the buffer is not one (a host buffer of another
// device).
const VulkanBuffer* as_vulkan(const BufferRef& ref);

// Tests only, process-wide: buffers asked for as device-local are not mapped even where their
// memory is host-visible (lavapipe), as on a discrete GPU, so that the staging transfers and the
// CPU fallback's copies run on machines without one.
void set_device_memory_hidden_for_testing(bool hidden);

// The device's allocator. Buffers it gives out go back to a pool of recently freed ones when
// destroyed (buffer_pool.h), so that a run's inputs, outputs and arena, allocated anew for every
// call by the runtime, come back at the same device addresses: a prepared plan's recorded
// command buffers then replay without re-recording, and no call pays for vkAllocateMemory.
class VulkanAllocator : public Allocator {
 public:
  explicit VulkanAllocator(VulkanContext& context);
  ~VulkanAllocator() override;
  StatusOr<std::unique_ptr<Buffer>> allocate(size_t bytes, MemoryType wanted) override;
  const BufferPool& pool() const { return *pool_; }

 private:
  VulkanContext& context_;
  std::shared_ptr<BufferPool> pool_;
};

}  // namespace kiln::hal::vulkan
