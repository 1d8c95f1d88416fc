#include "kiln/hal/vulkan/vulkan_context.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "kiln/hal/vulkan/pipeline_cache.h"
#include "kiln/hal/vulkan/vulkan_status.h"

namespace kiln::hal::vulkan {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";
constexpr const char* kNoDriverHint =
    "no Vulkan driver found (install a GPU driver, or Debian's mesa-vulkan-drivers for the "
    "lavapipe CPU device)";

bool validation_requested() {
  const char* v = std::getenv("KILN_VULKAN_VALIDATION");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

std::string version_text(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v),
                     VK_API_VERSION_PATCH(v));
}

const char* type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

// Lower is preferred when no index is given.
int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

bool layer_available(const char* name) {
  uint32_t count = 0;
  if (vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(count);
  if (vkEnumerateInstanceLayerProperties(&count, layers.data()) != VK_SUCCESS) return false;
  return std::any_of(layers.begin(), layers.end(), [&](const VkLayerProperties& l) {
    return std::strcmp(l.layerName, name) == 0;
  });
}

StatusOr<VkInstance> create_instance(bool validation, VkDebugUtilsMessengerCreateInfoEXT* debug) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "kiln";
  app.pEngineName = "kiln";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  const char* layers[] = {kValidationLayer};
  const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  if (validation) {
    if (!layer_available(kValidationLayer)) {
      return failed_precondition(
          "KILN_VULKAN_VALIDATION=1 asks for {}, which is not installed (Debian: "
          "vulkan-validationlayers)",
          kValidationLayer);
    }
    info.enabledLayerCount = 1;
    info.ppEnabledLayerNames = layers;
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = extensions;
    info.pNext = debug;
  }
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult result = vkCreateInstance(&info, nullptr, &instance);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER) return failed_precondition("{}", kNoDriverHint);
  KILN_RETURN_IF_ERROR(vk_check(result, "vkCreateInstance"));
  return instance;
}

StatusOr<std::vector<VkPhysicalDevice>> physical_devices(VkInstance instance) {
  uint32_t count = 0;
  KILN_VK_RETURN_IF_ERROR(vkEnumeratePhysicalDevices(instance, &count, nullptr));
  std::vector<VkPhysicalDevice> devices(count);
  KILN_VK_RETURN_IF_ERROR(vkEnumeratePhysicalDevices(instance, &count, devices.data()));
  devices.resize(count);
  if (devices.empty()) return failed_precondition("{}", kNoDriverHint);
  return devices;
}

