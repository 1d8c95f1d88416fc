#include "tests/support/hal/program.h"

#include <cstring>
#include <limits>
#include <memory>

#include "kiln/hal/host_allocator.h"
#include "kiln/hal/host_tensors.h"
#include "kiln/runtime/memory_planner.h"

namespace kiln::testing {
namespace {

size_t g_last_arena_bytes = 0;

}  // namespace

int32_t SpecBuilder::add(std::string name, ConcreteShape shape, DType dtype, hal::ValueRole role) {
  hal::ValueSpec v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.role = role;
  spec_.values.push_back(std::move(v));
  const auto id = static_cast<int32_t>(spec_.values.size() - 1);
  if (role == hal::ValueRole::kInput) spec_.inputs.push_back(id);
  if (role == hal::ValueRole::kOutput) spec_.outputs.push_back(id);
  return id;
}

int32_t SpecBuilder::input(std::string name, ConcreteShape shape, DType dtype) {
  return add(std::move(name), std::move(shape), dtype, hal::ValueRole::kInput);
}
int32_t SpecBuilder::value(std::string name, ConcreteShape shape, DType dtype) {
  return add(std::move(name), std::move(shape), dtype, hal::ValueRole::kIntermediate);
}
int32_t SpecBuilder::output(std::string name, ConcreteShape shape, DType dtype) {
  return add(std::move(name), std::move(shape), dtype, hal::ValueRole::kOutput);
}
int32_t SpecBuilder::constant(std::string name, Tensor data) {
  constants_.push_back(std::move(data));
  const int32_t id = add(std::move(name), constants_.back().shape(), constants_.back().dtype(),
                         hal::ValueRole::kConstant);
  spec_.values[id].constant = &constants_.back();
  return id;
}
void SpecBuilder::dispatch(std::string name, std::string op_type, std::vector<int32_t> inputs,
                           std::vector<int32_t> outputs, Attributes attributes) {
  attributes_.push_back(std::move(attributes));
  hal::DispatchSpec d;
  d.name = std::move(name);
  d.op_type = std::move(op_type);
  d.attributes = &attributes_.back();
  d.inputs = std::move(inputs);
  d.outputs = std::move(outputs);
  spec_.dispatches.push_back(std::move(d));
}

namespace {

// The arena plan the runtime would make for `exe`.
runtime::ArenaPlan plan_for(hal::Executable& exe, const hal::ProgramSpec& spec,
                            const RunOptions& options) {
  // The requests as the runtime makes them; without sharing, every buffer lives throughout.
  std::vector<runtime::BufferRequest> requests(spec.values.size());
  for (size_t d = 0; d < spec.dispatches.size(); ++d) {
    for (int32_t out : spec.dispatches[d].outputs) {
      requests[out].first = requests[out].last = static_cast<int32_t>(d);
    }
    for (int32_t in : spec.dispatches[d].inputs) {
      if (in >= 0) requests[in].last = static_cast<int32_t>(d);
    }
  }
  for (size_t v = 0; v < spec.values.size(); ++v) {
    if (spec.values[v].role != hal::ValueRole::kIntermediate) continue;
    runtime::BufferRequest& r = requests[v];
    r.bytes = exe.storage_bytes(static_cast<int32_t>(v));
    if (options.share_memory) {
      r.same_as = exe.storage_shared_with(static_cast<int32_t>(v));
    } else {
      r.first = 0;
      r.last = std::numeric_limits<int32_t>::max();
    }
  }
  if (options.share_memory) runtime::extend_over_ranges(requests, exe.interleaved_dispatches());
  runtime::ArenaPlan plan = runtime::plan_arena(requests);
  g_last_arena_bytes = plan.arena_bytes;
  return plan;
}

void fill_nan(std::byte* bytes, size_t size) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 0; i + 4 <= size; i += 4) std::memcpy(bytes + i, &nan, 4);
}

