#include "kiln/hal/vulkan/pipeline_cache.h"

#include "kiln/hal/vulkan/shader_library.h"
#include "kiln/hal/vulkan/vulkan_status.h"

namespace kiln::hal::vulkan {

PipelineCache::~PipelineCache() {
  for (auto& [key, pipeline] : pipelines_) vkDestroyPipeline(device_, pipeline->pipeline, nullptr);
  for (auto& [name, module] : modules_) vkDestroyShaderModule(device_, module, nullptr);
  if (vk_cache_ != VK_NULL_HANDLE) vkDestroyPipelineCache(device_, vk_cache_, nullptr);
  if (layout_ != VK_NULL_HANDLE) vkDestroyPipelineLayout(device_, layout_, nullptr);
}

Status PipelineCache::ensure_layout() {
  if (layout_ != VK_NULL_HANDLE) return ok_status();
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes};
  VkPipelineLayoutCreateInfo info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  info.pushConstantRangeCount = 1;
  info.pPushConstantRanges = &range;
  KILN_VK_RETURN_IF_ERROR(vkCreatePipelineLayout(device_, &info, nullptr, &layout_));
  VkPipelineCacheCreateInfo cache{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  KILN_VK_RETURN_IF_ERROR(vkCreatePipelineCache(device_, &cache, nullptr, &vk_cache_));
  return ok_status();
}

StatusOr<VkPipelineLayout> PipelineCache::layout() {
  std::lock_guard lock(mutex_);
  KILN_RETURN_IF_ERROR(ensure_layout());
  return layout_;
}

size_t PipelineCache::size() const {
  std::lock_guard lock(mutex_);
  return pipelines_.size();
}

StatusOr<const Pipeline*> PipelineCache::get(std::string_view shader,
                                             std::vector<uint32_t> specialization) {
  std::lock_guard lock(mutex_);
  auto key = std::make_pair(std::string(shader), std::move(specialization));
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second.get();
  KILN_RETURN_IF_ERROR(ensure_layout());

  auto module_it = modules_.find(shader);
  if (module_it == modules_.end()) {
    KILN_ASSIGN_OR_RETURN(std::span<const uint32_t> words, find_shader(shader));
    VkShaderModuleCreateInfo info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    info.codeSize = words.size_bytes();
    info.pCode = words.data();
    VkShaderModule module = VK_NULL_HANDLE;
    KILN_VK_RETURN_IF_ERROR(vkCreateShaderModule(device_, &info, nullptr, &module));
    module_it = modules_.emplace(std::string(shader), module).first;
  }

  const std::vector<uint32_t>& values = key.second;
  std::vector<VkSpecializationMapEntry> entries;
  for (uint32_t i = 0; i < values.size(); ++i) {
    entries.push_back({i, static_cast<uint32_t>(i * sizeof(uint32_t)), sizeof(uint32_t)});
  }
  VkSpecializationInfo spec{};
  spec.mapEntryCount = static_cast<uint32_t>(entries.size());
  spec.pMapEntries = entries.data();
  spec.dataSize = values.size() * sizeof(uint32_t);
  spec.pData = values.data();

  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module_it->second;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = values.empty() ? nullptr : &spec;
  info.layout = layout_;
  auto pipeline = std::make_unique<Pipeline>();
  pipeline->shader = key.first;
  pipeline->specialization = values;
  KILN_VK_RETURN_IF_ERROR(
      vkCreateComputePipelines(device_, vk_cache_, 1, &info, nullptr, &pipeline->pipeline));
  const Pipeline* result = pipeline.get();
  pipelines_.emplace(std::move(key), std::move(pipeline));
  return result;
}

}  // namespace kiln::hal::vulkan
