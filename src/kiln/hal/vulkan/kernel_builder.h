// KernelBuilder: what a Vulkan kernel family (elementwise_ops.cc, copy_ops.cc, ...) sees while it
// turns one dispatch into commands (commands.h). A family reads the dispatch, decides whether it
// can run it (returning Unimplemented with the reason when not: the dispatch then runs on the CPU
// fallback) and adds launches and copies. Kernel variants are chosen from concrete shapes and the
// device's limits only (invariant 1).
//
// A dry builder (supports()) records nothing on the device: constants are not uploaded and
// pipelines not created, so the same family code answers "can you run this" cheaply.
#pragma once

#include <bit>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"
#include "kiln/hal/program.h"
#include "kiln/hal/vulkan/commands.h"
#include "kiln/hal/vulkan/vulkan_context.h"

namespace kiln::hal::vulkan {

class ConstantCache;

inline constexpr uint32_t kWorkgroupSize = 256;  // local_size_x of the 1-D shaders

class KernelBuilder {
 public:
  // `context` and `constants` are null for a dry builder.
  KernelBuilder(const PhysicalDeviceInfo& device, VulkanContext* context, ConstantCache* constants,
                const DispatchSpec& dispatch, std::span<const ValueSpec> values);

  const DispatchSpec& dispatch() const { return dispatch_; }
  const PhysicalDeviceInfo& device() const { return device_; }
  const Attributes& attributes() const;
  // Inputs, counting absent ones (-1): has_input says which are present.
  size_t input_count() const { return dispatch_.inputs.size(); }
  bool has_input(size_t i) const;
  const ValueSpec& input(size_t i) const { return values_[dispatch_.inputs[i]]; }
  size_t output_count() const { return dispatch_.outputs.size(); }
  const ValueSpec& output(size_t i) const { return values_[dispatch_.outputs[i]]; }
  // Unimplemented naming the input or output when it is not `dtype`.
  Status expect_dtype(const ValueSpec& value, DType dtype) const;

  // Operands: input i, output i (a constant input is uploaded once per device and shared).
  StatusOr<Operand> input_operand(size_t i, size_t byte_offset = 0);
  Operand output_operand(size_t i, size_t byte_offset = 0) const;
  // A device copy of host data that the kernel owns (e.g. reordered weights).
  StatusOr<Operand> owned_constant(std::span<const std::byte> bytes);
  // A device buffer of at least `bytes` that the kernel writes and reads between its launches (a
  // fused dispatch's intermediate, e.g. attention's scores): no program value holds it. With
  // share_scratch, the builders of one program share it (the largest asked for so far; a barrier
  // separates every two commands, so no two kernels use it at once), as the arena would share
  // the intermediate's bytes between layers; else the kernel gets a buffer of its own.
  StatusOr<Operand> scratch(size_t bytes);
  // Makes scratch() take its buffer from `shared`, which keeps the largest one (the program's
  // builders pass the same slot; it must outlive the builder).
  void share_scratch(std::shared_ptr<const VulkanBuffer>& shared) { shared_scratch_ = &shared; }

  // Launches a 1-D `shader` over `invocations` elements: workgroups of kWorkgroupSize, split into
  // launches of at most maxComputeWorkGroupCount[0] workgroups. Each launch's parameters are
  // `params` after one more, first: the launch's first element (`base`, common.glsl). Errors: more
  // push-constant bytes than kPushConstantBytes (Internal), more invocations than 32-bit indices
  // reach (Unimplemented).
  Status launch(std::string_view shader, std::vector<uint32_t> specialization, uint64_t invocations,
                std::vector<Operand> operands, std::vector<uint32_t> params);
  // Launches `shader` with one workgroup per row of `rows` (row-per-workgroup kernels): launches
  // of at most maxComputeWorkGroupCount[0] workgroups, each told its first row as its first
  // parameter (`base`), as launch() does. Errors as launch().
  Status launch_rows(std::string_view shader, std::vector<uint32_t> specialization, uint64_t rows,
                     std::vector<Operand> operands, std::vector<uint32_t> params);
  // Launches `shader` with an explicit grid of workgroups. Errors: a grid beyond the device's
  // maxComputeWorkGroupCount (Unimplemented), push constants as above.
  Status launch_groups(std::string_view shader, std::vector<uint32_t> specialization,
                       const uint32_t (&groups)[3], std::vector<Operand> operands,
                       std::vector<uint32_t> params);
  void copy(Operand src, Operand dst, size_t bytes);
  // A zeroed device buffer of `words` 32-bit words that the kernel sets on an error found while it
  // runs; `error` turns its words into the Status the run returns (RunCheck, commands.h).
  StatusOr<Operand> error_flag(size_t words,
                               std::function<Status(std::span<const uint32_t>)> error);
  // One line for describe_dispatch.
  void describe(std::string line) { result_.description.push_back(std::move(line)); }

  GpuDispatch take() { return std::move(result_); }

  static uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }

 private:
  const PhysicalDeviceInfo& device_;
  VulkanContext* context_;
  ConstantCache* constants_;
  const DispatchSpec& dispatch_;
  std::span<const ValueSpec> values_;
  GpuDispatch result_;
  std::shared_ptr<const VulkanBuffer>* shared_scratch_ = nullptr;
};

}  // namespace kiln::hal::vulkan
