// Session: runs a compiled module on a device created by name from the HAL's registry
// (hal/registry.h; the backends are linked by the program, e.g. kiln_backends). Load once; call
// run() with inputs of any size the module's symbols allow. The first run at a new set of symbol
// values prepares a plan for those shapes (kernels, arena offsets); later runs at the same sizes
// reuse it. Plans are kept in a cache bounded by a count and by bytes, least recently used first
// out (plan_cache.h): a model run at any number of sizes holds a fixed budget. Constants reordered
// for the kernels are shared by every plan that uses them (not charged to any plan) and freed with
// the last one. Inputs and outputs are host tensors, bound to the run in place where the device
// addresses host memory (the CPU: zero-copy) and copied through device buffers otherwise
// (hal/host_tensors.h); run_into() writes the outputs into the caller's tensors.
// A module opened from a file borrows the file's mapping for its constants. If another program
// truncates or rewrites that file in place while the session holds it, every later run fails
// (kFailedPrecondition, naming the file), and a run during which it happened fails instead of
// returning outputs computed from changed bytes; kiln never crashes on it (base/mapped_file.h).
// Replacing the file by rename (kiln compile -o, cp to a temporary name and mv) is not a change.
//
// Threads: a Session is thread-safe; one loaded Session serves any number of threads at once.
// What a run changes lives in a run state (run_state.h: the plan cache and the activation arena
// its plans run in). The Session keeps a pool of them: each call takes an idle state, or makes one
// when none is idle, runs on it without holding any lock, and gives it back. Sequential calls
// therefore reuse one state and its plans; N concurrent calls use N states, so the plan cache's
// bounds and the arena are per state, and memory grows with the most calls that ever ran at once
// (states are kept until the Session goes). Outputs do not depend on which state ran a call. The
// module and the stages are shared and never change; the device is shared too, and safe to call
// from several threads (hal/device.h). SessionOptions::threads is the number of cores each run
// uses, set for the calling thread during the run only (OpenMP's team size is per thread), so
// sessions with different thread counts keep theirs in one process and a caller's own team size
// is left as it was.
//
// The runtime links only base, shape, module and hal (never protobuf, the IR, the passes or a
// backend; tests/link checks it).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/hal/device.h"
#include "kiln/hal/registry.h"
#include "kiln/module/module.h"
#include "kiln/runtime/plan_cache.h"
#include "kiln/runtime/run_state.h"
#include "kiln/runtime/stages.h"
#include "kiln/shape/shape.h"

namespace kiln::runtime {

struct SessionOptions {
  std::string device = "cpu";  // a registered device (hal::registered_devices)
  int threads = 0;             // 0: all cores
  // How the CPU device sizes each run's team (hal::TeamPolicy; `--team-policy`).
  hal::TeamPolicy team_policy = hal::TeamPolicy::kAdaptive;
  // Whether a GPU device may run on its CPU fallback what it has no kernel for (false:
  // `--no-fallback`, preparing such a dispatch fails naming it; hal::DeviceOptions).
  bool allow_fallback = true;
  // CPU: from how many bytes of activations a run of per-sample dispatches runs one sample at a
  // time (hal::DeviceOptions::sample_group_bytes; nullopt: from the machine's cache).
  std::optional<uint64_t> sample_group_bytes;
  bool trust_module = false;  // skip the module checksum (structure is still verified)
  // Refuse to run shapes whose activations (arena) plus outputs need more than this many bytes;
  // checked before anything that size is allocated. 0: default_max_memory_bytes().
  uint64_t max_memory_bytes = 0;
  // Prepared plans kept (one per stage and set of sizes), and their bytes together, per run state
  // (each thread running at once has one); the least recently used go first. 0:
  // kDefaultMaxPlans, kDefaultMaxPlanBytes. A plan over the byte bound alone is still kept, as the
  // only one (plan_cache.h).
  size_t max_plans = 0;
  uint64_t max_plan_bytes = 0;
  // Wraps the device once created (optional): triage's fault injection (triage/fault_device.h).
  hal::DeviceDecorator decorate_device = {};
};

inline constexpr size_t kDefaultMaxPlans = 64;
inline constexpr uint64_t kDefaultMaxPlanBytes = uint64_t{256} << 20;

// Three quarters of the machine's physical memory.
uint64_t default_max_memory_bytes();

class Session {
 public:
  // Loads and verifies a module file, then creates the device.
  static StatusOr<std::unique_ptr<Session>> open(const std::string& module_path,
                                                 const SessionOptions& options = {});
  static StatusOr<std::unique_ptr<Session>> create(
      std::shared_ptr<const module::ModuleContents> module, const SessionOptions& options = {});
  ~Session();

  const module::ModuleContents& module() const { return *module_; }

  // Symbol values implied by the inputs' shapes. Errors name the input and dim: wrong count,
  // dtype, rank, a static dim that differs, a symbol bound to two different values, sizes that
  // break an assumption the compiler made (module().assumptions; kiln/shape/assumption.h).
  StatusOr<Bindings> bind(std::span<const Tensor> inputs) const;
  StatusOr<Bindings> bind_values(std::span<const HostValue> inputs) const;

