// Hardware abstraction: what the runtime asks of a backend. A Device checks and prepares programs
// (program.h) into Executables (executable.h), gives out buffers (allocator.h), and takes
// transfers and runs on its queue (queue.h). Backends are created by name from the registry
// (registry.h); the runtime sees only these interfaces, never a backend's headers.
//
// A backend is a sibling folder of hal/cpu and hal/null implementing Device and Executable,
// registered in src/kiln/backends.
//
// Threads: a runtime::Session shares its device among the runs it serves at once, so every method
// of a Device, of its Allocator and of its Queue may be called from several threads at once. An
// Executable runs one call at a time (each belongs to one of the session's run states), while
// different executables of one device may run at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/hal/allocator.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/executable.h"
#include "kiln/hal/program.h"
#include "kiln/hal/queue.h"

namespace kiln::hal {

// How the CPU device (and a GPU backend's CPU fallback) sizes the OpenMP team of each run
// (hal/cpu/team_choice.h, docs/architecture.md "Threads on a busy machine").
enum class TeamPolicy : uint8_t {
  kAdaptive,   // the full team, or a one-thread plan while that runs faster (a busy machine)
  kFull,       // always the full team; no one-thread plan is made
  kOneThread,  // always the one-thread plan: tests compare its bits with the full team's
};

// "adaptive", "full", "one-thread"; the error names the accepted words.
StatusOr<TeamPolicy> parse_team_policy(std::string_view text);
std::string_view team_policy_name(TeamPolicy policy);

struct DeviceOptions {
  int threads = 0;  // 0: all cores (of the CPU, and of a GPU backend's CPU fallback)
  TeamPolicy team_policy = TeamPolicy::kAdaptive;
  // Which of the backend's physical devices: what follows ':' in the device name ("vulkan:1" ->
  // "1"); empty for the backend's default. Only backends registered as taking an index accept one.
  std::string index;
  // Whether a dispatch that a GPU backend cannot run may run on its CPU fallback; false: prepare
  // refuses such a dispatch, naming it and why (`--no-fallback`).
  bool allow_fallback = true;
  // CPU: the bytes of activations (a dispatch's sample-holding inputs and outputs, whole batch)
  // from which a run of per-sample dispatches runs one sample at a time (hal/cpu/sample_groups.h);
  // nullopt: half the machine's last-level cache; 0: every such run of two or more dispatches;
  // UINT64_MAX: never. The bits are the same either way.
  std::optional<uint64_t> sample_group_bytes;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  // Whether the backend can run this dispatch; the error names the unsupported detail.
  virtual Status supports(const DispatchSpec& dispatch,
                          std::span<const ValueSpec> values) const = 0;
  // Builds an executable for concrete shapes. Kernel and layout choices depend only on `spec`.
  virtual StatusOr<std::unique_ptr<Executable>> prepare(const ProgramSpec& spec) = 0;
  // For a dispatch whose output sizes depend on data (module::Dispatch::data_symbols): computes
  // those sizes from its input tensors (one per dispatch input, plain row-major host tensors; an
  // empty Tensor for an absent one). Of `dispatch` it reads the name, op type, attributes and the
  // number of outputs. Errors name the input whose data is out of range.
  virtual StatusOr<std::vector<int64_t>> data_sizes(const DispatchSpec& dispatch,
                                                    std::span<const Tensor> inputs) = 0;
  // For a device that hands dispatches it cannot run to another device (a GPU backend's CPU
  // fallback): why every dispatch of `op_type` goes there ("the Vulkan backend has no Hardmax
  // kernel"), known before any shape is; empty when the device may run such a dispatch itself
  // (its shapes and attributes decide at prepare), and on devices without a fallback.
  virtual std::string fallback_reason_for_op(std::string_view op_type) const { return {}; }
  // The device's buffers (arena, graph inputs and outputs). Lives as long as the device.
  virtual Allocator& allocator() = 0;
  // The device's queue. Lives as long as the device.
  virtual Queue& queue() = 0;
};

}  // namespace kiln::hal
