#include "kiln/hal/vulkan/buffer_pool.h"

#include <vector>

namespace kiln::hal::vulkan {

BufferPool::~BufferPool() {
  for (const Entry& entry : entries_) free_buffer(context_, entry.allocation);
}

std::optional<Allocation> BufferPool::take(size_t bytes, MemoryType wanted) {
  std::lock_guard lock(mutex_);
  // The oldest match first: a run frees its buffers in the order it allocated them (the
  // runtime's bindings, then its arena), so two buffers of one size (an input and an output)
  // come back to the same roles on the next call.
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->bytes != bytes || it->wanted != wanted) continue;
    Allocation allocation = it->allocation;
    total_bytes_ -= it->bytes;
    entries_.erase(it);
    return allocation;
  }
  return std::nullopt;
}

void BufferPool::give_back(size_t bytes, MemoryType wanted, const Allocation& allocation) {
  std::vector<Allocation> evicted;
  {
    std::lock_guard lock(mutex_);
    entries_.push_back({bytes, wanted, allocation});
    total_bytes_ += bytes;
    while (entries_.size() > kMaxBuffers || total_bytes_ > kMaxBytes) {
      evicted.push_back(entries_.front().allocation);
      total_bytes_ -= entries_.front().bytes;
      entries_.pop_front();
    }
  }
  for (const Allocation& old : evicted) free_buffer(context_, old);
}

size_t BufferPool::buffers() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

size_t BufferPool::bytes() const {
  std::lock_guard lock(mutex_);
  return total_bytes_;
}

}  // namespace kiln::hal::vulkan