// Output tensors of the spec's dtypes and shapes, NaN-filled when poisoning.
StatusOr<std::vector<Tensor>> make_outputs(const hal::ProgramSpec& spec,
                                           const RunOptions& options) {
  std::vector<Tensor> outputs;
  for (int32_t v : spec.outputs) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(spec.values[v].dtype, spec.values[v].shape));
    if (options.poison && t.dtype() == DType::kF32) fill_nan(t.mutable_data(), t.byte_size());
    outputs.push_back(std::move(t));
  }
  return outputs;
}

}  // namespace

StatusOr<std::vector<Tensor>> run_program(hal::Executable& exe, const hal::ProgramSpec& spec,
                                          const std::vector<Tensor>& inputs, RunOptions options) {
  const runtime::ArenaPlan plan = plan_for(exe, spec, options);
  const size_t arena = plan.arena_bytes;
  std::vector<std::byte> storage(arena + 64);
  auto* base =
      reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) / 64 * 64);
  if (options.poison) fill_nan(base, arena);
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, make_outputs(spec, options));
  KILN_RETURN_IF_ERROR(hal::check_host_tensors(spec, inputs, outputs));
  // The CPU addresses host memory: every value is bound in place, as the runtime binds them.
  hal::HostAllocator host;
  std::vector<std::unique_ptr<hal::Buffer>> buffers;
  std::vector<hal::BufferRef> values(spec.values.size());
  buffers.push_back(host.wrap_host(base, arena));
  for (size_t v = 0; v < spec.values.size(); ++v) {
    if (exe.storage_bytes(static_cast<int32_t>(v)) > 0) {
      values[v] = {buffers.front().get(), plan.offsets[v]};
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    buffers.push_back(
        host.wrap_host(const_cast<std::byte*>(inputs[i].data()), inputs[i].byte_size()));
    values[spec.inputs[i]] = {buffers.back().get(), 0};
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    buffers.push_back(host.wrap_host(outputs[i].mutable_data(), outputs[i].byte_size()));
    values[spec.outputs[i]] = {buffers.back().get(), 0};
  }
  hal::RunArgs args;
  args.values = values;
  args.observer = options.observer;
  KILN_RETURN_IF_ERROR(exe.run(args));
  return outputs;
}

StatusOr<std::vector<Tensor>> run_program(hal::Device& device, hal::Executable& exe,
                                          const hal::ProgramSpec& spec,
                                          const std::vector<Tensor>& inputs, RunOptions options) {
  const runtime::ArenaPlan plan = plan_for(exe, spec, options);
  KILN_ASSIGN_OR_RETURN(
      std::unique_ptr<hal::Buffer> arena,
      device.allocator().allocate(plan.arena_bytes, hal::MemoryType::kDeviceLocal));
  if (options.poison && plan.arena_bytes > 0) {
    std::vector<std::byte> nan(plan.arena_bytes);
    fill_nan(nan.data(), nan.size());
    KILN_RETURN_IF_ERROR(device.queue().write({arena.get(), 0}, nan));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, make_outputs(spec, options));
  KILN_RETURN_IF_ERROR(hal::check_host_tensors(spec, inputs, outputs));
  std::vector<hal::BufferRef> values(spec.values.size());
  for (size_t v = 0; v < spec.values.size(); ++v) {
    if (exe.storage_bytes(static_cast<int32_t>(v)) > 0) values[v] = {arena.get(), plan.offsets[v]};
  }
  hal::HostTensorBinding binding(device);
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(values[spec.inputs[i]], binding.input(inputs[i]));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(values[spec.outputs[i]], binding.output(outputs[i]));
  }
  hal::RunArgs args;
  args.values = values;
  args.observer = options.observer;
  KILN_RETURN_IF_ERROR(binding.run(exe, args));
  return outputs;
}

size_t last_arena_bytes() { return g_last_arena_bytes; }

}  // namespace kiln::testing
