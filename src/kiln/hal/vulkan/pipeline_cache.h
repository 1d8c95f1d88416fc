// Compute pipelines, created once per (shader, specialization constants) and kept for the device's
// life: a pipeline never depends on a tensor's sizes, which every kernel reads from push constants,
// so one pipeline serves every batch and image size (invariant 1). Specialization constants select
// a shader's variant (the unary op, the element size), chosen by kernels from concrete shapes and
// device limits only.
//
// Every pipeline has the same layout: no descriptor sets and kPushConstantBytes of push
// constants, which hold the 64-bit device addresses of the kernel's operands followed by its
// 32-bit parameters (kernel_builder.h). Thread-safe.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::hal::vulkan {

inline constexpr uint32_t kPushConstantBytes = 128;

struct Pipeline {
  std::string shader;
  std::vector<uint32_t> specialization;
  VkPipeline pipeline = VK_NULL_HANDLE;
};

class PipelineCache {
 public:
  explicit PipelineCache(VkDevice device) : device_(device) {}
  ~PipelineCache();
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  // The pipeline of `shader` with specialization constants 0..n-1 set to `specialization`
  // (created on first use). Errors: an unknown shader, a driver error.
  StatusOr<const Pipeline*> get(std::string_view shader, std::vector<uint32_t> specialization);
  // The layout every pipeline shares.
  StatusOr<VkPipelineLayout> layout();
  size_t size() const;

 private:
  Status ensure_layout();

  VkDevice device_;
  mutable std::mutex mutex_;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipelineCache vk_cache_ = VK_NULL_HANDLE;
  std::map<std::string, VkShaderModule, std::less<>> modules_;
  std::map<std::pair<std::string, std::vector<uint32_t>>, std::unique_ptr<Pipeline>> pipelines_;
};

}  // namespace kiln::hal::vulkan
