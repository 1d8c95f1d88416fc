// CpuExecutable: the CPU backend's prepared program. Holds the steps ProgramBuilder made (all
// oneDNN primitives created, constants reordered). Its temporaries (a workspace for per-dispatch
// temporaries, then one user-managed oneDNN scratchpad sized for the largest primitive) live in
// RunArgs::scratch, or in a buffer of its own when a run passes none.
//
// run() resolves every value's buffer (host-visible: the device's are) to an address and runs the
// steps in order, each dispatch's under the OpenMP team size it was prepared with
// (thread_policy.h); it allocates no buffers (oneDNN still builds a small argument map per
// primitive call). The caller's own team size is back when run() returns. With a
// RunObserver it runs the steps dispatch by dispatch, timing each and handing observed outputs over
// as plain tensors (reordered out of blocked layouts). One run at a time per executable: concurrent
// run() calls on the same executable are not allowed (they share the workspace); different
// executables may run concurrently.
//
// Sample groups (sample_groups.h): the dispatches of a group run one sample at a time, all of
// them for sample 0, then for sample 1, ...; each run of a dispatch sees every value the group
// slices moved to that sample's bytes. An observed run does the same and hands the observer each
// dispatch's outputs whole, gathered sample by sample as they are made.
//
// Busy machines (team_choice.h): where the device has more than one thread, the executable may
// also run a one-thread plan, which ProgramBuilder builds from a copy of the same spec with
// every dispatch on one thread, when a run first wants it. Each run takes the full plan or that
// one, as the device's TeamPolicy says (adaptive: TeamChoice, from the times of earlier runs).
// The one-thread plan gives the full plan's bits: a dispatch takes its one-thread steps only
// where they run the same kernels (the same step descriptions) and every one gives the same
// bits at any team size (Step::same_bits_at_any_team_size); the others keep their full-team
// steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/hal/cpu/device_state.h"
#include "kiln/hal/cpu/runnable_tasks.h"
#include "kiln/hal/cpu/sample_groups.h"
#include "kiln/hal/cpu/step.h"
#include "kiln/hal/cpu/team_choice.h"
#include "kiln/hal/device.h"

namespace kiln::hal::cpu {

class CpuExecutable : public Executable {
 public:
  // What ProgramBuilder hands over.
  struct Parts {
    std::shared_ptr<DeviceState> device;
    std::vector<ValueSpec> values;         // constant pointers cleared; see `constants`
    std::vector<Tensor> constants;         // per value: a copy sharing the constant's storage
    std::vector<int32_t> inputs, outputs;  // graph inputs/outputs (value indices)
    std::vector<size_t> storage;           // per value: arena bytes (intermediates)
    std::vector<int32_t> shared_storage;   // per value: storage_shared_with, -1 for none
    std::vector<std::string> layouts;      // per value: chosen layout, described
    std::vector<std::optional<dnnl::memory::desc>> descs;  // per f32 value: chosen layout
    std::vector<std::unique_ptr<Step>> steps;
    std::vector<DispatchSteps> dispatches;  // per ProgramSpec dispatch, in order
    std::vector<std::shared_ptr<const ReorderedConstant>> held_constants;
    // Per sample group: its dispatches, and the values whose place moves by `strides` bytes per
    // sample (the group's values stored whole; those internal to it hold one sample and stay).
    struct GroupRun {
      SampleGroup group;
      std::vector<int32_t> values;
      std::vector<size_t> strides;
      bool operator==(const GroupRun&) const = default;
    };
    std::vector<GroupRun> groups;
    // Per value a group slices: one sample's layout (for values internal to a group, also
    // `descs`).
    std::vector<std::optional<dnnl::memory::desc>> sample_descs;
    size_t workspace_bytes = 0;
    size_t scratchpad_bytes = 0;
  };

  // Error when oneDNN cannot create a stream.
  static StatusOr<std::unique_ptr<CpuExecutable>> create(Parts parts);
  ~CpuExecutable() override;

  // Lets runs take a one-thread plan built from `spec` (this executable's own spec) when they
  // first want it; nothing where every dispatch already runs on one thread. Keeps a copy of the
  // spec: its attributes, and constants as this executable holds them.
  void allow_one_thread_plan(const ProgramSpec& spec);
  // Builds the one-thread plan now if it is allowed and not built yet; whether there is one.
  bool build_one_thread_plan();
  // Takes `plan` (built from the same spec with one thread per dispatch) as this executable's
  // one-thread plan, as the header says. Returns false, keeping no plan, when the two store some
  // value differently (layout or storage), which would make their steps incompatible, or when
  // the plan needs more workspace or scratchpad than this executable's scratch_bytes() holds.
  bool adopt_one_thread_plan(std::unique_ptr<CpuExecutable> plan);
  // How many dispatches the one-thread plan runs on one thread where the full plan runs on more
  // (0 while there is no such plan).
  size_t one_thread_dispatches() const;
  // The plan the last run took.
  Team last_team() const { return last_team_; }

