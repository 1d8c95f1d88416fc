// Host <-> device copies for the Vulkan backend: a direct memcpy into a host-visible buffer, else
// through a host-visible staging buffer and a copy command, submitted and waited for. Used by the
// queue (Queue::write/read), the constant cache and the CPU fallback. Thread-safe: each call uses
// its own command pool and fence.
#pragma once

#include <cstddef>
#include <span>

#include "kiln/base/status.h"
#include "kiln/hal/vulkan/vulkan_buffer.h"
#include "kiln/hal/vulkan/vulkan_context.h"

namespace kiln::hal::vulkan {

// Copies `src` into `dst` at `offset`. Errors: the range is outside the buffer; driver errors.
Status write_buffer(VulkanContext& context, const VulkanBuffer& dst, size_t offset,
                    std::span<const std::byte> src);
// Copies bytes of `src` from `offset` into `dst`. Errors as write_buffer.
Status read_buffer(VulkanContext& context, const VulkanBuffer& src, size_t offset,
                   std::span<std::byte> dst);

}  // namespace kiln::hal::vulkan
