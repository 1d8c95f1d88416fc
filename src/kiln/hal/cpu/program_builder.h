// ProgramBuilder: turns a ProgramSpec into the steps of a CpuExecutable, choosing one layout per
// value as it goes (docs/architecture.md invariant 1: from the concrete spec only).
//
// Layout rules. Values of the dtypes oneDNN stores (f32, f16, bf16: stored_data_type) have a
// layout, in their own data type; other dtypes are plain bytes (plain_output). Graph inputs,
// graph outputs and constants are plain (row-major). An intermediate
// takes the layout its producer writes (oneDNN's blocked choice for conv, kept by bn/relu/pool/
// binary ops that follow it); a consumer that wants another layout gets a reorder: at prepare
// time, cached on the device, for constants; at run time, into a per-dispatch temporary, for
// anything else. A reorder also converts the data type when the consumer wants another (f16
// data for a primitive that computes in f32). A producer whose output must be plain (a graph
// output) writes a temporary and reorders into the output.
//
// Op builders (one per op family, see op_table.h) call input_as() for each input, output() for
// each output, and add their steps in order.
//
// Sample groups (sample_groups.h): a dispatch of a group is built for one sample. While it is
// built, value() and op() show every value the group slices with dim 0 = 1, and such a value's
// layout is its one-sample layout; the op builder needs to know nothing of the group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/cpu/device_state.h"
#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/hal/cpu/op_params.h"
#include "kiln/hal/cpu/sample_groups.h"
#include "kiln/hal/cpu/step.h"
#include "kiln/hal/device.h"

namespace kiln::hal::cpu {

class CpuExecutable;
struct OpPath;

class ProgramBuilder {
 public:
  // Each dispatch gets the team size thread_policy.h gives it, at most `max_team` (0: no bound
  // but the device's threads): 1 builds the one-thread plan of team_choice.h.
  ProgramBuilder(const ProgramSpec& spec, std::shared_ptr<DeviceState> device, int max_team = 0);

  // Checks the spec, builds every dispatch in order and returns the executable. Errors from a
  // dispatch carry "in dispatch 'name' (Op)".
  StatusOr<std::unique_ptr<CpuExecutable>> build();

  // --- for op builders, about the dispatch being built ---
  const OpReader& op() const { return *op_; }
  // The OpenMP team size the dispatch's primitives are made and run with, and the one the
  // device's full plan gives it (they differ only while building a one-thread plan; a builder
  // then checks that a kernel whose bits might depend on the team gives the full plan's bits,
  // see PrimitiveStep::mark_team_dependent).
  int team() const { return team_; }
  int full_team() const { return full_team_; }
  const ValueSpec& value(int32_t v) const { return values()[v]; }
  const dnnl::engine& engine() const { return device_->engine; }
  // "conv0 (Conv): what" for step descriptions.
  std::string label(std::string_view what) const;

  // The layout value `v` (f32, f16 or bf16, already available) is stored in.
  const dnnl_desc& layout(int32_t v) const { return *layouts_[v]; }
  // Whether `v` must be stored plain (graph outputs).
  bool requires_plain(int32_t v) const;
  // Whether `v` is a constant (its data is known at prepare time).
  const Tensor* constant(int32_t v) const;