  // Runs the module. Inputs are plain row-major tensors in module().inputs order; outputs are
  // returned in module().outputs order. An `observer` (not owned) sees every dispatch as it
  // finishes, dispatches numbered as in module().dispatches (hal::RunObserver). A module with
  // data-dependent sizes runs in stages (stages.h): before each, the symbols its first dispatch
  // binds are computed from that dispatch's inputs. `bound` (optional) receives every symbol's
  // value in this run, data symbols included. Safe to call from many threads at once.
  // A module with a sequence or optional input or output (module::ModuleValue::form) runs
  // through run_values; run() refuses it naming the value.
  StatusOr<std::vector<Tensor>> run(std::span<const Tensor> inputs,
                                    hal::RunObserver* observer = nullptr,
                                    Bindings* bound = nullptr);
  // run() for any module: inputs and outputs are host values (base/host_value.h), each a tensor,
  // a sequence of tensors or an optional, of the form the module gives it. Errors as run()'s, and
  // an input of another form or dtype names the input.
  StatusOr<std::vector<HostValue>> run_values(std::span<const HostValue> inputs,
                                              hal::RunObserver* observer = nullptr,
                                              Bindings* bound = nullptr);

  // run(), writing the outputs into the caller's tensors: `outputs` has one per module output, in
  // module().outputs order, each with the dtype and dims that output has for these inputs
  // (output_shapes(); one whose dims depend on data is checked once they are known) and writable
  // bytes (Tensor::create, or Tensor::borrow_mutable on the caller's memory, aligned at least to
  // the element size, overlapping no input and no other output). On the CPU each tensor's bytes
  // are bound as the run's output buffer: written in place, no copy. Errors name the output whose
  // count, dtype or dims differ; after an error the outputs' contents are unspecified. Safe to
  // call from many threads at once.
  Status run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs);

  // The dims each module output has for these inputs, in module().outputs order. Errors: inputs
  // that bind() refuses; an output whose dims depend on data known only after a run (a data
  // symbol, stages.h), naming the output and the symbol.
  StatusOr<std::vector<ConcreteShape>> output_shapes(std::span<const Tensor> inputs) const;

  // How each dispatch runs at these bindings (kernels, primitives, reorders with their
  // parameters), one list of lines per module dispatch; prepares them first if needed (on a run
  // state of the pool, as a run). The bindings must include data symbols (run's `bound`). Safe to
  // call while other threads run.
  StatusOr<std::vector<std::vector<std::string>>> describe_dispatches(const Bindings& bindings);

  // Concrete shape of every module value for these bindings (data symbols included, as above).
  StatusOr<std::vector<ConcreteShape>> value_shapes(const Bindings& bindings) const;

  // The device's own description (hal::Device::name): "cpu (oneDNN 3.0.0, 2 threads)".
  std::string device_name() const { return device_->name(); }

  // The plan cache's bounds (defaults resolved), which hold per run state.
  const PlanCacheLimits& plan_cache_limits() const { return context_.limits; }
  // The plan caches' figures summed over the run states, each as of its last finished call.
  PlanCacheStats plan_cache_stats() const;
  // Bytes of the activation arenas now allocated, summed over the run states as above.
  size_t arena_bytes() const;

 private:
  // A run state, and its figures when it was last given back.
  struct Slot {
    std::unique_ptr<RunState> state;
    PlanCacheStats stats;
    size_t arena_bytes = 0;
  };

  Session(std::shared_ptr<const module::ModuleContents> module, std::unique_ptr<hal::Device> device,
          PlanCacheLimits limits, uint64_t max_memory_bytes);
  // An idle run state (the one given back last), or a new one when none is idle.
  RunState& acquire();
  // Gives `state` back to the pool, noting its figures.
  void release(RunState& state);
  // f(RunState&) on a state of the pool, given back afterwards.
  template <typename F>
  auto with_state(F&& f) {
    RunState& state = acquire();
    auto result = f(state);
    release(state);
    return result;
  }
  // OK while the module's file holds what was loaded (or the module came from memory).
  Status check_module_file() const;
  // The first data symbol (stages.h) among the dims of `value`; empty when there is none.
  std::string data_symbol_of(const module::ModuleValue& value) const;

  // Immutable once created, read by every run at once.
  std::shared_ptr<const module::ModuleContents> module_;
  std::unique_ptr<hal::Device> device_;
  std::vector<Stage> stages_;
  std::set<std::string, std::less<>> data_symbols_;
  RunContext context_;

  // The pool of run states (declared after what they read, so they go first).
  mutable std::mutex pool_mutex_;
  std::vector<Slot> slots_;      // every state made
  std::vector<RunState*> idle_;  // those not running, given back last at the end
};

}  // namespace kiln::runtime
