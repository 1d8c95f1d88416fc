// Recently freed Vulkan buffers, kept for the next allocation of the same size and memory type
// (VulkanAllocator). A pooled buffer keeps its device address, which is what lets a prepared
// plan replay its recorded command buffers when the runtime allocates a run's inputs, outputs and
// arena anew for every call. Bounded: at most kMaxBuffers buffers and kMaxBytes bytes, the oldest
// freed first. Thread-safe. Buffers it holds are freed with it; buffers still in use keep it
// alive (they hold a shared_ptr) and are freed when they go.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

#include "kiln/hal/buffer.h"
#include "kiln/hal/vulkan/vulkan_buffer.h"
#include "kiln/hal/vulkan/vulkan_context.h"

namespace kiln::hal::vulkan {

class BufferPool {
 public:
  static constexpr size_t kMaxBuffers = 32;
  static constexpr size_t kMaxBytes = size_t{1} << 30;

  explicit BufferPool(VulkanContext& context) : context_(context) {}
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A pooled allocation of exactly `bytes` bytes asked for as `wanted`, removed from the pool;
  // nullopt when there is none.
  std::optional<Allocation> take(size_t bytes, MemoryType wanted);
  // Keeps `allocation` for a later take(), freeing the oldest beyond the bounds.
  void give_back(size_t bytes, MemoryType wanted, const Allocation& allocation);

  size_t buffers() const;
  size_t bytes() const;

 private:
  struct Entry {
    size_t bytes;
    MemoryType wanted;
    Allocation allocation;
  };

  VulkanContext& context_;
  mutable std::mutex mutex_;
  std::deque<Entry> entries_;  // oldest first
  size_t total_bytes_ = 0;
};

}  // namespace kiln::hal::vulkan