  size_t storage_bytes(int32_t value) const override;
  int32_t storage_shared_with(int32_t value) const override;
  // The sample groups' dispatches.
  std::vector<std::pair<int32_t, int32_t>> interleaved_dispatches() const override;
  // Errors: a value binding that is missing, not host-visible or smaller than the value needs,
  // and oneDNN execution failures (naming the dispatch).
  Status run(const RunArgs& args) override;
  // The workspace, then the scratchpad, each rounded up to 64 bytes.
  size_t scratch_bytes() const override;

  // One line per step, in run order: the kernel chosen for each dispatch and every reorder.
  std::vector<std::string> summary() const;
  // The summary lines of dispatch `d`'s steps; empty for an index out of range.
  std::vector<std::string> describe_dispatch(int32_t d) const override;
  // The layout chosen for value `v` ("plain 1x3x8x8", "aBcd8b 1x16x8x8", ...).
  const std::string& layout_of(int32_t v) const { return parts_.layouts[v]; }
  size_t workspace_bytes() const { return parts_.workspace_bytes; }
  // An estimate per step (kStepBytes) and per oneDNN primitive (kPrimitiveBytes: its JIT code
  // and state), plus scratch_bytes() once a run without RunArgs::scratch made it allocate its
  // own. Reordered constants are the device's, shared.
  size_t memory_bytes() const override;
  static constexpr size_t kStepBytes = 1024;
  static constexpr size_t kPrimitiveBytes = 16 * 1024;
  size_t scratchpad_bytes() const { return parts_.scratchpad_bytes; }

 private:
  // A way to run the program: per dispatch its steps (indices into `steps`) and team size.
  struct Plan {
    std::vector<DispatchSteps> dispatches;
    std::vector<Step*> steps;
  };

  explicit CpuExecutable(Parts parts) : parts_(std::move(parts)) {}
  // Resolves every value's binding to value_ptrs_, checking each.
  Status bind_values(const RunArgs& args);
  // The steps of dispatch `d` of `plan`, on its team size.
  Status run_dispatch(const ExecContext& ctx, const Plan& plan, size_t d);
  // `ctx` with the values of group `run` moved to sample `sample` (in sample_ptrs_, which sample
  // 0 first fills from value_ptrs_); samples are visited from 0 up.
  ExecContext at_sample(const ExecContext& ctx, const Parts::GroupRun& run, int64_t sample);
  Status run_observed(const ExecContext& ctx, const Plan& plan, RunObserver& observer);
  Status run_group_observed(const ExecContext& ctx, const Plan& plan, const Parts::GroupRun& run,
                            RunObserver& observer);
  // A plain copy of `shape` elements of `dtype` stored at `from` in `desc` (plain when null).
  StatusOr<Tensor> read_plain(const std::byte* from, std::string_view name, DType dtype,
                              const ConcreteShape& shape,
                              const std::optional<dnnl::memory::desc>& desc) const;

  Team choose_team() const;

  Parts parts_;
  Plan full_plan_;
  // What building the one-thread plan needs, until it is built (or failed to be).
  struct OneThreadSpec {
    ProgramSpec spec;                    // attributes and constants point into the two below
    std::vector<Attributes> attributes;  // per dispatch
  };
  std::unique_ptr<OneThreadSpec> one_thread_spec_;
  std::unique_ptr<CpuExecutable> one_thread_source_;  // owns the adopted steps
  std::optional<Plan> one_thread_plan_;
  // Other tasks want the cores when more than this process's calling thread is runnable.
  TeamChoice team_choice_{[] { return runnable_tasks().value_or(1) > 1; }};
  Team last_team_ = Team::kFull;
  std::byte* own_scratch_ = nullptr;  // for runs without RunArgs::scratch
  std::vector<std::byte*> value_ptrs_;
  std::vector<std::byte*> sample_ptrs_;  // value_ptrs_ at one sample of a group
  std::vector<uint8_t> vouched_;         // ExecContext::vouched
  std::vector<int32_t> group_of_;        // per dispatch: its index in parts_.groups, or -1
  dnnl::stream stream_;
};

}  // namespace kiln::hal::cpu
