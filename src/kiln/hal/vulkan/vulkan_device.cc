#include "kiln/hal/vulkan/vulkan_device.h"

#include <fmt/format.h>

#include "kiln/hal/vulkan/constant_cache.h"
#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/hal/vulkan/vulkan_buffer.h"
#include "kiln/hal/vulkan/vulkan_executable.h"
#include "kiln/hal/vulkan/vulkan_queue.h"

namespace kiln::hal::vulkan {
namespace {

Status with_dispatch(Status status, const DispatchSpec& d) {
  if (status.ok()) return status;
  return std::move(status).with_note(fmt::format("in dispatch '{}' ({})", d.name, d.op_type));
}

std::string no_kernel_reason(std::string_view op_type) {
  return fmt::format("the Vulkan backend has no {} kernel", op_type);
}

// Runs the op's Vulkan kernel family on `builder`. An op without one still runs on the GPU when
// its outputs are known when prepared; else Unimplemented.
Status build_kernel(KernelBuilder& builder) {
  BuildKernel build = find_vulkan_kernel(builder.dispatch().op_type);
  if (build != nullptr) return build(builder);
  Status known = build_known_values(builder);
  if (known.code() == StatusCode::kUnimplemented)
    return unimplemented("{}", no_kernel_reason(builder.dispatch().op_type));
  return known;
}

}  // namespace

VulkanDevice::VulkanDevice(std::shared_ptr<VulkanContext> context, std::unique_ptr<Device> fallback,
                           bool allow_fallback)
    : context_(std::move(context)),
      fallback_(std::move(fallback)),
      allow_fallback_(allow_fallback),
      allocator_(std::make_unique<VulkanAllocator>(*context_)),
      queue_(std::make_unique<VulkanQueue>(context_)),
      constants_(std::make_unique<ConstantCache>(*context_)) {}

VulkanDevice::~VulkanDevice() = default;

std::string VulkanDevice::name() const {
  const PhysicalDeviceInfo& info = context_->info();
  return fmt::format("vulkan:{} ({}, {}, Vulkan {}; fallback {})", info.index, info.name, info.type,
                     info.api_version, allow_fallback_ ? fallback_->name() : "off");
}

size_t VulkanDevice::cached_constant_count() const { return constants_->size(); }

std::string VulkanDevice::fallback_reason_for_op(std::string_view op_type) const {
  return find_vulkan_kernel(op_type) == nullptr ? no_kernel_reason(op_type) : std::string();
}

Status VulkanDevice::runs_on_gpu(const DispatchSpec& dispatch,
                                 std::span<const ValueSpec> values) const {
  KILN_RETURN_IF_ERROR(fallback_->supports(dispatch, values));
  KernelBuilder dry(context_->info(), nullptr, nullptr, dispatch, values);
  return with_dispatch(build_kernel(dry), dispatch);
}

Status VulkanDevice::supports(const DispatchSpec& dispatch,
                              std::span<const ValueSpec> values) const {
  // The definition's checks and the CPU's ability, once; with fallback that is the answer.
  KILN_RETURN_IF_ERROR(fallback_->supports(dispatch, values));
  if (allow_fallback_) return ok_status();
  KernelBuilder dry(context_->info(), nullptr, nullptr, dispatch, values);
  return with_dispatch(build_kernel(dry), dispatch);
}

StatusOr<std::unique_ptr<Executable>> VulkanDevice::prepare(const ProgramSpec& spec) {
  KILN_RETURN_IF_ERROR(context_->validation_status());
  KILN_RETURN_IF_ERROR(check_program(spec));
  const size_t count = spec.dispatches.size();
  std::vector<GpuDispatch> gpu(count);
  std::vector<DispatchPlacement> placements(count);
  // One scratch buffer for the program's kernels (KernelBuilder::scratch).
  std::shared_ptr<const VulkanBuffer> scratch;
  for (size_t d = 0; d < count; ++d) {
    const DispatchSpec& dispatch = spec.dispatches[d];
    KILN_RETURN_IF_ERROR(fallback_->supports(dispatch, spec.values));
    KernelBuilder builder(context_->info(), context_.get(), constants_.get(), dispatch,
                          spec.values);
    builder.share_scratch(scratch);
    Status built = build_kernel(builder);
    if (built.ok()) {
      gpu[d] = builder.take();
      continue;
    }
    if (built.code() != StatusCode::kUnimplemented)
      return with_dispatch(std::move(built), dispatch);
    if (!allow_fallback_) {
      return failed_precondition(
          "dispatch '{}' ({}) cannot run on the Vulkan device and fallback is off "
          "(--no-fallback): {}",
          dispatch.name, dispatch.op_type, built.message());
    }
    placements[d] = {false, built.message()};
  }

  // Where each value is last read (graph outputs count as read at the end).
  std::vector<int64_t> last_read(spec.values.size(), -1);
  for (size_t d = 0; d < count; ++d) {
    for (int32_t v : spec.dispatches[d].inputs) {
      if (v >= 0) last_read[v] = static_cast<int64_t>(d);
    }
  }
  for (int32_t v : spec.outputs) last_read[v] = static_cast<int64_t>(count);

  std::vector<VulkanExecutable::Segment> segments;
  for (size_t d = 0; d < count;) {
    size_t end = d;
    while (end < count && placements[end].on_gpu == placements[d].on_gpu) ++end;
    VulkanExecutable::Segment segment;
    for (size_t i = d; i < end; ++i) segment.dispatches.push_back(static_cast<int32_t>(i));
    if (!placements[d].on_gpu) {
      std::vector<bool> read_after(spec.values.size());
      for (size_t v = 0; v < spec.values.size(); ++v)
        read_after[v] = last_read[v] >= static_cast<int64_t>(end);
      KILN_ASSIGN_OR_RETURN(segment.host,
                            HostSegment::prepare(*fallback_, spec, segment.dispatches, read_after));
    }
    segments.push_back(std::move(segment));
    d = end;
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<VulkanExecutable> exe,
                        VulkanExecutable::create(context_, spec, std::move(gpu),
                                                 std::move(placements), std::move(segments)));
  return std::unique_ptr<Executable>(std::move(exe));
}

StatusOr<std::vector<int64_t>> VulkanDevice::data_sizes(const DispatchSpec& dispatch,
                                                        std::span<const Tensor> inputs) {
  return fallback_->data_sizes(dispatch, inputs);
}

StatusOr<std::unique_ptr<Device>> create_vulkan_device(const DeviceOptions& options,
                                                       const DeviceFactory& fallback) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<VulkanContext> context, VulkanContext::get(options.index));
  DeviceOptions host = options;
  host.index.clear();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Device> cpu, fallback(host));
  return std::unique_ptr<Device>(
      std::make_unique<VulkanDevice>(std::move(context), std::move(cpu), options.allow_fallback));
}

