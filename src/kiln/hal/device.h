// Hardware abstraction: what the runtime asks of a backend. The runtime evaluates every value's
// concrete shape for the bound symbols and hands the backend a ProgramSpec; the backend chooses
// layouts and kernels (from concrete shapes only, never from whether a dim was symbolic), and
// returns an Executable. The runtime then plans an arena from the Executable's storage needs and
// value lifetimes and calls run().
//
// A backend is a sibling folder of hal/cpu implementing Device and Executable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln::hal {

enum class ValueRole : uint8_t { kInput, kOutput, kConstant, kIntermediate };

struct ValueSpec {
  std::string name;
  DType dtype = DType::kF32;
  ConcreteShape shape;
  ValueRole role = ValueRole::kIntermediate;
  const Tensor* constant = nullptr;  // kConstant: plain row-major data, valid while the spec's
                                     // module is loaded
  // A non-constant integer value whose elements the module's shape program knows (e.g. the
  // result of Shape(x)), evaluated for this binding: lets a backend plan ops that need those
  // values at prepare time (Reshape's shape). The value is still computed by its dispatch.
  std::optional<Tensor> known_value;
};

struct DispatchSpec {
  std::string name;
  std::string op_type;
  const Attributes* attributes = nullptr;
  std::vector<int32_t> inputs;   // indices into ProgramSpec::values; -1 for absent
  std::vector<int32_t> outputs;
  // Where the dispatch came from, for diagnostics and fault selection (KILN_FAULT, hal/cpu):
  // its index in the module (-1: its position in ProgramSpec::dispatches) and the ONNX node
  // names fused into it. A program that runs one dispatch of a module alone keeps both.
  int32_t module_index = -1;
  std::vector<std::string> origins;
  // The values of the dispatch's data-dependent sizes (module::Dispatch::data_symbols), which
  // the runtime bound with Device::data_sizes before preparing it; empty for other dispatches.
  std::vector<int64_t> data_sizes;
};

struct ProgramSpec {
  std::vector<ValueSpec> values;
  std::vector<DispatchSpec> dispatches;
  std::vector<int32_t> inputs;   // graph inputs
  std::vector<int32_t> outputs;  // graph outputs
};

// Watches a run dispatch by dispatch: tracing (`kiln run --trace`), triage, per-dispatch timing
// (`kiln run --profile`). Dispatches are identified by their position in
// ProgramSpec::dispatches. A run without an observer does no extra work.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // Whether after_dispatch(d, ...) gets d's outputs. Asked once per dispatch per run, before it
  // runs. Observing costs a copy (and a reorder out of a blocked layout) per output.
  virtual bool wants_outputs(int32_t dispatch) { return false; }
  // Called once per dispatch, in order, after it finished. `elapsed_ms` is the wall time of the
  // dispatch's own work (kernels and the reorders it needs), excluding the copies made for the
  // observer. `outputs` has one tensor per DispatchSpec output when wants_outputs(dispatch) said
  // so, else it is empty: plain row-major, freshly allocated; the observer may keep them. An
  // error stops the run and is returned by Executable::run with a note naming the dispatch.
  virtual Status after_dispatch(int32_t dispatch, double elapsed_ms,
                                std::span<const Tensor> outputs) = 0;
};

struct RunArgs {
  std::byte* arena = nullptr;            // 64-byte aligned
  std::span<const size_t> offsets;       // per value: offset into arena (intermediates only)
  std::span<const Tensor> inputs;        // graph inputs, plain row-major, ProgramSpec order
  std::span<Tensor> outputs;             // graph outputs, allocated by the runtime, plain
  RunObserver* observer = nullptr;       // optional; not owned
  // Temporaries for this run: Executable::scratch_bytes() bytes, 64-byte aligned, free to reuse
  // between runs (the runtime shares one buffer between executables that never run at once).
  // Null: the executable uses its own, allocated on its first run without one and kept.
  std::byte* scratch = nullptr;
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Arena bytes an intermediate value needs in the backend's chosen layout (may exceed
  // element_count * dtype size for padded blocked layouts); 0 for other roles.
  virtual size_t storage_bytes(int32_t value) const = 0;
  // An intermediate whose arena bytes intermediate `value` may reuse (the same offset), or -1. A
  // backend offers this when a dispatch can write `value` in place over an input that no later
  // dispatch reads (e.g. a convolution accumulating into its residual): placed together, the
  // dispatch skips copying that input into `value`. Optional for the runtime; the returned
  // value's storage_bytes equal `value`'s.
  virtual int32_t storage_shared_with(int32_t value) const { return -1; }
  // Runs every dispatch in order. Errors name the dispatch.
  virtual Status run(const RunArgs& args) = 0;
  // Bytes of temporaries a run needs in RunArgs::scratch; 0 when none.
  virtual size_t scratch_bytes() const { return 0; }
  // Bytes the executable holds for itself while it lives (temporaries, scratch space, kernels'
  // code and state; an estimate where the backend cannot count exactly), not counting what it
  // shares with other executables of its device (reordered constants) or what a run passes in
  // (arena, RunArgs::scratch). The runtime bounds its
  // cache of prepared plans by this (runtime/plan_cache.h).
  virtual size_t memory_bytes() const { return 0; }
  // How dispatch `d` (position in ProgramSpec::dispatches) runs at these shapes: one line per
  // kernel, primitive or reorder, with its parameters. Empty when the backend does not say.
  virtual std::vector<std::string> describe_dispatch(int32_t d) const { return {}; }
};

struct DeviceOptions {
  int threads = 0;  // 0: all cores
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  // Whether the backend can run this dispatch; the error names the unsupported detail.
  virtual Status supports(const DispatchSpec& dispatch, std::span<const ValueSpec> values) const = 0;
  // Builds an executable for concrete shapes. Kernel and layout choices depend only on `spec`.
  virtual StatusOr<std::unique_ptr<Executable>> prepare(const ProgramSpec& spec) = 0;
  // For a dispatch whose output sizes depend on data (module::Dispatch::data_symbols): computes
  // those sizes from its input tensors (one per dispatch input, plain row-major; an empty Tensor
  // for an absent one). Of `dispatch` it reads the name, op type, attributes and the number of
  // outputs. Errors name the input whose data is out of range.
  virtual StatusOr<std::vector<int64_t>> data_sizes(const DispatchSpec& dispatch,
                                                    std::span<const Tensor> inputs) = 0;
};

}  // namespace kiln::hal
