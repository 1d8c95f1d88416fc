#include "kiln/hal/vulkan/vulkan_executable.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "kiln/hal/vulkan/one_shot_commands.h"
#include "kiln/hal/vulkan/transfer.h"
#include "kiln/hal/vulkan/vulkan_buffer.h"
#include "kiln/hal/vulkan/vulkan_status.h"

namespace kiln::hal::vulkan {
namespace {

VkDeviceAddress address_of(const BufferRef& ref) {
  const VulkanBuffer* buffer = as_vulkan(ref);
  return buffer == nullptr ? 0 : buffer->address() + ref.offset;
}

struct Resolved {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceAddress address = 0;
  size_t offset = 0;
};

Resolved resolve(const Operand& operand, std::span<const BufferRef> values) {
  if (operand.constant) {
    return {operand.constant->handle(), operand.constant->address() + operand.offset,
            operand.offset};
  }
  const BufferRef& ref = values[operand.value];
  const VulkanBuffer* buffer = as_vulkan(ref);
  if (buffer == nullptr) return {};
  return {buffer->handle(), buffer->address() + ref.offset + operand.offset,
          ref.offset + operand.offset};
}

void barrier(VkCommandBuffer commands) {
  VkMemoryBarrier memory{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  memory.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  memory.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(commands, stages, stages, 0, 1, &memory, 0, nullptr, 0, nullptr);
}

}  // namespace

StatusOr<std::unique_ptr<VulkanExecutable>> VulkanExecutable::create(
    std::shared_ptr<VulkanContext> context, const ProgramSpec& spec, std::vector<GpuDispatch> gpu,
    std::vector<DispatchPlacement> placements, std::vector<Segment> segments) {
  std::unique_ptr<VulkanExecutable> exe(new VulkanExecutable(std::move(context)));
  exe->values_ = spec.values;
  for (ValueSpec& v : exe->values_) v.constant = nullptr;
  exe->dispatches_ = spec.dispatches;
  for (DispatchSpec& d : exe->dispatches_) d.attributes = nullptr;
  exe->gpu_ = std::move(gpu);
  exe->placements_ = std::move(placements);
  exe->segments_ = std::move(segments);
  VkDevice device = exe->context_->device();
  KILN_ASSIGN_OR_RETURN(exe->layout_, exe->context_->pipelines().layout());
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = exe->context_->queue_family();
  KILN_VK_RETURN_IF_ERROR(vkCreateCommandPool(device, &pool, nullptr, &exe->pool_));
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  KILN_VK_RETURN_IF_ERROR(vkCreateFence(device, &fence, nullptr, &exe->fence_));
  for (Segment& segment : exe->segments_) {
    if (segment.host) continue;
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = exe->pool_;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    KILN_VK_RETURN_IF_ERROR(vkAllocateCommandBuffers(device, &alloc, &segment.commands));
  }
  return exe;
}

VulkanExecutable::~VulkanExecutable() {
  VkDevice device = context_->device();
  if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device, fence_, nullptr);
  if (pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device, pool_, nullptr);
}

size_t VulkanExecutable::storage_bytes(int32_t value) const {
  if (value < 0 || static_cast<size_t>(value) >= values_.size()) return 0;
  const ValueSpec& v = values_[value];
  return v.role == ValueRole::kIntermediate ? plain_bytes(v) : 0;
}

Status VulkanExecutable::check_bindings(const RunArgs& args) const {
  if (args.values.size() != values_.size()) {
    return invalid_argument("run: got {} value bindings, the program has {} values",
                            args.values.size(), values_.size());
  }
  for (size_t v = 0; v < values_.size(); ++v) {
    const ValueSpec& value = values_[v];
    if (value.role == ValueRole::kConstant) continue;
    const size_t bytes = plain_bytes(value);
    if (bytes == 0) continue;
    const BufferRef& ref = args.values[v];
    if (as_vulkan(ref) == nullptr) {
      return invalid_argument("run: {} '{}' is not bound to a buffer of the Vulkan device",
                              value_role_name(value.role), value.name);
    }
    if (ref.offset > ref.buffer->size() || bytes > ref.buffer->size() - ref.offset) {
      return invalid_argument("run: {} '{}' needs {} bytes, its buffer has {} at offset {}",
                              value_role_name(value.role), value.name, bytes, ref.buffer->size(),
                              ref.offset);
    }
  }
  return ok_status();
}

Status VulkanExecutable::record(VkCommandBuffer commands, std::span<const int32_t> dispatches,
                                std::span<const BufferRef> values) const {
  bool first = true;
  for (int32_t d : dispatches) {
    for (const Command& command : gpu_[d].commands) {
      if (!first) barrier(commands);
      first = false;
      if (const auto* launch = std::get_if<Launch>(&command)) {
        std::byte push[kPushConstantBytes] = {};
        size_t at = 0;
        for (const Operand& operand : launch->operands) {
          const VkDeviceAddress address = resolve(operand, values).address;
          std::memcpy(push + at, &address, sizeof(address));
          at += sizeof(address);
        }
        std::memcpy(push + at, launch->params.data(), launch->params.size() * sizeof(uint32_t));
        at += launch->params.size() * sizeof(uint32_t);
        vkCmdBindPipeline(commands, VK_PIPELINE_BIND_POINT_COMPUTE, launch->pipeline->pipeline);
        vkCmdPushConstants(commands, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           static_cast<uint32_t>(at), push);
        vkCmdDispatch(commands, launch->groups[0], launch->groups[1], launch->groups[2]);
      } else {
        const auto& copy = std::get<CopyCommand>(command);
        const Resolved src = resolve(copy.src, values);
        const Resolved dst = resolve(copy.dst, values);
        VkBufferCopy region{src.offset, dst.offset, copy.bytes};
        vkCmdCopyBuffer(commands, src.buffer, dst.buffer, 1, &region);
      }
    }
  }
  return ok_status();
}

Status VulkanExecutable::run(const RunArgs& args) {
  KILN_RETURN_IF_ERROR(check_bindings(args));
  if (args.observer != nullptr) return run_observed(args);
  std::vector<VkDeviceAddress> addresses(values_.size());
  for (size_t v = 0; v < values_.size(); ++v) addresses[v] = address_of(args.values[v]);
  if (addresses != recorded_addresses_) {
    for (Segment& segment : segments_) segment.recorded = false;
    recorded_addresses_ = std::move(addresses);
  }
  for (Segment& segment : segments_) {
    if (segment.host) {
      KILN_RETURN_IF_ERROR(segment.host->run(*context_, args.values, nullptr));
      continue;
    }
    if (!segment.recorded) {
      KILN_VK_RETURN_IF_ERROR(vkResetCommandBuffer(segment.commands, 0));
      VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
      KILN_VK_RETURN_IF_ERROR(vkBeginCommandBuffer(segment.commands, &begin));
      KILN_RETURN_IF_ERROR(record(segment.commands, segment.dispatches, args.values));
      KILN_VK_RETURN_IF_ERROR(vkEndCommandBuffer(segment.commands));
      segment.recorded = true;
      ++recordings_;
    }
    KILN_RETURN_IF_ERROR(context_->submit_and_wait(segment.commands, fence_));
    KILN_RETURN_IF_ERROR(check_errors(segment.dispatches));
  }
  return ok_status();
}

Status VulkanExecutable::check_errors(std::span<const int32_t> dispatches) const {
  for (int32_t d : dispatches) {
    for (const RunCheck& check : gpu_[d].checks) {
      std::vector<uint32_t> words(check.words);
      const std::span<std::byte> bytes(reinterpret_cast<std::byte*>(words.data()),
                                       words.size() * sizeof(uint32_t));
      KILN_RETURN_IF_ERROR(read_buffer(*context_, *check.flag, 0, bytes));
      if (words[0] == 0) continue;
      const std::vector<std::byte> zeros(bytes.size());
      KILN_RETURN_IF_ERROR(write_buffer(*context_, *check.flag, 0, zeros));
      Status error = check.error(words);
      if (!error.ok()) {
        return std::move(error).with_note(fmt::format("in dispatch '{}'", dispatches_[d].name));
      }
    }
  }
  return ok_status();
}

Status VulkanExecutable::run_observed(const RunArgs& args) {
  RunObserver& observer = *args.observer;
  for (Segment& segment : segments_) {
    if (segment.host) {
      KILN_RETURN_IF_ERROR(segment.host->run(*context_, args.values, &observer));
      continue;
    }
    for (int32_t d : segment.dispatches) {
      const DispatchSpec& dispatch = dispatches_[d];
      const bool wants = observer.wants_outputs(d);
      const auto start = std::chrono::steady_clock::now();
      KILN_ASSIGN_OR_RETURN(OneShotCommands commands, OneShotCommands::begin(*context_));
      KILN_RETURN_IF_ERROR(record(commands.buffer(), std::span(&d, 1), args.values));
      KILN_RETURN_IF_ERROR(commands.submit_and_wait());
      KILN_RETURN_IF_ERROR(check_errors(std::span(&d, 1)));
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      std::vector<Tensor> outputs;
      if (wants) {
        for (int32_t v : dispatch.outputs) {
          KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(values_[v].dtype, values_[v].shape));
          const BufferRef& ref = args.values[v];
          if (t.byte_size() > 0) {
            KILN_RETURN_IF_ERROR(read_buffer(*context_, *as_vulkan(ref), ref.offset,
                                             std::span(t.mutable_data(), t.byte_size())));
          }
          outputs.push_back(std::move(t));
        }
      }
      Status observed = observer.after_dispatch(d, ms, outputs);
      if (!observed.ok())
        return std::move(observed).with_note(fmt::format("after dispatch '{}'", dispatch.name));
    }
  }
  return ok_status();
}

