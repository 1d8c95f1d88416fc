// The Vulkan instance and one logical device per physical device, shared by every kiln device
// object that selects it: creating them (and compiling pipelines, pipeline_cache.h) is slow, so a
// process does it once per physical device and keeps them for its life.
//
// Selection (`--device=vulkan`, `--device=vulkan:N`): N is the position in the Vulkan loader's
// list (`kiln devices` shows it); without N the first discrete GPU, else integrated, else virtual,
// else CPU device (lavapipe). A device must offer Vulkan 1.2, a compute queue and
// bufferDeviceAddress (kiln's shaders address buffers by pointer, so no descriptor range limit
// applies: tensors larger than maxStorageBufferRange work).
//
// One VkInstance serves the process (listing and every context) and is never destroyed.
// Validation: with KILN_VULKAN_VALIDATION=1 in the environment when it is created, the instance
// enables the Khronos validation layer and records every warning or error it reports; from the
// first such message on,
// every prepare() and Queue::finish() of the process fails with the messages (tests and CI run
// this way, so a validation message fails them). Without the layer installed that setting is an
// error, never silently off.
//
// Threads: the context is immutable after creation except for the VkQueue, which submit() guards
// with a mutex; the validation log has its own.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::hal::vulkan {

class PipelineCache;
struct ProcessInstance;

// What `kiln devices` lists of one physical device, and what kernels size themselves by.
struct PhysicalDeviceInfo {
  uint32_t index = 0;  // position in the loader's list: --device=vulkan:N
  std::string name;
  std::string type;         // "discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other"
  std::string api_version;  // "1.3.230"
  std::string driver;       // driver name and info, when the device reports them
  uint64_t device_local_bytes = 0;
  uint64_t max_storage_buffer_range = 0;
  uint32_t max_push_constants_size = 0;
  uint32_t max_shared_memory_bytes = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_size[3] = {0, 0, 0};
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint32_t subgroup_size = 0;
  bool buffer_device_address = false;
  // Optional features kiln enables when offered; kernels needing one refuse (Unimplemented)
  // without it. 8-bit storage: bool and u8 tensors (1 byte per element). shaderInt64: i64 math.
  bool storage_buffer_8bit = false;
  bool shader_int64 = false;
  bool usable = false;          // offers everything kiln needs
  std::string unusable_reason;  // why not, when !usable
};

// Every physical device the Vulkan loader reports. Errors: no loader or no driver (the message
// says which package provides one).
StatusOr<std::vector<PhysicalDeviceInfo>> list_vulkan_devices();

class VulkanContext {
 public:
  // The context of the selected device (see above), created on first use. `selector` is "" or a
  // device index ("1"). Errors name the selector and why the device cannot serve (absent, no
  // compute queue, no bufferDeviceAddress).
  static StatusOr<std::shared_ptr<VulkanContext>> get(std::string_view selector);

  ~VulkanContext();
  VulkanContext(const VulkanContext&) = delete;
  VulkanContext& operator=(const VulkanContext&) = delete;

  VkDevice device() const { return device_; }
  VkPhysicalDevice physical_device() const { return physical_; }
  const PhysicalDeviceInfo& info() const { return info_; }
  uint32_t queue_family() const { return queue_family_; }
  PipelineCache& pipelines() { return *pipelines_; }

  // The index of a memory type allowed by `type_bits` that has every flag of `required`,
  // preferring one that also has `preferred`; -1 when none.
  int memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                  VkMemoryPropertyFlags preferred) const;
  VkMemoryPropertyFlags memory_flags(uint32_t type_index) const;

  // Submits `commands` on the device's queue and waits for `fence` (reset before returning).
  Status submit_and_wait(VkCommandBuffer commands, VkFence fence);

  // OK while the validation layer has reported nothing (or is off); else an error quoting the
  // first messages.
  Status validation_status() const;
  bool validation_enabled() const;

 private:
  VulkanContext() = default;
  Status init(std::string_view selector);

  ProcessInstance* process_ = nullptr;  // the process's instance and validation log
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  PhysicalDeviceInfo info_;
  VkPhysicalDeviceMemoryProperties memory_{};
  std::unique_ptr<PipelineCache> pipelines_;
  std::mutex queue_mutex_;
};

}  // namespace kiln::hal::vulkan
