#include "kiln/triage/fault_device.h"

#include <fmt/format.h>

#include "kiln/triage/fault_program.h"

namespace kiln::triage {
namespace {

// Presents the planted program's dispatches to an observer of the original one: the dispatches
// of one original dispatch become one call, with the time of all of them and the outputs after
// the fault. Each original dispatch keeps its own state: a run may ask about several dispatches
// before the first of them finishes (hal::RunObserver).
class OriginalObserver : public hal::RunObserver {
 public:
  OriginalObserver(const FaultedProgram& program, hal::RunObserver& outer)
      : program_(program), outer_(outer), state_(program.dispatches.size()) {
    for (size_t d = 0; d < program.dispatches.size(); ++d) {
      for (size_t k = 0; k < program.dispatches[d].size(); ++k) {
        const auto inner = static_cast<size_t>(program.dispatches[d][k]);
        if (owner_.size() <= inner) owner_.resize(inner + 1);
        owner_[inner] = {static_cast<int32_t>(d), static_cast<int32_t>(k)};
      }
    }
  }

  bool wants_outputs(int32_t dispatch) override {
    const auto [d, k] = owner_[dispatch];
    State& state = state_[d];
    if (k == 0) state = State{outer_.wants_outputs(d), 0, {}};
    return state.wants;
  }

  Status after_dispatch(int32_t dispatch, double elapsed_ms,
                        std::span<const Tensor> outputs) override {
    const auto [d, k] = owner_[dispatch];
    State& state = state_[d];
    state.elapsed_ms += elapsed_ms;
    if (state.wants) {
      if (k == 0) {
        state.outputs.assign(outputs.begin(), outputs.end());
      } else {
        const std::vector<int32_t>& source = program_.output_source[d];
        for (size_t i = 0; i < source.size(); ++i) {
          if (source[i] == k && i < state.outputs.size() && !outputs.empty())
            state.outputs[i] = outputs[0];
        }
      }
    }
    if (static_cast<size_t>(k) + 1 < program_.dispatches[d].size()) return ok_status();
    Status status = outer_.after_dispatch(
        d, state.elapsed_ms,
        state.wants ? std::span<const Tensor>(state.outputs) : std::span<const Tensor>());
    state.outputs.clear();
    return status;
  }

 private:
  struct State {
    bool wants = false;
    double elapsed_ms = 0;
    std::vector<Tensor> outputs;
  };
  const FaultedProgram& program_;
  hal::RunObserver& outer_;
  std::vector<std::pair<int32_t, int32_t>> owner_;  // planted dispatch -> (original, k)
  std::vector<State> state_;                        // per original dispatch
};

class FaultExecutable : public hal::Executable {
 public:
  FaultExecutable(std::unique_ptr<FaultedProgram> program, std::unique_ptr<hal::Executable> inner,
                  std::unique_ptr<hal::Buffer> planted, std::vector<size_t> offsets)
      : program_(std::move(program)),
        inner_(std::move(inner)),
        planted_(std::move(planted)),
        offsets_(std::move(offsets)) {}

  hal::Executable& inner() { return *inner_; }

  // The wrapped executable's arguments for a run of the original program: its values as given,
  // the planted intermediates in this executable's own buffer. Valid until the next call.
  StatusOr<hal::RunArgs> translate(const hal::RunArgs& args) {
    if (args.values.size() != program_->original_values) {
      return invalid_argument("run: got {} value bindings, the program has {} values",
                              args.values.size(), program_->original_values);
    }
    values_.assign(args.values.begin(), args.values.end());
    values_.resize(program_->spec.values.size());
    for (size_t v = program_->original_values; v < values_.size(); ++v) {
      if (offsets_[v] != kNoStorage) values_[v] = {planted_.get(), offsets_[v]};
    }
    hal::RunArgs inner = args;
    inner.values = values_;
    observer_.reset();
    if (args.observer != nullptr) {
      observer_ = std::make_unique<OriginalObserver>(*program_, *args.observer);
      inner.observer = observer_.get();
    }
    return inner;
  }

  size_t storage_bytes(int32_t value) const override {
    return value >= 0 && static_cast<size_t>(value) < program_->original_values
               ? inner_->storage_bytes(value)
               : 0;
  }
  int32_t storage_shared_with(int32_t value) const override {
    if (value < 0 || static_cast<size_t>(value) >= program_->original_values) return -1;
    const int32_t shared = inner_->storage_shared_with(value);
    return shared >= 0 && static_cast<size_t>(shared) < program_->original_values ? shared : -1;
  }
  Status run(const hal::RunArgs& args) override {
    KILN_ASSIGN_OR_RETURN(hal::RunArgs inner, translate(args));
    return inner_->run(inner);
  }
  size_t scratch_bytes() const override { return inner_->scratch_bytes(); }
  // The wrapped program's ranges, as the original dispatches that hold them.
  std::vector<std::pair<int32_t, int32_t>> interleaved_dispatches() const override {
    std::vector<int32_t> original;  // per planted-program dispatch
    for (size_t d = 0; d < program_->dispatches.size(); ++d) {
      for (int32_t inner : program_->dispatches[d]) {
        if (original.size() <= static_cast<size_t>(inner)) original.resize(inner + 1, -1);
        original[inner] = static_cast<int32_t>(d);
      }
    }
    std::vector<std::pair<int32_t, int32_t>> out;
    for (const auto& [first, end] : inner_->interleaved_dispatches()) {
      if (first < 0 || end <= first || static_cast<size_t>(end) > original.size()) continue;
      out.emplace_back(original[first], original[end - 1] + 1);
    }
    return out;
  }
  size_t memory_bytes() const override {
    return inner_->memory_bytes() + (planted_ != nullptr ? planted_->size() : 0);
  }
  std::vector<std::string> describe_dispatch(int32_t d) const override {
    std::vector<std::string> out;
    if (d < 0 || static_cast<size_t>(d) >= program_->dispatches.size()) return out;
    for (int32_t inner : program_->dispatches[d]) {
      for (std::string& line : inner_->describe_dispatch(inner)) out.push_back(std::move(line));
    }
    return out;
  }

