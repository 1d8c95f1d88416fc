#include "kiln/hal/host_tensors.h"

#include <fmt/format.h>

namespace kiln::hal {

StatusOr<BufferRef> HostTensorBinding::bind(std::byte* data, size_t bytes) {
  std::unique_ptr<Buffer> buffer = device_.allocator().wrap_host(data, bytes);
  if (buffer == nullptr) {
    KILN_ASSIGN_OR_RETURN(buffer, device_.allocator().allocate(bytes, MemoryType::kDeviceLocal));
  }
  buffers_.push_back(std::move(buffer));
  return BufferRef{buffers_.back().get(), 0};
}

StatusOr<BufferRef> HostTensorBinding::input(const Tensor& tensor) {
  const size_t bytes = tensor.byte_size();
  KILN_ASSIGN_OR_RETURN(BufferRef ref, bind(const_cast<std::byte*>(tensor.data()), bytes));
  if (ref.buffer->host_data() != tensor.data() && bytes > 0) {
    KILN_RETURN_IF_ERROR(device_.queue().write(ref, std::span(tensor.data(), bytes)));
  }
  return ref;
}

StatusOr<BufferRef> HostTensorBinding::output(Tensor& tensor) {
  KILN_ASSIGN_OR_RETURN(BufferRef ref, bind(tensor.mutable_data(), tensor.byte_size()));
  if (ref.buffer->host_data() != tensor.mutable_data() && tensor.byte_size() > 0) {
    reads_.emplace_back(ref.buffer, &tensor);
  }
  return ref;
}

Status HostTensorBinding::run(Executable& executable, const RunArgs& args) {
  Queue& queue = device_.queue();
  KILN_RETURN_IF_ERROR(queue.submit(executable, args));
  for (auto& [buffer, tensor] : reads_) {
    KILN_RETURN_IF_ERROR(
        queue.read(BufferRef{buffer, 0}, std::span(tensor->mutable_data(), tensor->byte_size())));
  }
  return queue.finish();
}

namespace {

Status check_tensor(const Tensor& t, const ValueSpec& v, const char* what, size_t index) {
  if (t.dtype() != v.dtype || t.shape() != v.shape) {
    return invalid_argument("{} {} '{}' must be {} [{}], got {} [{}]", what, index, v.name,
                            dtype_name(v.dtype), fmt::join(v.shape, ","), dtype_name(t.dtype()),
                            fmt::join(t.shape(), ","));
  }
  if (t.element_count() > 0 && t.empty_storage()) {
    return invalid_argument("{} {} '{}' has no storage", what, index, v.name);
  }
  return ok_status();
}

}  // namespace

Status check_host_tensors(const ProgramSpec& spec, std::span<const Tensor> inputs,
                          std::span<const Tensor> outputs) {
  if (inputs.size() != spec.inputs.size() || outputs.size() != spec.outputs.size()) {
    return invalid_argument("run: got {} inputs and {} outputs, the program has {} and {}",
                            inputs.size(), outputs.size(), spec.inputs.size(), spec.outputs.size());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(check_tensor(inputs[i], spec.values[spec.inputs[i]], "input", i));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(check_tensor(outputs[i], spec.values[spec.outputs[i]], "output", i));
  }
  return ok_status();
}

Status run_on_host(Device& device, Executable& executable, const ProgramSpec& spec,
                   std::span<const Tensor> inputs, std::span<Tensor> outputs,
                   RunObserver* observer) {
  KILN_RETURN_IF_ERROR(check_host_tensors(spec, inputs, outputs));
  std::vector<BufferRef> values(spec.values.size());
  std::vector<size_t> offsets(spec.values.size(), 0);
  size_t arena_bytes = 0;
  for (size_t v = 0; v < spec.values.size(); ++v) {
    const size_t bytes = executable.storage_bytes(static_cast<int32_t>(v));
    if (bytes == 0) continue;
    offsets[v] = arena_bytes;
    arena_bytes += (bytes + 63) / 64 * 64;
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> arena,
                        device.allocator().allocate(arena_bytes, MemoryType::kDeviceLocal));
  for (size_t v = 0; v < spec.values.size(); ++v) {
    if (executable.storage_bytes(static_cast<int32_t>(v)) > 0)
      values[v] = {arena.get(), offsets[v]};
  }
  HostTensorBinding binding(device);
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(values[spec.inputs[i]], binding.input(inputs[i]));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(values[spec.outputs[i]], binding.output(outputs[i]));
  }
  RunArgs args;
  args.values = values;
  args.observer = observer;
  return binding.run(executable, args);
}

}  // namespace kiln::hal