int compute_queue_family(VkPhysicalDevice device) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  // A compute-only family first (a GPU's asynchronous compute queue), else any with compute.
  for (uint32_t i = 0; i < count; ++i) {
    if ((families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
        !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
      return static_cast<int>(i);
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return static_cast<int>(i);
  }
  return -1;
}

PhysicalDeviceInfo describe(VkPhysicalDevice device, uint32_t index) {
  VkPhysicalDeviceSubgroupProperties subgroup{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  subgroup.pNext = &driver;
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(device, &props);
  VkPhysicalDeviceVulkan12Features features12{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &features12;
  vkGetPhysicalDeviceFeatures2(device, &features);
  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(device, &memory);

  const VkPhysicalDeviceLimits& limits = props.properties.limits;
  PhysicalDeviceInfo info;
  info.index = index;
  info.name = props.properties.deviceName;
  info.type = type_name(props.properties.deviceType);
  info.api_version = version_text(props.properties.apiVersion);
  info.driver = fmt::format("{} {}", driver.driverName, driver.driverInfo);
  for (uint32_t h = 0; h < memory.memoryHeapCount; ++h) {
    if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_local_bytes += memory.memoryHeaps[h].size;
  }
  info.max_storage_buffer_range = limits.maxStorageBufferRange;
  info.max_push_constants_size = limits.maxPushConstantsSize;
  info.max_shared_memory_bytes = limits.maxComputeSharedMemorySize;
  info.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) {
    info.max_workgroup_size[i] = limits.maxComputeWorkGroupSize[i];
    info.max_workgroup_count[i] = limits.maxComputeWorkGroupCount[i];
  }
  info.subgroup_size = subgroup.subgroupSize;
  info.buffer_device_address = features12.bufferDeviceAddress == VK_TRUE;
  info.storage_buffer_8bit = features12.storageBuffer8BitAccess == VK_TRUE;
  info.shader_int64 = features.features.shaderInt64 == VK_TRUE;
  if (props.properties.apiVersion < VK_API_VERSION_1_2) {
    info.unusable_reason = fmt::format("Vulkan {} (kiln needs 1.2)", info.api_version);
  } else if (!info.buffer_device_address) {
    info.unusable_reason = "no bufferDeviceAddress";
  } else if (compute_queue_family(device) < 0) {
    info.unusable_reason = "no compute queue";
  } else if (limits.maxComputeWorkGroupInvocations < 256 || limits.maxPushConstantsSize < 128) {
    info.unusable_reason = "fewer than 256 invocations per workgroup or 128 push-constant bytes";
  }
  info.usable = info.unusable_reason.empty();
  return info;
}

}  // namespace

// The process's one Vulkan instance, with the validation layer when KILN_VULKAN_VALIDATION=1 (read
// when it is created) and that layer's messages. Never destroyed: destroying an instance unloads
// the drivers, whose process-lifetime allocations then look leaked to LeakSanitizer, and devices
// created from it live as long as the process anyway.
struct ProcessInstance {
  VkInstance instance = VK_NULL_HANDLE;
  bool validation = false;
  std::mutex mutex;
  std::vector<std::string> messages;
};

namespace {

VKAPI_ATTR VkBool32 VKAPI_CALL record_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                              VkDebugUtilsMessageTypeFlagsEXT types,
                                              const VkDebugUtilsMessengerCallbackDataEXT* data,
                                              void* user) {
  auto* process = static_cast<ProcessInstance*>(user);
  std::lock_guard lock(process->mutex);
  process->messages.push_back(data != nullptr && data->pMessage != nullptr ? data->pMessage
                                                                           : "(no text)");
  return VK_FALSE;
}

// The instance, created on first use; an error (no driver, no layer) is retried on the next call.
StatusOr<ProcessInstance*> process_instance() {
  static std::mutex mutex;
  static ProcessInstance* created = nullptr;
  std::lock_guard lock(mutex);
  if (created != nullptr) return created;
  auto process = std::make_unique<ProcessInstance>();
  process->validation = validation_requested();
  VkDebugUtilsMessengerCreateInfoEXT debug{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  debug.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  debug.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  debug.pfnUserCallback = &record_message;
  debug.pUserData = process.get();
  KILN_ASSIGN_OR_RETURN(process->instance, create_instance(process->validation, &debug));
  if (process->validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(process->instance, "vkCreateDebugUtilsMessengerEXT"));
    VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
    if (create == nullptr || create(process->instance, &debug, nullptr, &messenger) != VK_SUCCESS) {
      vkDestroyInstance(process->instance, nullptr);
      return failed_precondition("the Vulkan validation layer offers no debug messenger");
    }
  }
  created = process.release();
  return created;
}

}  // namespace

StatusOr<std::vector<PhysicalDeviceInfo>> list_vulkan_devices() {
  KILN_ASSIGN_OR_RETURN(ProcessInstance * process, process_instance());
  KILN_ASSIGN_OR_RETURN(std::vector<VkPhysicalDevice> devices, physical_devices(process->instance));
  std::vector<PhysicalDeviceInfo> out;
  for (uint32_t i = 0; i < devices.size(); ++i) out.push_back(describe(devices[i], i));
  return out;
}

StatusOr<std::shared_ptr<VulkanContext>> VulkanContext::get(std::string_view selector) {
  // Contexts live as long as the process: Vulkan objects are not destroyed during static
  // destruction, when drivers may already be unloaded.
  static std::mutex mutex;
  static auto* contexts = new std::map<std::string, std::shared_ptr<VulkanContext>>();
  std::lock_guard lock(mutex);
  auto it = contexts->find(std::string(selector));
  if (it != contexts->end()) return it->second;
  std::shared_ptr<VulkanContext> context(new VulkanContext());
  KILN_RETURN_IF_ERROR(context->init(selector));
  contexts->emplace(std::string(selector), context);
  return context;
}

