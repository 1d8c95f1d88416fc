// RunState: what a run of a Session changes, apart from what it reads. It holds the plans prepared
// for the sizes it met (a PlanCache: kernels, arena offsets) and the one activation arena they
// run in, and runs the module's stages on them. A Session keeps a pool of run states; each call
// takes one for itself (session.h), so concurrent calls never share a plan, an executable or an
// arena, and sequential calls reuse one state with its plans.
//
// The plan cache's bounds apply per state. All plans of a state run in its arena (activations,
// then the kernels' temporaries: hal::RunArgs::scratch), a buffer the device allocates
// (device-local), as large as the largest plan the state holds needs: it grows for a larger plan
// and shrinks once the plan that needed it is evicted. Constants reordered for the kernels are the
// device's, shared by every plan of every state.
//
// Not thread-safe: one call at a time per state. What it reads (RunContext) is immutable, except
// the device, whose methods are safe to call from several threads at once (hal/device.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/base/host_value.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/hal/device.h"
#include "kiln/module/module.h"
#include "kiln/runtime/plan_cache.h"
#include "kiln/runtime/stages.h"
#include "kiln/shape/shape.h"

namespace kiln::runtime {

// What every run state of a Session reads; the Session owns it and outlives its states.
struct RunContext {
  const module::ModuleContents* module = nullptr;
  hal::Device* device = nullptr;  // shared by every state
  const std::vector<Stage>* stages = nullptr;
  PlanCacheLimits limits;         // per state
  uint64_t max_memory_bytes = 0;  // per run: activations (arena) plus outputs
};

// Symbol values implied by the shapes of `inputs` (module.inputs order), checked against every
// input's form, dtype and dims (a sequence's or optional's form and dtype) and the module's
// assumptions (Session::bind; a body's inputs each time it runs).
StatusOr<Bindings> bind_inputs(const module::ModuleContents& module,
                               std::span<const HostValue> inputs);

// The concrete dims of `value` for `bindings`. Errors name the value.
StatusOr<ConcreteShape> concrete_shape(const module::ModuleValue& value, const Bindings& bindings);

// RunState runs a host stage (stages.h) itself: it reads the dispatch's inputs, runs the op's
// semantics on the host (kiln/base/control_flow.h, kiln/base/sequence_ops.h; sequences and
// optionals are held there as host tensors, and a tensor crossing into a sequence or out of one is
// a host tensor like any value crossing a stage boundary) and each body run as a nested module
// on a run state of its own (made on first use, one per body, with its own plans and arena, kept
// as long as this state), binds the dispatch's data symbols from the outputs' dims and checks
// every output's dims and the assumptions against them. Only the If branch taken runs (and is
// prepared). An observer sees the control-flow dispatch once, not the bodies' dispatches.
class RunState {
 public:
  explicit RunState(const RunContext& context);
  ~RunState();
  RunState(const RunState&) = delete;
  RunState& operator=(const RunState&) = delete;

  // Runs the module on `inputs` (module().inputs order), whose symbols `bindings` holds
  // (Session::bind, already checked). Outputs (module().outputs order) are allocated and returned,
  // or, when `into` is not empty, written into its tensors, which must have one per output with
  // the output's dtype and dims (errors name the output; an output whose dims depend on data is
  // checked once its stage knows them) and writable bytes; then the result is empty. On the CPU
  // an output's tensor is bound as the run's output buffer (no copy). `observer` and `bound` as
  // Session::run.
  // A sequence or optional output is never written into `into` (an error names it).
  StatusOr<std::vector<HostValue>> run(std::span<const HostValue> inputs, Bindings bindings,
                                       hal::RunObserver* observer, Bindings* bound,
                                       std::span<Tensor> into = {});

  // Session::describe_dispatches on this state's plans.
  StatusOr<std::vector<std::vector<std::string>>> describe_dispatches(const Bindings& bindings);

  const PlanCacheStats& plan_cache_stats() const { return plans_.stats(); }
  // Bytes of the activation arena now allocated.
  size_t arena_bytes() const { return arena_bytes_; }

 private:
  struct Prepared;
  struct Body;
  // A stage's index and the bindings its plan depends on.
  using PlanKey = std::pair<size_t, Bindings>;

  StatusOr<Prepared*> prepare(size_t stage, const Bindings& bindings);
  // Makes the arena fit `prepared` and, after an eviction, no larger than the held plans need.
  Status size_arena(const Prepared& prepared);
  Status bind_data_symbols(const Stage& stage, const std::map<int32_t, HostValue>& held,
                           Bindings& bindings);
  // Runs host stage `stage`, adding its outputs to `held` and its symbols to `bindings`.
  Status run_control(const Stage& stage, std::map<int32_t, HostValue>& held, Bindings& bindings,
                     hal::RunObserver* observer);
  // The run state of body `b` of dispatch `dispatch`.
  Body& body(int32_t dispatch, size_t b);

  RunContext context_;
  PlanCache<PlanKey, Prepared> plans_;
  std::unique_ptr<hal::Buffer> arena_;
  size_t arena_bytes_ = 0;
  bool plan_evicted_ = false;  // since the arena was last sized
  std::map<std::pair<int32_t, size_t>, std::unique_ptr<Body>> bodies_;
};

// Caller tensors for a run's outputs (run's `into`): one per module output, and output `index`'s
// tensor with `shape` (its dims for this run), the output's dtype and bytes. Errors name the
// output.
Status check_output_count(const module::ModuleContents& module, std::span<const Tensor> outputs);
Status check_output_tensor(const module::ModuleContents& module, size_t index,
                           const ConcreteShape& shape, const Tensor& tensor);

}  // namespace kiln::runtime