  // A buffer holding value `v` in layout `want` (whose data type may differ from the stored one:
  // the reorder converts). `view` says how the value's bytes read with want's dims when the value
  // is stored plain: by default row-major (a regrouping with the same element count, e.g. goihw
  // conv weights); a strided view expresses a transpose. The view's data type does not matter:
  // it reads the stored data type.
  StatusOr<BufferRef> input_as(int32_t v, const dnnl_desc& want,
                               const std::optional<dnnl_desc>& view = std::nullopt);
  // Constant `v` of any dtype (its plain bytes read as `source`, e.g. s8 conv weights) in layout
  // `target`, reordered once per device (WeightCache::get).
  StatusOr<BufferRef> constant_as(int32_t v, const dnnl_desc& source, const dnnl_desc& target);
  // Constant `v` (plain, read as `source`) in a kernel's own packing `target` (see
  // WeightCache::get_transformed), computed once per device and held by the executable.
  StatusOr<BufferRef> constant_transformed(int32_t v, const dnnl_desc& source,
                                           const dnnl_desc& target,
                                           const WeightCache::Transform& transform);
  // Where a step writes value `v` in layout `produced`, whose data type is the value's. The value
  // takes that layout, or, when it must be plain and `produced` is not, the step writes a temporary
  // that is reordered into the value after this dispatch's steps.
  StatusOr<BufferRef> output(int32_t v, const dnnl_desc& produced);
  // Whether output `out` (of a stored dtype) of the dispatch being built may be stored in `layout`
  // over the bytes of its input `in`: both are intermediates, `in` is stored in `layout` (so the
  // sizes match), and neither a later dispatch nor another input slot of this one reads `in`.
  bool can_overwrite(int32_t in, int32_t out, const dnnl_desc& layout) const;
  // output() for an `out` that starts as a copy of `in` and may take over its bytes
  // (can_overwrite must hold, else an error): adds the copy, which does nothing when the runtime
  // placed both at one offset as storage_shared_with offers.
  StatusOr<BufferRef> output_over(int32_t out, int32_t in, const dnnl_desc& layout);
  // output_over() where can_overwrite holds, else output(): for a step that reads each element of
  // `in` before it writes the same element of `out` (element by element, in one layout). Writing
  // a line just read saves fetching a line of its own. `over` says which it took.
  StatusOr<BufferRef> output_over_if_free(int32_t out, int32_t in, const dnnl_desc& layout,
                                          bool& over);
  // Whether intermediate `out` may be stored in `layout` (its dims, the same dtype and byte size
  // as `in`'s stored layout; plain where `out` must be) over the bytes of intermediate `in`,
  // which no later dispatch nor another input slot of this one reads: a relabelling of `in`'s
  // bytes (Reshape, a Transpose that reads them in the order they are stored).
  bool can_alias_over(int32_t in, int32_t out, const dnnl_desc& layout) const;
  // output() for such an `out` (can_alias_over must hold, else an error): `out` takes `layout`
  // and shares `in`'s storage; the copy it adds does nothing when the runtime placed both at one
  // offset, as storage_shared_with offers.
  StatusOr<BufferRef> alias_over(int32_t out, int32_t in, const dnnl_desc& layout);
  // Reshape without a copy: whether intermediate `out` (plain, another shape, same dtype and
  // element count) may take over the bytes of intermediate `in`, which is stored plain and read by
  // no later dispatch nor by another input slot of this one.
  bool can_reshape_over(int32_t in, int32_t out) const;
  // output() for such an `out` (can_reshape_over must hold, else an error): `out` is plain and
  // shares `in`'s storage; the copy it adds does nothing when the runtime placed both at one
  // offset, as storage_shared_with offers.
  StatusOr<BufferRef> reshape_over(int32_t out, int32_t in);
  // The value's own buffer for a plain output of any dtype (element_count * dtype size bytes).
  BufferRef plain_output(int32_t v);
  // Int8 values between int8 ops: whether intermediate `v` is read only as input 0 of dispatches
  // that take these fast paths (qlinear_op.cc): QLinearConv's int8 convolution, which reads its
  // input channels-last, and per-tensor DequantizeLinear, element-wise in any dense layout. Its
  // producer may then store it in `layout` (a dense u8/s8 layout of its shape, same bytes as
  // plain) with int8_output; readers find it with stored_as / int8_layout.
  bool int8_readers_take_channels_last(int32_t v) const;
  // Whether intermediate `v` is read by a later dispatch, and every later dispatch reads it only
  // at input slots that `accepts` (the reader, the op path it takes, the slot). A reader of dims
  // only (Shape, Size: reads_dims_only) takes any layout and is not asked.
  bool readers_accept(
      int32_t v, const std::function<bool(const OpReader&, const OpPath&, size_t)>& accepts) const;
  BufferRef int8_output(int32_t v, const dnnl_desc& layout);
  // The layout int8_output gave u8/s8 value `v`; nullopt when it is plain.
  std::optional<dnnl_desc> int8_layout(int32_t v) const { return layouts_[v]; }
  // Whether value `v` is stored in `layout` (any dtype with a layout).
  bool stored_as(int32_t v, const dnnl_desc& layout) const {
    return layouts_[v] && *layouts_[v] == layout;
  }
  // A per-dispatch temporary of `bytes` (64-byte aligned, valid only during this dispatch).
  BufferRef temp(size_t bytes);