  static constexpr size_t kNoStorage = static_cast<size_t>(-1);

 private:
  std::unique_ptr<FaultedProgram> program_;
  std::unique_ptr<hal::Executable> inner_;
  std::unique_ptr<hal::Buffer> planted_;  // the planted intermediates
  std::vector<size_t> offsets_;           // per planted-program value: offset in planted_
  std::vector<hal::BufferRef> values_;
  std::unique_ptr<OriginalObserver> observer_;
};

// Hands the wrapped queue the executable its device prepared.
class FaultQueue : public hal::Queue {
 public:
  explicit FaultQueue(hal::Queue& inner) : inner_(inner) {}
  Status write(const hal::BufferRef& dst, std::span<const std::byte> src) override {
    return inner_.write(dst, src);
  }
  Status read(const hal::BufferRef& src, std::span<std::byte> dst) override {
    return inner_.read(src, dst);
  }
  Status submit(hal::Executable& executable, const hal::RunArgs& args) override {
    auto* faulted = dynamic_cast<FaultExecutable*>(&executable);
    if (faulted == nullptr) return inner_.submit(executable, args);
    KILN_ASSIGN_OR_RETURN(hal::RunArgs inner, faulted->translate(args));
    return inner_.submit(faulted->inner(), inner);
  }
  Status finish() override { return inner_.finish(); }

 private:
  hal::Queue& inner_;
};

class FaultDevice : public hal::Device {
 public:
  FaultDevice(std::unique_ptr<hal::Device> inner, FaultSpec fault)
      : inner_(std::move(inner)), fault_(std::move(fault)), queue_(inner_->queue()) {}

  std::string name() const override { return inner_->name(); }
  Status supports(const hal::DispatchSpec& dispatch,
                  std::span<const hal::ValueSpec> values) const override {
    return inner_->supports(dispatch, values);
  }
  StatusOr<std::vector<int64_t>> data_sizes(const hal::DispatchSpec& dispatch,
                                            std::span<const Tensor> inputs) override {
    return inner_->data_sizes(dispatch, inputs);
  }
  std::string fallback_reason_for_op(std::string_view op_type) const override {
    return inner_->fallback_reason_for_op(op_type);
  }
  hal::Allocator& allocator() override { return inner_->allocator(); }
  hal::Queue& queue() override { return queue_; }

  StatusOr<std::unique_ptr<hal::Executable>> prepare(const hal::ProgramSpec& spec) override {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<FaultedProgram> program, plant_fault(spec, fault_));
    if (program == nullptr) return inner_->prepare(spec);
    auto inner = inner_->prepare(program->spec);
    if (!inner.ok()) {
      return std::move(inner).status().with_note(
          fmt::format("preparing the program with {} planted", kFaultVariable));
    }
    // The planted intermediates live in a buffer of their own, one place each.
    std::vector<size_t> offsets(program->spec.values.size(), FaultExecutable::kNoStorage);
    size_t bytes = 0;
    for (size_t v = program->original_values; v < program->spec.values.size(); ++v) {
      const size_t need = (*inner)->storage_bytes(static_cast<int32_t>(v));
      if (need == 0) continue;
      offsets[v] = bytes;
      bytes += (need + 63) / 64 * 64;
    }
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> planted,
                          inner_->allocator().allocate(bytes, hal::MemoryType::kDeviceLocal));
    return std::unique_ptr<hal::Executable>(std::make_unique<FaultExecutable>(
        std::move(program), std::move(inner).value(), std::move(planted), std::move(offsets)));
  }

 private:
  std::unique_ptr<hal::Device> inner_;
  FaultSpec fault_;
  FaultQueue queue_;
};

}  // namespace

std::unique_ptr<hal::Device> inject_fault(std::unique_ptr<hal::Device> device, FaultSpec fault) {
  return std::make_unique<FaultDevice>(std::move(device), std::move(fault));
}

hal::DeviceDecorator fault_decorator(std::optional<FaultSpec> fault) {
  if (!fault) return {};
  return [fault = *fault](
             std::unique_ptr<hal::Device> device) -> StatusOr<std::unique_ptr<hal::Device>> {
    return inject_fault(std::move(device), fault);
  };
}

}  // namespace kiln::triage