size_t VulkanExecutable::memory_bytes() const {
  size_t bytes = sizeof(*this) + values_.size() * sizeof(ValueSpec) +
                 dispatches_.size() * sizeof(DispatchSpec);
  for (const GpuDispatch& d : gpu_) {
    for (const Command& c : d.commands) {
      bytes += sizeof(Command);
      if (const auto* launch = std::get_if<Launch>(&c)) {
        bytes += launch->operands.size() * sizeof(Operand) + launch->params.size() * 4;
      }
    }
  }
  for (const Segment& segment : segments_) {
    if (segment.host) bytes += segment.host->memory_bytes();
  }
  return bytes;
}

std::vector<std::pair<int32_t, int32_t>> VulkanExecutable::interleaved_dispatches() const {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const Segment& segment : segments_) {
    if (!segment.host) continue;
    for (const auto& range : segment.host->interleaved_dispatches()) out.push_back(range);
  }
  return out;
}

std::vector<std::string> VulkanExecutable::describe_dispatch(int32_t d) const {
  if (d < 0 || static_cast<size_t>(d) >= dispatches_.size()) return {};
  if (placements_[d].on_gpu) return gpu_[d].description;
  std::vector<std::string> lines = {std::string(kFallbackLinePrefix) + placements_[d].reason};
  for (const Segment& segment : segments_) {
    if (!segment.host) continue;
    for (std::string& line : segment.host->describe(d)) lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace kiln::hal::vulkan
