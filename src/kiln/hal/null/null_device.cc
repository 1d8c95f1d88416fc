#include "kiln/hal/null/null_device.h"

#include <fmt/format.h>

#include <cstring>

#include "kiln/hal/host_allocator.h"
#include "kiln/hal/sync_queue.h"

namespace kiln::hal::null {
namespace {

Status with_dispatch(Status status, const DispatchSpec& d) {
  if (status.ok()) return status;
  return std::move(status).with_note(fmt::format("in dispatch '{}' ({})", d.name, d.op_type));
}

class NullExecutable : public Executable {
 public:
  explicit NullExecutable(const ProgramSpec& spec) : spec_(spec) {
    // Constants are not read; drop the pointers so none can dangle.
    for (ValueSpec& value : spec_.values) value.constant = nullptr;
  }

  size_t storage_bytes(int32_t value) const override {
    if (value < 0 || static_cast<size_t>(value) >= spec_.values.size()) return 0;
    const ValueSpec& v = spec_.values[value];
    return v.role == ValueRole::kIntermediate ? plain_bytes(v) : 0;
  }

  Status run(const RunArgs& args) override {
    if (args.values.size() != spec_.values.size()) {
      return invalid_argument("run: got {} value bindings, the program has {} values",
                              args.values.size(), spec_.values.size());
    }
    for (size_t v = 0; v < spec_.values.size(); ++v) {
      const ValueSpec& value = spec_.values[v];
      if (value.role == ValueRole::kConstant) continue;
      const size_t bytes = value.role == ValueRole::kIntermediate
                               ? storage_bytes(static_cast<int32_t>(v))
                               : plain_bytes(value);
      if (bytes == 0) continue;
      const BufferRef& ref = args.values[v];
      if (ref.host_data() == nullptr) {
        return invalid_argument("run: {} '{}' has no host-visible buffer",
                                value_role_name(value.role), value.name);
      }
      if (ref.offset > ref.buffer->size() || bytes > ref.buffer->size() - ref.offset) {
        return invalid_argument("run: {} '{}' needs {} bytes, its buffer has {} at offset {}",
                                value_role_name(value.role), value.name, bytes, ref.buffer->size(),
                                ref.offset);
      }
    }
    for (int32_t v : spec_.outputs) {
      const size_t bytes = plain_bytes(spec_.values[v]);
      if (bytes > 0) std::memset(args.values[v].host_data(), 0, bytes);
    }
    if (args.observer == nullptr) return ok_status();
    for (size_t d = 0; d < spec_.dispatches.size(); ++d) {
      const DispatchSpec& dispatch = spec_.dispatches[d];
      const auto index = static_cast<int32_t>(d);
      std::vector<Tensor> outputs;
      if (args.observer->wants_outputs(index)) {
        for (int32_t v : dispatch.outputs) {
          // Tensor::create zero-fills.
          KILN_ASSIGN_OR_RETURN(Tensor t,
                                Tensor::create(spec_.values[v].dtype, spec_.values[v].shape));
          outputs.push_back(std::move(t));
        }
      }
      Status observed = args.observer->after_dispatch(index, 0.0, outputs);
      if (!observed.ok())
        return std::move(observed).with_note(fmt::format("after dispatch '{}'", dispatch.name));
    }
    return ok_status();
  }

  std::vector<std::string> describe_dispatch(int32_t d) const override {
    if (d < 0 || static_cast<size_t>(d) >= spec_.dispatches.size()) return {};
    return {fmt::format("null: {} runs nothing", spec_.dispatches[d].op_type)};
  }

  size_t memory_bytes() const override {
    return sizeof(*this) + spec_.values.size() * sizeof(ValueSpec) +
           spec_.dispatches.size() * sizeof(DispatchSpec);
  }

 private:
  ProgramSpec spec_;
};

class NullDevice : public Device {
 public:
  std::string name() const override { return "null (computes nothing; outputs are zeros)"; }

  Status supports(const DispatchSpec& dispatch, std::span<const ValueSpec> values) const override {
    return with_dispatch(check_dispatch_indices(dispatch, values.size()), dispatch);
  }

  StatusOr<std::unique_ptr<Executable>> prepare(const ProgramSpec& spec) override {
    KILN_RETURN_IF_ERROR(check_program(spec));
    return std::unique_ptr<Executable>(std::make_unique<NullExecutable>(spec));
  }

  StatusOr<std::vector<int64_t>> data_sizes(const DispatchSpec& dispatch,
                                            std::span<const Tensor> inputs) override {
    return with_dispatch(unimplemented("the null device computes no data, so it cannot size "
                                       "outputs that depend on data"),
                         dispatch);
  }

  Allocator& allocator() override { return allocator_; }
  Queue& queue() override { return queue_; }

 private:
  HostAllocator allocator_;
  SyncQueue queue_;
};

}  // namespace

StatusOr<std::unique_ptr<Device>> create_null_device(const DeviceOptions& options) {
  if (options.threads < 0) {
    return invalid_argument("null device: threads must be >= 0 (0: all cores), got {}",
                            options.threads);
  }
  return std::unique_ptr<Device>(std::make_unique<NullDevice>());
}

}  // namespace kiln::hal::null