  // Attributes with the user-managed scratchpad every primitive uses.
  dnnl::primitive_attr attr() const;
  // Adds a primitive step for `pd`, binding the shared scratchpad when the primitive needs one.
  // Callers bind the other arguments on the returned step. May throw dnnl::error.
  PrimitiveStep& add_primitive(std::string label, const dnnl::primitive_desc_base& pd,
                               dnnl::primitive primitive, int64_t repeat = 1);
  // Adds a reorder (or a plain copy when the layouts are equal; a ConvertStep, plus an f32
  // reorder when the layouts differ too, for f32 <-> f16/bf16). May throw dnnl::error.
  void add_reorder(const BufferRef& from, const dnnl_desc& from_desc, const BufferRef& to,
                   const dnnl_desc& to_desc);
  void add(std::unique_ptr<Step> step) { steps_.push_back(std::move(step)); }
  // Vouching (finite_guard.h): the dispatch being built promises that, in a run where its
  // GuardedStep marks `v` in ExecContext::vouched, `v` holds only finite values within `bound`.
  void vouch(int32_t v, float bound);
  // The bound a marked `v` holds, for a reader in the dispatch being built: only where `v`'s
  // producer ran in the same sample group as this dispatch, or both outside any (a mark set for
  // one sample says nothing of the batch).
  std::optional<float> vouched_bound(int32_t v) const;
  // The number of steps added so far, and the steps added since `first` of them, taken out of the
  // list (to run inside another step: GuardedStep).
  size_t step_count() const { return steps_.size(); }
  std::vector<std::unique_ptr<Step>> take_steps(size_t first);

 private:
  Status validate_spec() const;
  Status build_dispatch(size_t index);
  // The values as the dispatch being built sees them (one sample of each sliced value inside a
  // sample group).
  std::span<const ValueSpec> values() const {
    return group_ >= 0 ? std::span<const ValueSpec>(sample_values_)
                       : std::span<const ValueSpec>(spec_.values);
  }
  // Plans the sample groups (plan_sample_view: and the one-sample view of the values they slice).
  void plan_groups();
  void plan_sample_view();
  // Before the first dispatch of group `g`: every value it slices that is already stored takes
  // its one-sample layout; false (and the group is dropped) when one does not store samples
  // contiguously.
  bool enter_group(int32_t g);
  // After its last dispatch: the values the group sliced take their whole-batch layouts and
  // bytes; values internal to it keep one sample's.
  Status leave_group();

  const ProgramSpec& spec_;
  std::shared_ptr<DeviceState> device_;
  int max_team_;
  // f32/f16/bf16 values once available; u8/s8 values only when int8_output stored them.
  std::vector<std::optional<dnnl_desc>> layouts_;
  std::vector<bool> available_;
  std::vector<size_t> storage_;          // intermediates' bytes
  std::vector<int32_t> last_reader_;     // per value: index of the last dispatch reading it
  std::vector<int32_t> shared_storage_;  // per value: output_over's `in`, else -1
  size_t dispatch_index_ = 0;            // the dispatch being built
  int team_ = 1, full_team_ = 1;         // its team sizes (team(), full_team())
  std::vector<std::unique_ptr<Step>> steps_;
  std::vector<DispatchSteps> dispatch_steps_;
  std::vector<std::shared_ptr<const ReorderedConstant>> held_constants_;
  std::optional<OpReader> op_;
  std::vector<SampleInputs> sample_inputs_;  // per dispatch, from its op path
  SampleGroupPlan groups_;
  std::vector<ValueSpec> sample_values_;  // spec_.values, sliced ones with dim 0 = 1
  std::vector<std::optional<dnnl_desc>> sample_layouts_;  // per sliced value, once known
  int32_t group_ = -1;                                    // the group being built, or -1
  struct Vouched {
    float bound;
    int32_t group;
  };
  std::vector<std::optional<Vouched>> vouched_;  // per value: vouch()
  struct PendingReorder {
    BufferRef from;
    dnnl_desc from_desc;
    int32_t value;
  };
  std::vector<PendingReorder> pending_;
  size_t temp_used_ = 0;
  size_t workspace_bytes_ = 0;
  size_t scratchpad_bytes_ = 0;
};

}  // namespace kiln::hal::cpu
