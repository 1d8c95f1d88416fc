#include "kiln/hal/cpu/program_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kiln/base/checked_math.h"
#include "kiln/hal/cpu/convert_step.h"
#include "kiln/hal/cpu/cpu_executable.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/thread_policy.h"

namespace kiln::hal::cpu {
namespace {

constexpr size_t kAlign = 64;

size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

int64_t element_count(const ValueSpec& v) { return checked_product(v.shape).value_or(0); }

}  // namespace

ProgramBuilder::ProgramBuilder(const ProgramSpec& spec, std::shared_ptr<DeviceState> device,
                               int max_team)
    : spec_(spec),
      device_(std::move(device)),
      max_team_(max_team > 0 ? std::min(max_team, device_->threads) : device_->threads) {}

std::string ProgramBuilder::label(std::string_view what) const {
  return fmt::format("{} ({}): {}", op_->dispatch().name, op_->dispatch().op_type, what);
}

bool ProgramBuilder::requires_plain(int32_t v) const {
  return spec_.values[v].role == ValueRole::kOutput;
}

const Tensor* ProgramBuilder::constant(int32_t v) const {
  const ValueSpec& value = spec_.values[v];
  return value.role == ValueRole::kConstant ? value.constant : nullptr;
}

Status ProgramBuilder::validate_spec() const {
  const auto n = static_cast<int32_t>(spec_.values.size());
  for (const ValueSpec& v : spec_.values) {
    if (!checked_product(v.shape)) {
      return invalid_argument("value '{}' has negative or overflowing dims [{}]", v.name,
                              fmt::join(v.shape, ","));
    }
    if (v.role == ValueRole::kConstant) {
      if (v.constant == nullptr) return invalid_argument("constant '{}' has no data", v.name);
      if (v.constant->dtype() != v.dtype || v.constant->shape() != v.shape) {
        return invalid_argument("constant '{}' is declared {} [{}] but its data is {} [{}]", v.name,
                                dtype_name(v.dtype), fmt::join(v.shape, ","),
                                dtype_name(v.constant->dtype()),
                                fmt::join(v.constant->shape(), ","));
      }
      if (v.constant->element_count() > 0 && v.constant->empty_storage()) {
        return invalid_argument("constant '{}' has no data", v.name);
      }
    }
  }
  auto check_list = [&](const std::vector<int32_t>& list, ValueRole role) -> Status {
    for (int32_t v : list) {
      if (v < 0 || v >= n) {
        return invalid_argument("{} index {} is out of range ({} values)", value_role_name(role), v,
                                n);
      }
      if (spec_.values[v].role != role) {
        return invalid_argument("value '{}' is listed as a {} but its role is {}",
                                spec_.values[v].name, value_role_name(role),
                                value_role_name(spec_.values[v].role));
      }
    }
    for (int32_t v = 0; v < n; ++v) {
      if (spec_.values[v].role == role && std::count(list.begin(), list.end(), v) != 1) {
        return invalid_argument("{} '{}' must be listed exactly once", value_role_name(role),
                                spec_.values[v].name);
      }
    }
    return ok_status();
  };
  KILN_RETURN_IF_ERROR(check_list(spec_.inputs, ValueRole::kInput));
  KILN_RETURN_IF_ERROR(check_list(spec_.outputs, ValueRole::kOutput));
  return ok_status();
}

StatusOr<BufferRef> ProgramBuilder::input_as(int32_t v, const dnnl_desc& want,
                                             const std::optional<dnnl_desc>& view) {
  if (!layouts_[v]) {
    return internal_error("input '{}' ({}) has no oneDNN layout", values()[v].name,
                          dtype_name(values()[v].dtype));
  }
  const dnnl_desc& have = *layouts_[v];
  const dnnl::memory::data_type stored = have.data_type();
  // The view reads the stored bytes, so it has the stored data type.
  const std::optional<dnnl_desc> read =
      view ? std::optional<dnnl_desc>(with_data_type(*view, stored)) : std::nullopt;
  // The stored bytes serve as they are only when they are read as stored: a square matrix with
  // a transposing view has the same dims and layout as the one wanted, yet other bytes.
  if (have == want && (!read || *read == have)) return BufferRef::of_value(v);
  BufferRef from = BufferRef::of_value(v);
  const dnnl_desc plain = plain_desc(have.dims(), stored);
  if (!is_plain(have)) {
    if (have.dims() == want.dims() && !read) {
      BufferRef t = temp(want.get_size());
      add_reorder(from, have, t, want);
      return t;
    }
    // Make it plain first; the view below applies to plain bytes.
    BufferRef t = temp(plain.get_size());
    add_reorder(from, have, t, plain);
    from = t;
  }
  const dnnl_desc source = read ? *read : plain_desc(want.dims(), stored);
  if (source.dims() != want.dims() || source.get_size() != plain.get_size()) {
    return internal_error("value '{}' stored as {} cannot be read as {}", values()[v].name,
                          describe(have), describe(source));
  }
  if (source == want) return from;
  if (from.kind == BufferRef::Kind::kValue) {
    if (const Tensor* c = constant(v)) {
      KILN_ASSIGN_OR_RETURN(auto reordered, device_->weights.get(*c, source, want, engine()));
      std::byte* data = reordered->data();
      held_constants_.push_back(std::move(reordered));
      return BufferRef::at(data);
    }
  }
  BufferRef t = temp(want.get_size());
  add_reorder(from, source, t, want);
  return t;
}

StatusOr<BufferRef> ProgramBuilder::constant_as(int32_t v, const dnnl_desc& source,
                                                const dnnl_desc& target) {
  const Tensor* c = constant(v);
  if (c == nullptr) return internal_error("value '{}' is not a constant", values()[v].name);
  KILN_ASSIGN_OR_RETURN(auto reordered, device_->weights.get(*c, source, target, engine()));
  std::byte* data = reordered->data();
  held_constants_.push_back(std::move(reordered));
  return BufferRef::at(data);
}

StatusOr<BufferRef> ProgramBuilder::constant_transformed(int32_t v, const dnnl_desc& source,
                                                         const dnnl_desc& target,
                                                         const WeightCache::Transform& transform) {
  const Tensor* c = constant(v);
  if (c == nullptr) return internal_error("value '{}' is not a constant", values()[v].name);
  KILN_ASSIGN_OR_RETURN(auto transformed,
                        device_->weights.get_transformed(*c, source, target, transform));
  std::byte* data = transformed->data();
  held_constants_.push_back(std::move(transformed));
  return BufferRef::at(data);
}

StatusOr<BufferRef> ProgramBuilder::output(int32_t v, const dnnl_desc& produced) {
  const ValueSpec& value = values()[v];
  if (stored_data_type(value.dtype) != produced.data_type()) {
    return internal_error("output '{}' is {}, but produced as {}", value.name,
                          dtype_name(value.dtype), describe(produced));
  }
  const dnnl_desc plain = plain_desc(value.shape, produced.data_type());
  if (is_plain(produced)) {
    if (produced.get_size() != plain.get_size()) {
      return internal_error("output '{}' [{}] produced as {}", value.name,
                            fmt::join(value.shape, ","), describe(produced));
    }
    layouts_[v] = plain;
    if (value.role == ValueRole::kIntermediate) storage_[v] = plain.get_size();
    return BufferRef::of_value(v);
  }
  if (produced.dims() != plain.dims()) {
    return internal_error("output '{}' [{}] produced as {}", value.name,
                          fmt::join(value.shape, ","), describe(produced));
  }
  if (requires_plain(v)) {
    BufferRef t = temp(produced.get_size());
    pending_.push_back(PendingReorder{t, produced, v});
    layouts_[v] = plain;
    return t;
  }
  layouts_[v] = produced;
  if (value.role == ValueRole::kIntermediate) storage_[v] = produced.get_size();
  return BufferRef::of_value(v);
}

bool ProgramBuilder::can_overwrite(int32_t in, int32_t out, const dnnl_desc& layout) const {
  const ValueSpec& from = values()[in];
  const ValueSpec& to = values()[out];
  if (from.role != ValueRole::kIntermediate || to.role != ValueRole::kIntermediate ||
      stored_data_type(to.dtype) != layout.data_type() || !layouts_[in] ||
      *layouts_[in] != layout || layout.dims() != to_dnnl_dims(to.shape)) {
    return false;
  }
  if (last_reader_[in] != static_cast<int32_t>(dispatch_index_)) return false;
  // Shared bytes are sliced alike: one sample's bytes cannot hold a whole batch.
  if (groups_.roles[in] != groups_.roles[out]) return false;
  const DispatchSpec& d = spec_.dispatches[dispatch_index_];
  return std::count(d.inputs.begin(), d.inputs.end(), in) == 1;
}

StatusOr<BufferRef> ProgramBuilder::output_over(int32_t out, int32_t in, const dnnl_desc& layout) {
  if (!can_overwrite(in, out, layout)) {
    return internal_error("output '{}' cannot be written over input '{}'", values()[out].name,
                          values()[in].name);
  }
  layouts_[out] = layout;
  storage_[out] = storage_[in];
  shared_storage_[out] = in;
  add_reorder(BufferRef::of_value(in), layout, BufferRef::of_value(out), layout);
  return BufferRef::of_value(out);
}

StatusOr<BufferRef> ProgramBuilder::output_over_if_free(int32_t out, int32_t in,
                                                        const dnnl_desc& layout, bool& over) {
  over = can_overwrite(in, out, layout);
  return over ? output_over(out, in, layout) : output(out, layout);
}

bool ProgramBuilder::can_alias_over(int32_t in, int32_t out, const dnnl_desc& layout) const {
  const ValueSpec& from = values()[in];
  const ValueSpec& to = values()[out];
  const std::optional<dnnl::memory::data_type> type = stored_data_type(from.dtype);
  if (from.role != ValueRole::kIntermediate || to.role != ValueRole::kIntermediate ||
      from.dtype != to.dtype || !type || !layouts_[in] || layout.data_type() != *type ||
      layout.dims() != to_dnnl_dims(to.shape) || layout.get_size() != layouts_[in]->get_size() ||
      (requires_plain(out) && !is_plain(layout))) {
    return false;
  }
  if (last_reader_[in] != static_cast<int32_t>(dispatch_index_)) return false;
  if (groups_.roles[in] != groups_.roles[out]) return false;
  const DispatchSpec& d = spec_.dispatches[dispatch_index_];
  return std::count(d.inputs.begin(), d.inputs.end(), in) == 1;
}

StatusOr<BufferRef> ProgramBuilder::alias_over(int32_t out, int32_t in, const dnnl_desc& layout) {
  if (!can_alias_over(in, out, layout)) {
    return internal_error("output '{}' cannot take the bytes of input '{}'", values()[out].name,
                          values()[in].name);
  }
  layouts_[out] = layout;
  storage_[out] = storage_[in];
  shared_storage_[out] = in;
  add(std::make_unique<CopyStep>(label("copy (none when the bytes are shared)"),
                                 BufferRef::of_value(in), BufferRef::of_value(out),
                                 layout.get_size()));
  return BufferRef::of_value(out);
}

bool ProgramBuilder::can_reshape_over(int32_t in, int32_t out) const {
  const ValueSpec& from = values()[in];
  const ValueSpec& to = values()[out];
  const std::optional<dnnl::memory::data_type> type = stored_data_type(from.dtype);
  // can_alias_over checks the rest (both intermediates of one dtype, byte sizes, readers).
  return type && layouts_[in] && *layouts_[in] == plain_desc(from.shape, *type) &&
         can_alias_over(in, out, plain_desc(to.shape, *type));
}

StatusOr<BufferRef> ProgramBuilder::reshape_over(int32_t out, int32_t in) {
  if (!can_reshape_over(in, out)) {
    return internal_error("output '{}' cannot take the bytes of input '{}'", values()[out].name,
                          values()[in].name);
  }
  return alias_over(out, in,
                    plain_desc(values()[out].shape, *stored_data_type(values()[out].dtype)));
}

bool ProgramBuilder::readers_accept(
    int32_t v, const std::function<bool(const OpReader&, const OpPath&, size_t)>& accepts) const {
  if (values()[v].role != ValueRole::kIntermediate) return false;
  bool read = false;
  for (size_t d = dispatch_index_ + 1; d < spec_.dispatches.size(); ++d) {
    const DispatchSpec& reader = spec_.dispatches[d];
    if (std::count(reader.inputs.begin(), reader.inputs.end(), v) == 0) continue;
    const OpReader op(reader, spec_.values);
    if (!op.check_indices().ok()) return false;
    read = true;
    if (reads_dims_only(op)) continue;
    const StatusOr<const OpPath*> path = select_path(op);
    if (!path.ok()) return false;
    for (size_t slot = 0; slot < reader.inputs.size(); ++slot) {
      if (reader.inputs[slot] == v && !accepts(op, **path, slot)) return false;
    }
  }
  return read;
}

bool ProgramBuilder::int8_readers_take_channels_last(int32_t v) const {
  return readers_accept(v, [v](const OpReader& op, const OpPath& path, size_t slot) {
    return slot == 0 &&
           std::count(op.dispatch().inputs.begin(), op.dispatch().inputs.end(), v) == 1 &&
           (path.op_type == "QLinearConv" || path.op_type == "DequantizeLinear");
  });
}

BufferRef ProgramBuilder::int8_output(int32_t v, const dnnl_desc& layout) {
  BufferRef ref = plain_output(v);
  layouts_[v] = layout;
  return ref;
}

BufferRef ProgramBuilder::plain_output(int32_t v) {
  const ValueSpec& value = values()[v];
  if (auto type = stored_data_type(value.dtype)) layouts_[v] = plain_desc(value.shape, *type);
  if (value.role == ValueRole::kIntermediate) {
    storage_[v] = static_cast<size_t>(element_count(value)) * dtype_size(value.dtype);
  }
  return BufferRef::of_value(v);
}

BufferRef ProgramBuilder::temp(size_t bytes) {
  const size_t offset = temp_used_;
  temp_used_ += round_up(std::max<size_t>(bytes, 1));
  workspace_bytes_ = std::max(workspace_bytes_, temp_used_);
  return BufferRef::workspace(offset);
}

dnnl::primitive_attr ProgramBuilder::attr() const {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

PrimitiveStep& ProgramBuilder::add_primitive(std::string label, const dnnl::primitive_desc_base& pd,
                                             dnnl::primitive primitive, int64_t repeat) {
  auto step =
      std::make_unique<PrimitiveStep>(std::move(label), engine(), std::move(primitive), repeat);
  const dnnl_desc scratch = pd.scratchpad_desc();
  if (scratch.get_size() > 0) {
    step->bind(DNNL_ARG_SCRATCHPAD, scratch, BufferRef::scratchpad());
    scratchpad_bytes_ = std::max(scratchpad_bytes_, scratch.get_size());
  }
  PrimitiveStep& ref = *step;
  steps_.push_back(std::move(step));
  return ref;
}

void ProgramBuilder::vouch(int32_t v, float bound) {
  vouched_[static_cast<size_t>(v)] = Vouched{bound, group_};
}

std::optional<float> ProgramBuilder::vouched_bound(int32_t v) const {
  const std::optional<Vouched>& known = vouched_[static_cast<size_t>(v)];
  if (!known || known->group != group_) return std::nullopt;
  return known->bound;
}

std::vector<std::unique_ptr<Step>> ProgramBuilder::take_steps(size_t first) {
  std::vector<std::unique_ptr<Step>> taken;
  for (size_t i = first; i < steps_.size(); ++i) taken.push_back(std::move(steps_[i]));
  steps_.resize(std::min(first, steps_.size()));
  return taken;
}

void ProgramBuilder::add_reorder(const BufferRef& from, const dnnl_desc& from_desc,
                                 const BufferRef& to, const dnnl_desc& to_desc) {
  if (from_desc == to_desc) {
    steps_.push_back(std::make_unique<CopyStep>(label(fmt::format("copy {}", describe(from_desc))),
                                                from, to, from_desc.get_size()));
    return;
  }
  const dnnl::memory::data_type from_type = from_desc.data_type(), to_type = to_desc.data_type();
  if (ConvertStep::converts(from_type, to_type)) {
    // kiln converts the data type; oneDNN (in f32) changes the layout, before a narrowing or
    // after a widening.
    const dnnl_desc same_layout = with_data_type(from_desc, to_type);
    if (same_layout == to_desc) {
      steps_.push_back(std::make_unique<ConvertStep>(
          label(fmt::format("convert {} -> {}", describe(from_desc), describe(to_desc))), from,
          from_type, to, to_type, from_desc.get_size() / dnnl::memory::data_type_size(from_type)));
      return;
    }
    if (to_type == dnnl::memory::data_type::f32) {
      const BufferRef t = temp(same_layout.get_size());
      add_reorder(from, from_desc, t, same_layout);
      add_reorder(t, same_layout, to, to_desc);
    } else {
      const dnnl_desc wide = with_data_type(to_desc, from_type);
      const BufferRef t = temp(wide.get_size());
      add_reorder(from, from_desc, t, wide);
      add_reorder(t, wide, to, to_desc);
    }
    return;
  }
  dnnl::reorder::primitive_desc pd(engine(), from_desc, engine(), to_desc, attr());
  PrimitiveStep& step =
      add_primitive(label(fmt::format("reorder {} -> {}", describe(from_desc), describe(to_desc))),
                    pd, dnnl::reorder(pd));
  step.bind(DNNL_ARG_FROM, from_desc, from);
  step.bind(DNNL_ARG_TO, to_desc, to);
}

Status ProgramBuilder::build_dispatch(size_t index) {
  const DispatchSpec& d = spec_.dispatches[index];
  dispatch_index_ = index;
  const int32_t g = groups_.group_of[index];
  if (g >= 0 && group_ < 0 && !enter_group(g)) {
    drop_sample_group(spec_, sample_inputs_, groups_, static_cast<size_t>(g));
    plan_sample_view();
  }
  op_.emplace(d, values());
  const size_t first_step = steps_.size();
  const int threads = dispatch_threads(d, values(), max_team_);
  team_ = threads;
  full_team_ = dispatch_threads(d, values(), device_->threads);
  Status status = [&]() -> Status {
    KILN_RETURN_IF_ERROR(op_->check_indices());
    for (size_t i = 0; i < d.inputs.size(); ++i) {
      const int32_t v = d.inputs[i];
      if (v >= 0 && !available_[v]) {
        return invalid_argument("input {} '{}' is not produced by an earlier dispatch", i,
                                values()[v].name);
      }
    }
    for (size_t i = 0; i < d.outputs.size(); ++i) {
      const ValueSpec& v = values()[d.outputs[i]];
      if (v.role != ValueRole::kIntermediate && v.role != ValueRole::kOutput) {
        return invalid_argument("output {} '{}' is a {} and cannot be written", i, v.name,
                                value_role_name(v.role));
      }
      if (available_[d.outputs[i]]) {
        return invalid_argument("output {} '{}' is already produced by an earlier dispatch", i,
                                v.name);
      }
    }
    KILN_ASSIGN_OR_RETURN(const OpPath* path, select_path(*op_));
    use_threads(threads);
    temp_used_ = 0;
    pending_.clear();
    const bool all_empty = std::all_of(d.outputs.begin(), d.outputs.end(),
                                       [&](int32_t v) { return element_count(values()[v]) == 0; });
    if (all_empty) {
      for (int32_t v : d.outputs) plain_output(v);
    } else {
      KILN_RETURN_IF_ERROR(catch_dnnl("preparing the kernels", [&]() -> Status {
        KILN_RETURN_IF_ERROR(path->build(*this));
        for (const PendingReorder& p : pending_) {
          add_reorder(p.from, p.from_desc, BufferRef::of_value(p.value),
                      plain_desc(values()[p.value].shape, p.from_desc.data_type()));
        }
        return ok_status();
      }));
    }
    for (int32_t v : d.outputs) available_[v] = true;
    return ok_status();
  }();
  if (!status.ok()) {
    return std::move(status).with_note(fmt::format("in dispatch '{}' ({})", d.name, d.op_type));
  }
  dispatch_steps_.push_back(DispatchSteps{d.name, first_step, steps_.size(), d.outputs, threads});
  if (group_ >= 0 && index + 1 == groups_.groups[group_].end) return leave_group();
  return ok_status();
}

void ProgramBuilder::plan_groups() {
  sample_inputs_.assign(spec_.dispatches.size(), SampleInputs::none());
  if (device_->sample_group_bytes != std::numeric_limits<uint64_t>::max()) {
    for (size_t d = 0; d < spec_.dispatches.size(); ++d) {
      const OpReader op(spec_.dispatches[d], spec_.values);
      if (!op.check_indices().ok() || op.output_count() == 0) continue;
      // Only an f32 output with a batch above 1 can join: the path is not worth choosing twice.
      const ValueSpec& out = op.output(0);
      if (out.dtype != DType::kF32 || out.shape.empty() || out.shape[0] < 2) continue;
      // A dispatch the backend cannot run fails when it is built; here it joins no group.
      const StatusOr<const OpPath*> path = select_path(op);
      if (path.ok()) sample_inputs_[d] = (*path)->sample_inputs;
    }
  }
  groups_ = plan_sample_groups(spec_, sample_inputs_, device_->sample_group_bytes);
  plan_sample_view();
}

void ProgramBuilder::plan_sample_view() {
  sample_values_ = spec_.values;
  for (size_t v = 0; v < sample_values_.size(); ++v) {
    if (groups_.roles[v] != SampleRole::kWhole) sample_values_[v].shape[0] = 1;
  }
}

bool ProgramBuilder::enter_group(int32_t g) {
  // Every value the group slices that is stored already (graph inputs, and values produced
  // before the group) must store its samples one after another.
  std::vector<std::pair<int32_t, dnnl_desc>> one_sample;
  for (int32_t v : values_sliced_by(spec_, sample_inputs_, groups_, static_cast<size_t>(g))) {
    if (!available_[v]) continue;
    std::optional<dnnl_desc> one = layouts_[v] ? one_sample_layout(*layouts_[v]) : std::nullopt;
    if (!one) return false;
    one_sample.emplace_back(v, *one);
  }
  for (auto& [v, one] : one_sample) layouts_[v] = one;
  group_ = g;
  return true;
}

Status ProgramBuilder::leave_group() {
  const auto g = static_cast<size_t>(group_);
  group_ = -1;
  for (int32_t v : values_sliced_by(spec_, sample_inputs_, groups_, g)) {
    if (!layouts_[v]) return internal_error("value '{}' has no layout", spec_.values[v].name);
    sample_layouts_[v] = *layouts_[v];
    if (groups_.roles[v] == SampleRole::kInternal) continue;
    KILN_ASSIGN_OR_RETURN(dnnl_desc whole, with_batch(*layouts_[v], groups_.groups[g].samples));
    layouts_[v] = whole;
    if (spec_.values[v].role == ValueRole::kIntermediate) storage_[v] = whole.get_size();
  }
  return ok_status();
}

StatusOr<std::unique_ptr<CpuExecutable>> ProgramBuilder::build() {
  KILN_RETURN_IF_ERROR(validate_spec());
  // Each dispatch's primitives are made under its team size; the caller gets its own back.
  const CallerThreads restore;
  use_threads(max_team_);
  const size_t n = spec_.values.size();
  layouts_.assign(n, std::nullopt);
  available_.assign(n, false);
  vouched_.assign(n, std::nullopt);
  storage_.assign(n, 0);
  shared_storage_.assign(n, -1);
  last_reader_.assign(n, -1);
  for (size_t d = 0; d < spec_.dispatches.size(); ++d) {
    for (int32_t v : spec_.dispatches[d].inputs) {
      if (v >= 0 && static_cast<size_t>(v) < n) last_reader_[v] = static_cast<int32_t>(d);
    }
  }
  for (size_t v = 0; v < n; ++v) {
    const ValueSpec& value = spec_.values[v];
    if (value.role == ValueRole::kInput || value.role == ValueRole::kConstant) {
      available_[v] = true;
      if (auto type = stored_data_type(value.dtype)) layouts_[v] = plain_desc(value.shape, *type);
    }
  }
  sample_layouts_.assign(n, std::nullopt);
  plan_groups();
  for (size_t i = 0; i < spec_.dispatches.size(); ++i) {
    Status built = build_dispatch(i);
    use_threads(max_team_);
    KILN_RETURN_IF_ERROR(built);
  }
  for (int32_t v : spec_.outputs) {
    if (!available_[v]) {
      return invalid_argument("graph output '{}' is not produced by any dispatch",
                              spec_.values[v].name);
    }
  }
  CpuExecutable::Parts parts;
  parts.device = device_;
  parts.values = spec_.values;
  parts.constants.resize(n);
  parts.layouts.resize(n);
  parts.descs.resize(n);
  for (size_t v = 0; v < n; ++v) {
    if (const Tensor* c = constant(static_cast<int32_t>(v))) parts.constants[v] = *c;
    parts.values[v].constant = nullptr;
    if (layouts_[v]) parts.descs[v] = *layouts_[v];
    parts.layouts[v] = layouts_[v] ? describe(*layouts_[v])
                                   : fmt::format("plain {} [{}]", dtype_name(spec_.values[v].dtype),
                                                 fmt::join(spec_.values[v].shape, "x"));
  }
  parts.inputs = spec_.inputs;
  parts.outputs = spec_.outputs;
  parts.storage = std::move(storage_);
  parts.shared_storage = std::move(shared_storage_);
  parts.steps = std::move(steps_);
  parts.dispatches = std::move(dispatch_steps_);
  parts.held_constants = std::move(held_constants_);
  for (size_t g = 0; g < groups_.groups.size(); ++g) {
    CpuExecutable::Parts::GroupRun run{groups_.groups[g], {}, {}};
    for (int32_t v : values_sliced_by(spec_, sample_inputs_, groups_, g)) {
      if (groups_.roles[v] != SampleRole::kSliced) continue;
      run.values.push_back(v);
      run.strides.push_back(sample_layouts_[v]->get_size());
    }
    parts.groups.push_back(std::move(run));
  }
  parts.sample_descs = std::move(sample_layouts_);
  parts.workspace_bytes = workspace_bytes_;
  parts.scratchpad_bytes = scratchpad_bytes_;
  return CpuExecutable::create(std::move(parts));
}

}  // namespace kiln::hal::cpu
