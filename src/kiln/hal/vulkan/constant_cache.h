// Device copies of a program's constants (weights), uploaded once and shared by every plan of a
// device that reads the same host bytes, as the CPU backend's weight cache is. A copy lives as
// long as some executable holds it. Thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <utility>

#include "kiln/base/status.h"
#include "kiln/hal/vulkan/vulkan_buffer.h"
#include "kiln/hal/vulkan/vulkan_context.h"

namespace kiln::hal::vulkan {

class ConstantCache {
 public:
  explicit ConstantCache(VulkanContext& context) : context_(context) {}

  // The device copy of `bytes` (keyed by their address and size: the host bytes must not change
  // while the program that holds them lives, which module constants never do).
  StatusOr<std::shared_ptr<const VulkanBuffer>> get(std::span<const std::byte> bytes);
  // A device copy of `bytes` that is not shared (kernels' reordered weights).
  StatusOr<std::shared_ptr<const VulkanBuffer>> upload(std::span<const std::byte> bytes);
  // Copies alive now.
  size_t size() const;

 private:
  VulkanContext& context_;
  mutable std::mutex mutex_;
  std::map<std::pair<const std::byte*, size_t>, std::weak_ptr<const VulkanBuffer>> copies_;
};

}  // namespace kiln::hal::vulkan
