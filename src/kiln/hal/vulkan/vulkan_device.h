// The Vulkan backend (`--device=vulkan`, `--device=vulkan:N`): kiln's compute shaders on any
// Vulkan 1.2 device with bufferDeviceAddress (AMD, NVIDIA, Intel; lavapipe on machines without a
// GPU). vulkan_context.h says how a device is selected and how validation is turned on.
//
// A dispatch runs on the GPU when the backend has a kernel for it (op_table.h) and that kernel
// takes its dtypes, shapes and attributes; otherwise it runs on the fallback device (the CPU
// backend, passed in by the registrar so that this library does not depend on it), with its
// values copied to and from the host where the GPU's memory is not host-visible. With
// DeviceOptions::allow_fallback false, prepare refuses such a dispatch instead. describe_dispatch
// says where each dispatch runs and, for a fallback, why.
//
// Every value is plain row-major on the device; every kernel takes its sizes from push constants,
// so one pipeline serves every size and a dynamic dim runs exactly the code of a static one.
#pragma once

#include <memory>
#include <span>

#include "kiln/hal/device.h"
#include "kiln/hal/registry.h"
#include "kiln/hal/vulkan/vulkan_context.h"

namespace kiln::hal::vulkan {

class ConstantCache;

class VulkanDevice : public Device {
 public:
  VulkanDevice(std::shared_ptr<VulkanContext> context, std::unique_ptr<Device> fallback,
               bool allow_fallback);
  ~VulkanDevice() override;

  std::string name() const override;
  // Whether the dispatch runs on this device at all: its definition's checks (through the
  // fallback device), and a GPU kernel or, with fallback allowed, the CPU.
  Status supports(const DispatchSpec& dispatch, std::span<const ValueSpec> values) const override;
  StatusOr<std::unique_ptr<Executable>> prepare(const ProgramSpec& spec) override;
  // Sizes are computed on the host (the fallback device), as the inputs are host tensors.
  StatusOr<std::vector<int64_t>> data_sizes(const DispatchSpec& dispatch,
                                            std::span<const Tensor> inputs) override;
  std::string fallback_reason_for_op(std::string_view op_type) const override;
  Allocator& allocator() override { return *allocator_; }
  Queue& queue() override { return *queue_; }

  // OK when a GPU kernel runs the dispatch; else Unimplemented saying why (the dispatch would run
  // on the fallback), or the definition's error.
  Status runs_on_gpu(const DispatchSpec& dispatch, std::span<const ValueSpec> values) const;
  const PhysicalDeviceInfo& info() const { return context_->info(); }
  VulkanContext& context() { return *context_; }
  // Device copies of constants alive now (shared by this device's plans).
  size_t cached_constant_count() const;

 private:
  std::shared_ptr<VulkanContext> context_;
  std::unique_ptr<Device> fallback_;
  bool allow_fallback_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Queue> queue_;
  std::unique_ptr<ConstantCache> constants_;
};

// The device for `options` (options.index selects the physical device), with `fallback` creating
// the CPU device that runs what the GPU does not. Errors: no Vulkan driver or device, a bad index,
// the fallback's own.
StatusOr<std::unique_ptr<Device>> create_vulkan_device(const DeviceOptions& options,
                                                       const DeviceFactory& fallback);
// Every Vulkan device the loader reports, with the limits kernels size themselves by (`kiln
// devices`). Errors: no Vulkan driver.
StatusOr<std::vector<DeviceInstance>> list_vulkan_instances();

}  // namespace kiln::hal::vulkan
