#include "kiln/hal/cpu/cpu_executable.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "kiln/base/aligned_memory.h"
#include "kiln/hal/cpu/dnnl_util.h"

namespace kiln::hal::cpu {
namespace {

size_t rounded(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

StatusOr<std::unique_ptr<CpuExecutable>> CpuExecutable::create(Parts parts) {
  std::unique_ptr<CpuExecutable> exe(new CpuExecutable(std::move(parts)));
  exe->value_ptrs_.assign(exe->parts_.values.size(), nullptr);
  for (size_t v = 0; v < exe->parts_.values.size(); ++v) {
    const Tensor& c = exe->parts_.constants[v];
    if (!c.empty_storage()) exe->value_ptrs_[v] = const_cast<std::byte*>(c.data());
  }
  KILN_RETURN_IF_ERROR(catch_dnnl("creating a stream", [&]() -> Status {
    exe->stream_ = dnnl::stream(exe->parts_.device->engine);
    return ok_status();
  }));
  return exe;
}

CpuExecutable::~CpuExecutable() { std::free(own_scratch_); }

size_t CpuExecutable::scratch_bytes() const {
  return rounded(parts_.workspace_bytes) + rounded(parts_.scratchpad_bytes);
}

size_t CpuExecutable::memory_bytes() const {
  size_t primitives = 0;
  for (const auto& step : parts_.steps) {
    primitives += dynamic_cast<const PrimitiveStep*>(step.get()) != nullptr;
  }
  return (own_scratch_ != nullptr ? scratch_bytes() : 0) + parts_.steps.size() * kStepBytes +
         primitives * kPrimitiveBytes;
}

size_t CpuExecutable::storage_bytes(int32_t value) const {
  if (value < 0 || static_cast<size_t>(value) >= parts_.storage.size()) return 0;
  return parts_.storage[value];
}

int32_t CpuExecutable::storage_shared_with(int32_t value) const {
  if (value < 0 || static_cast<size_t>(value) >= parts_.shared_storage.size()) return -1;
  return parts_.shared_storage[value];
}

Status CpuExecutable::bind_values(const RunArgs& args) {
  if (args.values.size() != parts_.values.size()) {
    return invalid_argument("run: got {} value bindings, the program has {} values",
                            args.values.size(), parts_.values.size());
  }
  auto bind = [&](int32_t v, size_t bytes, const char* role) -> Status {
    const hal::BufferRef& ref = args.values[v];
    std::byte* data = ref.host_data();
    if (data == nullptr && bytes > 0) {
      return invalid_argument("run: {} '{}' has no host-visible buffer", role,
                              parts_.values[v].name);
    }
    if (data != nullptr &&
        (ref.offset > ref.buffer->size() || bytes > ref.buffer->size() - ref.offset)) {
      return invalid_argument("run: {} '{}' needs {} bytes, its buffer has {} at offset {}", role,
                              parts_.values[v].name, bytes, ref.buffer->size(), ref.offset);
    }
    value_ptrs_[v] = data;
    return ok_status();
  };
  for (size_t v = 0; v < parts_.storage.size(); ++v) {
    if (parts_.storage[v] > 0) {
      KILN_RETURN_IF_ERROR(bind(static_cast<int32_t>(v), parts_.storage[v], "value"));
    }
  }
  for (int32_t v : parts_.inputs)
    KILN_RETURN_IF_ERROR(bind(v, plain_bytes(parts_.values[v]), "input"));
  for (int32_t v : parts_.outputs)
    KILN_RETURN_IF_ERROR(bind(v, plain_bytes(parts_.values[v]), "output"));
  return ok_status();
}

Status CpuExecutable::run(const RunArgs& args) {
  KILN_RETURN_IF_ERROR(bind_values(args));
  std::byte* scratch = args.scratch.host_data();
  if (args.scratch.buffer != nullptr && scratch == nullptr) {
    return invalid_argument("run: the scratch buffer is not host-visible");
  }
  if (scratch == nullptr && scratch_bytes() > 0) {
    if (own_scratch_ == nullptr) {
      own_scratch_ = static_cast<std::byte*>(allocate_aligned_memory(scratch_bytes()));
      if (own_scratch_ == nullptr) {
        return out_of_range("cannot allocate {} bytes of workspace and {} bytes of scratchpad",
                            parts_.workspace_bytes, parts_.scratchpad_bytes);
      }
    }
    scratch = own_scratch_;
  }
  std::byte* workspace = parts_.workspace_bytes > 0 ? scratch : nullptr;
  std::byte* scratchpad =
      parts_.scratchpad_bytes > 0 ? scratch + rounded(parts_.workspace_bytes) : nullptr;
  ExecContext ctx{value_ptrs_, workspace, scratchpad, stream_.get()};
  // Each dispatch sets its team size; the caller gets its own back.
  const CallerThreads restore;
  if (args.observer != nullptr) return run_observed(ctx, *args.observer);
  for (const DispatchSteps& dispatch : parts_.dispatches) {
    use_threads(dispatch.threads);
    for (size_t s = dispatch.first_step; s < dispatch.end_step; ++s) {
      KILN_RETURN_IF_ERROR(parts_.steps[s]->run(ctx));
    }
  }
  if (dnnl_stream_wait(stream_.get()) != dnnl_success) {
    return internal_error("run: oneDNN stream wait failed");
  }
  return ok_status();
}

Status CpuExecutable::run_observed(const ExecContext& ctx, RunObserver& observer) {
  using Clock = std::chrono::steady_clock;
  for (size_t d = 0; d < parts_.dispatches.size(); ++d) {
    const DispatchSteps& dispatch = parts_.dispatches[d];
    const auto index = static_cast<int32_t>(d);
    const bool wants = observer.wants_outputs(index);
    use_threads(dispatch.threads);
    const Clock::time_point start = Clock::now();
    for (size_t s = dispatch.first_step; s < dispatch.end_step; ++s) {
      KILN_RETURN_IF_ERROR(parts_.steps[s]->run(ctx));
    }
    // The clock stops only once the stream has drained, so the time is this dispatch's alone.
    if (dnnl_stream_wait(stream_.get()) != dnnl_success) {
      return internal_error("run: oneDNN stream wait failed after dispatch '{}'", dispatch.name);
    }
    const double elapsed_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    std::vector<Tensor> outputs;
    if (wants) {
      for (int32_t v : dispatch.outputs) {
        auto tensor = read_plain(ctx, v);
        if (!tensor.ok()) {
          return std::move(tensor).status().with_note(
              fmt::format("observing dispatch '{}'", dispatch.name));
        }
        outputs.push_back(std::move(tensor).value());
      }
    }
    Status observed = observer.after_dispatch(index, elapsed_ms, outputs);
    if (!observed.ok()) {
      return std::move(observed).with_note(fmt::format("after dispatch '{}'", dispatch.name));
    }
  }
  return ok_status();
}

StatusOr<Tensor> CpuExecutable::read_plain(const ExecContext& ctx, int32_t v) {
  const ValueSpec& value = parts_.values[v];
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(value.dtype, value.shape));
  if (out.byte_size() == 0) return out;
  const std::byte* from = ctx.values[v];
  if (from == nullptr) return internal_error("value '{}' has no storage", value.name);
  const auto& desc = parts_.descs[v];
  if (!desc || is_plain(*desc)) {
    std::memcpy(out.mutable_data(), from, out.byte_size());
    return out;
  }
  KILN_RETURN_IF_ERROR(catch_dnnl("reordering an observed value to plain", [&]() -> Status {
    const dnnl_desc plain = plain_desc(value.shape, desc->data_type());
    const dnnl::engine& engine = parts_.device->engine;
    dnnl::memory src(*desc, engine, const_cast<std::byte*>(from));
    dnnl::memory dst(plain, engine, out.mutable_data());
    dnnl::stream stream(engine);
    dnnl::reorder(src, dst).execute(stream, src, dst);
    stream.wait();
    return ok_status();
  }));
  return out;
}

std::vector<std::string> CpuExecutable::summary() const {
  std::vector<std::string> out;
  out.reserve(parts_.steps.size());
  for (const auto& step : parts_.steps) out.push_back(step->describe());
  return out;
}

std::vector<std::string> CpuExecutable::describe_dispatch(int32_t d) const {
  std::vector<std::string> out;
  if (d < 0 || static_cast<size_t>(d) >= parts_.dispatches.size()) return out;
  const DispatchSteps& dispatch = parts_.dispatches[d];
  for (size_t s = dispatch.first_step; s < dispatch.end_step; ++s) {
    out.push_back(parts_.steps[s]->describe());
  }
  return out;
}

}  // namespace kiln::hal::cpu