StatusOr<std::vector<DeviceInstance>> list_vulkan_instances() {
  KILN_ASSIGN_OR_RETURN(std::vector<PhysicalDeviceInfo> devices, list_vulkan_devices());
  std::vector<DeviceInstance> out;
  for (const PhysicalDeviceInfo& d : devices) {
    DeviceInstance instance;
    instance.name = fmt::format("vulkan:{}", d.index);
    instance.summary = fmt::format("{}, {}, Vulkan {}", d.name, d.type, d.api_version);
    instance.usable = d.usable;
    instance.unusable_reason = d.unusable_reason;
    instance.properties = {
        {"driver", d.driver},
        {"device-local memory", fmt::format("{} MiB", d.device_local_bytes >> 20)},
        {"maxStorageBufferRange", fmt::format("{} MiB", d.max_storage_buffer_range >> 20)},
        {"maxPushConstantsSize", fmt::format("{} bytes", d.max_push_constants_size)},
        {"maxComputeSharedMemorySize", fmt::format("{} KiB", d.max_shared_memory_bytes >> 10)},
        {"maxComputeWorkGroupInvocations", fmt::format("{}", d.max_workgroup_invocations)},
        {"maxComputeWorkGroupCount",
         fmt::format("{} x {} x {}", d.max_workgroup_count[0], d.max_workgroup_count[1],
                     d.max_workgroup_count[2])},
        {"subgroupSize", fmt::format("{}", d.subgroup_size)},
        {"bufferDeviceAddress", d.buffer_device_address ? "yes" : "no"},
        {"storageBuffer8BitAccess", d.storage_buffer_8bit ? "yes" : "no"},
        {"shaderInt64", d.shader_int64 ? "yes" : "no"},
    };
    out.push_back(std::move(instance));
  }
  return out;
}

}  // namespace kiln::hal::vulkan
