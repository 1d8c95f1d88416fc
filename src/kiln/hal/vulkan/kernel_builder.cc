#include "kiln/hal/vulkan/kernel_builder.h"

#include <algorithm>
#include <memory>

#include "kiln/hal/vulkan/constant_cache.h"
#include "kiln/hal/vulkan/shader_library.h"
#include "kiln/hal/vulkan/vulkan_buffer.h"

namespace kiln::hal::vulkan {

KernelBuilder::KernelBuilder(const PhysicalDeviceInfo& device, VulkanContext* context,
                             ConstantCache* constants, const DispatchSpec& dispatch,
                             std::span<const ValueSpec> values)
    : device_(device),
      context_(context),
      constants_(constants),
      dispatch_(dispatch),
      values_(values) {}

const Attributes& KernelBuilder::attributes() const {
  static const Attributes empty;
  return dispatch_.attributes != nullptr ? *dispatch_.attributes : empty;
}

bool KernelBuilder::has_input(size_t i) const {
  return i < dispatch_.inputs.size() && dispatch_.inputs[i] >= 0;
}

Status KernelBuilder::expect_dtype(const ValueSpec& value, DType dtype) const {
  if (value.dtype == dtype) return ok_status();
  return unimplemented("'{}' is {}; the Vulkan kernel takes {}", value.name,
                       dtype_name(value.dtype), dtype_name(dtype));
}

StatusOr<Operand> KernelBuilder::input_operand(size_t i, size_t byte_offset) {
  const ValueSpec& value = input(i);
  Operand operand;
  operand.offset = byte_offset;
  if (value.role != ValueRole::kConstant) {
    operand.value = dispatch_.inputs[i];
    return operand;
  }
  if (constants_ == nullptr) return operand;  // dry
  if (value.constant == nullptr) return invalid_argument("constant '{}' has no data", value.name);
  KILN_ASSIGN_OR_RETURN(operand.constant, constants_->get(std::span(value.constant->data(),
                                                                    value.constant->byte_size())));
  return operand;
}

Operand KernelBuilder::output_operand(size_t i, size_t byte_offset) const {
  Operand operand;
  operand.value = dispatch_.outputs[i];
  operand.offset = byte_offset;
  return operand;
}

StatusOr<Operand> KernelBuilder::owned_constant(std::span<const std::byte> bytes) {
  Operand operand;
  if (constants_ == nullptr) return operand;  // dry
  KILN_ASSIGN_OR_RETURN(operand.constant, constants_->upload(bytes));
  return operand;
}

StatusOr<Operand> KernelBuilder::scratch(size_t bytes) {
  Operand operand;
  if (context_ == nullptr) return operand;  // dry
  bytes = std::max<size_t>(bytes, 4);
  if (shared_scratch_ != nullptr && *shared_scratch_ != nullptr &&
      (*shared_scratch_)->size() >= bytes) {
    operand.constant = *shared_scratch_;
    return operand;
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<VulkanBuffer> buffer,
                        VulkanBuffer::create(*context_, bytes, MemoryType::kDeviceLocal));
  operand.constant = std::shared_ptr<const VulkanBuffer>(std::move(buffer));
  if (shared_scratch_ != nullptr) *shared_scratch_ = operand.constant;
  return operand;
}

Status KernelBuilder::launch(std::string_view shader, std::vector<uint32_t> specialization,
                             uint64_t invocations, std::vector<Operand> operands,
                             std::vector<uint32_t> params) {
  if (invocations >= (uint64_t{1} << 32)) {
    return unimplemented("{} elements exceed the Vulkan kernels' 32-bit indices", invocations);
  }
  // One launch per maxComputeWorkGroupCount[0] workgroups, each told its first element
  // (common.glsl).
  const uint64_t per_launch = uint64_t{device_.max_workgroup_count[0]} * kWorkgroupSize;
  params.insert(params.begin(), 0);
  uint64_t base = 0;
  do {
    const uint64_t count = std::min(invocations - base, per_launch);
    const uint32_t grid[3] = {
        static_cast<uint32_t>(std::max<uint64_t>((count + kWorkgroupSize - 1) / kWorkgroupSize, 1)),
        1, 1};
    params[0] = static_cast<uint32_t>(base);
    KILN_RETURN_IF_ERROR(launch_groups(shader, specialization, grid, operands, params));
    base += count;
  } while (base < invocations);
  return ok_status();
}

Status KernelBuilder::launch_rows(std::string_view shader, std::vector<uint32_t> specialization,
                                  uint64_t rows, std::vector<Operand> operands,
                                  std::vector<uint32_t> params) {
  if (rows >= (uint64_t{1} << 32)) {
    return unimplemented("{} rows exceed the Vulkan kernels' 32-bit indices", rows);
  }
  params.insert(params.begin(), 0);
  for (uint64_t base = 0; base < rows;) {
    const uint64_t count = std::min<uint64_t>(rows - base, device_.max_workgroup_count[0]);
    const uint32_t grid[3] = {static_cast<uint32_t>(count), 1, 1};
    params[0] = static_cast<uint32_t>(base);
    KILN_RETURN_IF_ERROR(launch_groups(shader, specialization, grid, operands, params));
    base += count;
  }
  return ok_status();
}

Status KernelBuilder::launch_groups(std::string_view shader, std::vector<uint32_t> specialization,
                                    const uint32_t (&groups)[3], std::vector<Operand> operands,
                                    std::vector<uint32_t> params) {
  const size_t push_bytes = operands.size() * 8 + params.size() * 4;
  if (push_bytes > kPushConstantBytes) {
    return internal_error("kernel {} pushes {} bytes of constants, the layout has {}", shader,
                          push_bytes, kPushConstantBytes);
  }
  for (int d = 0; d < 3; ++d) {
    if (groups[d] > device_.max_workgroup_count[d]) {
      return unimplemented("kernel {} needs {} workgroups along dimension {}, the device allows {}",
                           shader, groups[d], d, device_.max_workgroup_count[d]);
    }
  }
  Launch launch;
  if (context_ != nullptr) {
    KILN_ASSIGN_OR_RETURN(launch.pipeline,
                          context_->pipelines().get(shader, std::move(specialization)));
  } else {
    KILN_RETURN_IF_ERROR(find_shader(shader).status());
  }
  std::copy(std::begin(groups), std::end(groups), launch.groups);
  launch.operands = std::move(operands);
  launch.params = std::move(params);
  result_.commands.push_back(std::move(launch));
  return ok_status();
}

StatusOr<Operand> KernelBuilder::error_flag(
    size_t words, std::function<Status(std::span<const uint32_t>)> error) {
  Operand operand;
  if (constants_ == nullptr) return operand;  // dry
  const std::vector<std::byte> zeros(words * sizeof(uint32_t));
  KILN_ASSIGN_OR_RETURN(operand.constant, constants_->upload(zeros));
  result_.checks.push_back(RunCheck{operand.constant, words, std::move(error)});
  return operand;
}

void KernelBuilder::copy(Operand src, Operand dst, size_t bytes) {
  result_.commands.push_back(CopyCommand{std::move(src), std::move(dst), bytes});
}

}  // namespace kiln::hal::vulkan