Status VulkanContext::init(std::string_view selector) {
  KILN_ASSIGN_OR_RETURN(process_, process_instance());
  KILN_ASSIGN_OR_RETURN(std::vector<VkPhysicalDevice> devices,
                        physical_devices(process_->instance));
  std::vector<PhysicalDeviceInfo> infos;
  for (uint32_t i = 0; i < devices.size(); ++i) infos.push_back(describe(devices[i], i));
  int chosen = -1;
  if (selector.empty()) {
    int best_rank = 1 << 20;
    for (uint32_t i = 0; i < devices.size(); ++i) {
      VkPhysicalDeviceProperties props;
      vkGetPhysicalDeviceProperties(devices[i], &props);
      if (infos[i].usable && type_rank(props.deviceType) < best_rank) {
        best_rank = type_rank(props.deviceType);
        chosen = static_cast<int>(i);
      }
    }
    if (chosen < 0) {
      return failed_precondition("no usable Vulkan device: {} ({})", infos[0].name,
                                 infos[0].unusable_reason);
    }
  } else {
    char* end = nullptr;
    const std::string text(selector);
    const long index = std::strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '\0' || index < 0) {
      return invalid_argument("vulkan:{}: expected a device index (vulkan:0, vulkan:1, ...)",
                              selector);
    }
    if (index >= static_cast<long>(devices.size())) {
      return not_found(
          "vulkan:{}: there are {} Vulkan device(s), numbered from 0 (kiln devices "
          "lists them)",
          index, devices.size());
    }
    chosen = static_cast<int>(index);
    if (!infos[chosen].usable) {
      return failed_precondition("vulkan:{} ({}) cannot run kiln: {}", index, infos[chosen].name,
                                 infos[chosen].unusable_reason);
    }
  }
  physical_ = devices[chosen];
  info_ = infos[chosen];
  queue_family_ = static_cast<uint32_t>(compute_queue_family(physical_));
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = queue_family_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan12Features features12{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  features12.bufferDeviceAddress = VK_TRUE;
  features12.storageBuffer8BitAccess = info_.storage_buffer_8bit ? VK_TRUE : VK_FALSE;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.features.shaderInt64 = info_.shader_int64 ? VK_TRUE : VK_FALSE;
  features.pNext = &features12;
  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &features;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  KILN_VK_RETURN_IF_ERROR(vkCreateDevice(physical_, &info, nullptr, &device_));
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  pipelines_ = std::make_unique<PipelineCache>(device_);
  return ok_status();
}

VulkanContext::~VulkanContext() {
  pipelines_.reset();
  if (device_ != VK_NULL_HANDLE) vkDestroyDevice(device_, nullptr);
}

int VulkanContext::memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                               VkMemoryPropertyFlags preferred) const {
  int fallback = -1;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags flags = memory_.memoryTypes[i].propertyFlags;
    if ((flags & required) != required) continue;
    if ((flags & preferred) == preferred) return static_cast<int>(i);
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  return fallback;
}

VkMemoryPropertyFlags VulkanContext::memory_flags(uint32_t type_index) const {
  return memory_.memoryTypes[type_index].propertyFlags;
}

Status VulkanContext::submit_and_wait(VkCommandBuffer commands, VkFence fence) {
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands;
  {
    std::lock_guard lock(queue_mutex_);
    KILN_VK_RETURN_IF_ERROR(vkQueueSubmit(queue_, 1, &submit, fence));
  }
  KILN_VK_RETURN_IF_ERROR(vkWaitForFences(device_, 1, &fence, VK_TRUE, UINT64_MAX));
  KILN_VK_RETURN_IF_ERROR(vkResetFences(device_, 1, &fence));
  return validation_status();
}

bool VulkanContext::validation_enabled() const { return process_->validation; }

Status VulkanContext::validation_status() const {
  if (!process_->validation) return ok_status();
  std::lock_guard lock(process_->mutex);
  const std::vector<std::string>& messages = process_->messages;
  if (messages.empty()) return ok_status();
  std::string text;
  for (size_t i = 0; i < messages.size() && i < 3; ++i) text += fmt::format("\n  {}", messages[i]);
  return internal_error("the Vulkan validation layer reported {} message(s):{}", messages.size(),
                        text);
}

}  // namespace kiln::hal::vulkan
