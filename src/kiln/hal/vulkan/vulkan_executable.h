// A program prepared for the Vulkan device: its dispatches split into segments that run on the GPU
// (commands recorded into one command buffer per segment) and segments that run on the CPU
// fallback (host_fallback.h), in program order.
//
// Recording: a GPU segment's command buffer is recorded on the first run and replayed by later
// runs while every value is bound to the same device addresses (the runtime's arena and buffers
// are stable across calls of a run state); a changed binding re-records it. Between commands a
// memory barrier orders each write before the next read.
//
// Every value is plain row-major on the device (storage_bytes = element count x dtype size).
// A run is complete when run() returns (the device's queue submits and waits). With an observer,
// dispatches are submitted one at a time and timed from the host.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/hal/executable.h"
#include "kiln/hal/program.h"
#include "kiln/hal/vulkan/commands.h"
#include "kiln/hal/vulkan/host_fallback.h"
#include "kiln/hal/vulkan/vulkan_context.h"

namespace kiln::hal::vulkan {

// Where one dispatch runs, for reports (`kiln run --device=vulkan` lists the fallbacks).
struct DispatchPlacement {
  bool on_gpu = true;
  std::string reason;  // why it runs on the CPU; empty on the GPU
};

class VulkanExecutable : public Executable {
 public:
  struct Segment {
    std::vector<int32_t> dispatches;    // positions in the program, in order
    std::unique_ptr<HostSegment> host;  // null for a GPU segment
    VkCommandBuffer commands = VK_NULL_HANDLE;
    bool recorded = false;
  };

  // Takes the per-dispatch GPU commands (empty for dispatches in host segments) and the segments.
  static StatusOr<std::unique_ptr<VulkanExecutable>> create(
      std::shared_ptr<VulkanContext> context, const ProgramSpec& spec, std::vector<GpuDispatch> gpu,
      std::vector<DispatchPlacement> placements, std::vector<Segment> segments);
  ~VulkanExecutable() override;

  size_t storage_bytes(int32_t value) const override;
  Status run(const RunArgs& args) override;
  size_t memory_bytes() const override;
  std::vector<std::string> describe_dispatch(int32_t d) const override;
  // Those of the host segments.
  std::vector<std::pair<int32_t, int32_t>> interleaved_dispatches() const override;

  const std::vector<DispatchPlacement>& placements() const { return placements_; }
  // Command buffers recorded so far (each GPU segment once, and again when a binding moved).
  size_t recordings() const { return recordings_; }

 private:
  VulkanExecutable(std::shared_ptr<VulkanContext> context) : context_(std::move(context)) {}
  Status check_bindings(const RunArgs& args) const;
  // Records `dispatches`' commands into `commands` with the addresses of `values`.
  Status record(VkCommandBuffer commands, std::span<const int32_t> dispatches,
                std::span<const BufferRef> values) const;
  Status run_observed(const RunArgs& args);
  // The run checks (RunCheck) of `dispatches`, after they ran: the first error found.
  Status check_errors(std::span<const int32_t> dispatches) const;

  std::shared_ptr<VulkanContext> context_;
  std::vector<ValueSpec> values_;  // the program's values (constants' pointers dropped)
  std::vector<DispatchSpec> dispatches_;
  std::vector<GpuDispatch> gpu_;
  std::vector<DispatchPlacement> placements_;
  std::vector<Segment> segments_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  std::vector<VkDeviceAddress> recorded_addresses_;  // per value, of the recorded segments
  size_t recordings_ = 0;
};

}  // namespace kiln::hal::vulkan
