#include "kiln/hal/vulkan/vulkan_buffer.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "kiln/hal/vulkan/buffer_pool.h"
#include "kiln/hal/vulkan/vulkan_status.h"

namespace kiln::hal::vulkan {
namespace {

std::atomic<bool> device_memory_hidden{false};

}  // namespace

void set_device_memory_hidden_for_testing(bool hidden) { device_memory_hidden.store(hidden); }

StatusOr<Allocation> allocate_buffer(VulkanContext& context, size_t bytes, MemoryType wanted) {
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
  Allocation allocation;
  allocation.buffer = buffer;
  allocation.memory = memory;
  allocation.mapped = static_cast<std::byte*>(mapped);
  if (got & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
    allocation.type = allocation.type | MemoryType::kDeviceLocal;
  if (host_visible) allocation.type = allocation.type | MemoryType::kHostVisible;
  VkBufferDeviceAddressInfo address{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  address.buffer = buffer;
  allocation.address = vkGetBufferDeviceAddress(device, &address);
  return allocation;
}

void free_buffer(VulkanContext& context, const Allocation& allocation) {
  VkDevice device = context.device();
  if (allocation.mapped != nullptr) vkUnmapMemory(device, allocation.memory);
  vkDestroyBuffer(device, allocation.buffer, nullptr);
  vkFreeMemory(device, allocation.memory, nullptr);
}

StatusOr<std::unique_ptr<VulkanBuffer>> VulkanBuffer::create(VulkanContext& context, size_t bytes,
                                                             MemoryType wanted) {
  KILN_ASSIGN_OR_RETURN(Allocation allocation, allocate_buffer(context, bytes, wanted));
  return std::make_unique<VulkanBuffer>(context, bytes, wanted, allocation, nullptr);
}

VulkanBuffer::VulkanBuffer(VulkanContext& context, size_t bytes, MemoryType wanted,
                           Allocation allocation, std::shared_ptr<BufferPool> pool)
    : Buffer(bytes, allocation.type, allocation.mapped),
      context_(context),
      wanted_(wanted),
      allocation_(allocation),
      pool_(std::move(pool)) {}

VulkanBuffer::~VulkanBuffer() {
  if (pool_ != nullptr) {
    pool_->give_back(size(), wanted_, allocation_);
  } else {
    free_buffer(context_, allocation_);
  }
}

const VulkanBuffer* as_vulkan(const BufferRef& ref) {
  return dynamic_cast<const VulkanBuffer*>(ref.buffer);
}

VulkanAllocator::VulkanAllocator(VulkanContext& context)
    : context_(context), pool_(std::make_shared<BufferPool>(context)) {}

VulkanAllocator::~VulkanAllocator() = default;

StatusOr<std::unique_ptr<Buffer>> VulkanAllocator::allocate(size_t bytes, MemoryType wanted) {
  std::optional<Allocation> pooled = pool_->take(bytes, wanted);
  if (!pooled) {
    KILN_ASSIGN_OR_RETURN(Allocation fresh, allocate_buffer(context_, bytes, wanted));
    pooled = fresh;
  }
  return std::unique_ptr<Buffer>(
      std::make_unique<VulkanBuffer>(context_, bytes, wanted, *pooled, pool_));
}

}  // namespace kiln::hal::vulkan
