#include "kiln/hal/vulkan/vulkan_buffer.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "kiln/hal/vulkan/vulkan_status.h"

namespace kiln::hal::vulkan {
namespace {

std::atomic<bool> device_memory_hidden{false};

}  // namespace

void set_device_memory_hidden_for_testing(bool hidden) { device_memory_hidden.store(hidden); }

StatusOr<std::unique_ptr<VulkanBuffer>> VulkanBuffer::create(VulkanContext& context, size_t bytes,
                                                             MemoryType wanted) {
  VkDevice device = context.device();
  // Vulkan has no empty buffers; a 0-byte kiln buffer holds 64 bytes no one reads.
  const VkDeviceSize vk_bytes = std::max<VkDeviceSize>(bytes, 64);
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = vk_bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  KILN_VK_RETURN_IF_ERROR(vkCreateBuffer(device, &info, nullptr, &buffer));
  VkMemoryRequirements needs;
  vkGetBufferMemoryRequirements(device, buffer, &needs);

  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  VkMemoryPropertyFlags required = 0;
  VkMemoryPropertyFlags preferred = 0;
  if (has_memory_type(wanted, MemoryType::kDeviceLocal)) {
    required |= VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    preferred |= VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | host;
  }
  if (has_memory_type(wanted, MemoryType::kHostVisible)) {
    required |= host;
    preferred |= host;
  }
  const int type = context.memory_type(needs.memoryTypeBits, required, preferred);
  if (type < 0) {
    vkDestroyBuffer(device, buffer, nullptr);
    return invalid_argument(
        "the Vulkan device has no memory type that is {}",
        has_memory_type(wanted, MemoryType::kDeviceLocalHostVisible)
            ? "device-local and host-visible"
            : (has_memory_type(wanted, MemoryType::kHostVisible) ? "host-visible"
                                                                 : "device-local"));
  }
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.pNext = &flags;
  alloc.allocationSize = needs.size;
  alloc.memoryTypeIndex = static_cast<uint32_t>(type);
  VkDeviceMemory memory = VK_NULL_HANDLE;
  if (Status s = vk_check(vkAllocateMemory(device, &alloc, nullptr, &memory), "vkAllocateMemory");
      !s.ok()) {
    vkDestroyBuffer(device, buffer, nullptr);
    return std::move(s).with_note(fmt::format("allocating a {}-byte Vulkan buffer", bytes));
  }
  void* mapped = nullptr;
  const VkMemoryPropertyFlags got = context.memory_flags(static_cast<uint32_t>(type));
  // A buffer asked for as device-local only is left unmapped when the tests simulate a discrete
  // GPU's memory (set_device_memory_hidden_for_testing).
  const bool hidden =
      device_memory_hidden.load() && !has_memory_type(wanted, MemoryType::kHostVisible);
  const bool host_visible = (got & host) == host && !hidden;
  Status bound = vk_check(vkBindBufferMemory(device, buffer, memory, 0), "vkBindBufferMemory");
  if (bound.ok() && host_visible) {
    bound = vk_check(vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory");
  }
  if (!bound.ok()) {
    vkFreeMemory(device, memory, nullptr);
    vkDestroyBuffer(device, buffer, nullptr);
    return bound;
  }
  MemoryType kind = MemoryType::kNone;
  if (got & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) kind = kind | MemoryType::kDeviceLocal;
  if (host_visible) kind = kind | MemoryType::kHostVisible;
  std::unique_ptr<VulkanBuffer> result(
      new VulkanBuffer(context, bytes, kind, static_cast<std::byte*>(mapped)));
  result->buffer_ = buffer;
  result->memory_ = memory;
  VkBufferDeviceAddressInfo address{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  address.buffer = buffer;
  result->address_ = vkGetBufferDeviceAddress(device, &address);
  return result;
}

VulkanBuffer::~VulkanBuffer() {
  VkDevice device = context_.device();
  if (host_data() != nullptr) vkUnmapMemory(device, memory_);
  vkDestroyBuffer(device, buffer_, nullptr);
  vkFreeMemory(device, memory_, nullptr);
}

const VulkanBuffer* as_vulkan(const BufferRef& ref) {
  return dynamic_cast<const VulkanBuffer*>(ref.buffer);
}

StatusOr<std::unique_ptr<Buffer>> VulkanAllocator::allocate(size_t bytes, MemoryType wanted) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<VulkanBuffer> buffer,
                        VulkanBuffer::create(context_, bytes, wanted));
  return std::unique_ptr<Buffer>(std::move(buffer));
}

}  // namespace kiln::hal::vulkan
