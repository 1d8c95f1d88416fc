#include "kiln/hal/vulkan/constant_cache.h"

#include "kiln/hal/vulkan/transfer.h"

namespace kiln::hal::vulkan {

StatusOr<std::shared_ptr<const VulkanBuffer>> ConstantCache::upload(
    std::span<const std::byte> bytes) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<VulkanBuffer> buffer,
                        VulkanBuffer::create(context_, bytes.size(), MemoryType::kDeviceLocal));
  KILN_RETURN_IF_ERROR(write_buffer(context_, *buffer, 0, bytes));
  return std::shared_ptr<const VulkanBuffer>(std::move(buffer));
}

StatusOr<std::shared_ptr<const VulkanBuffer>> ConstantCache::get(std::span<const std::byte> bytes) {
  const auto key = std::make_pair(bytes.data(), bytes.size());
  std::lock_guard lock(mutex_);
  if (auto it = copies_.find(key); it != copies_.end()) {
    if (std::shared_ptr<const VulkanBuffer> alive = it->second.lock()) return alive;
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const VulkanBuffer> copy, upload(bytes));
  copies_[key] = copy;
  return copy;
}

size_t ConstantCache::size() const {
  std::lock_guard lock(mutex_);
  size_t alive = 0;
  for (const auto& [key, copy] : copies_) alive += copy.expired() ? 0 : 1;
  return alive;
}

}  // namespace kiln::hal::vulkan
