#include "kiln/hal/cpu/cpu_executable.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "kiln/base/aligned_memory.h"
#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/hal/cpu/program_builder.h"

namespace kiln::hal::cpu {
namespace {

size_t rounded(size_t bytes) { return (bytes + 63) / 64 * 64; }

// A run's wall time, and the share of it the calling thread spent on a core.
class RunClock {
 public:
  RunClock() : wall_(std::chrono::steady_clock::now()), cpu_(thread_cpu_seconds()) {}
  double wall_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_)
        .count();
  }
  double cpu_share() const {
    const double wall = wall_ms() / 1000;
    return wall > 0 ? (thread_cpu_seconds() - cpu_) / wall : 1.0;
  }

 private:
  static double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  std::chrono::steady_clock::time_point wall_;
  double cpu_;
};

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
  exe->sample_ptrs_.assign(exe->parts_.values.size(), nullptr);
  exe->vouched_.assign(exe->parts_.values.size(), 0);
  exe->group_of_.assign(exe->parts_.dispatches.size(), -1);
  for (size_t g = 0; g < exe->parts_.groups.size(); ++g) {
    const SampleGroup& group = exe->parts_.groups[g].group;
    for (size_t d = group.first; d < group.end && d < exe->group_of_.size(); ++d) {
      exe->group_of_[d] = static_cast<int32_t>(g);
    }
  }
  exe->full_plan_.dispatches = exe->parts_.dispatches;
  for (const auto& step : exe->parts_.steps) exe->full_plan_.steps.push_back(step.get());
  return exe;
}

void CpuExecutable::allow_one_thread_plan(const ProgramSpec& spec) {
  // A program whose dispatches all run on one thread already has nothing to gain.
  if (std::none_of(parts_.dispatches.begin(), parts_.dispatches.end(),
                   [](const DispatchSteps& d) { return d.threads > 1; })) {
    return;
  }
  auto copy = std::make_unique<OneThreadSpec>();
  copy->spec = spec;
  copy->attributes.reserve(spec.dispatches.size());
  for (DispatchSpec& d : copy->spec.dispatches) {
    copy->attributes.push_back(d.attributes != nullptr ? *d.attributes : Attributes{});
    d.attributes = &copy->attributes.back();
  }
  for (size_t v = 0; v < copy->spec.values.size() && v < parts_.constants.size(); ++v) {
    if (copy->spec.values[v].constant != nullptr)
      copy->spec.values[v].constant = &parts_.constants[v];
  }
  one_thread_spec_ = std::move(copy);
}

bool CpuExecutable::build_one_thread_plan() {
  if (one_thread_plan_) return true;
  if (one_thread_spec_ == nullptr) return false;
  std::unique_ptr<OneThreadSpec> spec = std::move(one_thread_spec_);
  auto plan = ProgramBuilder(spec->spec, parts_.device, /*max_team=*/1).build();
  // A plan that cannot be built or adopted leaves the executable on its full team.
  return plan.ok() && adopt_one_thread_plan(std::move(plan).value());
}

bool CpuExecutable::adopt_one_thread_plan(std::unique_ptr<CpuExecutable> plan) {
  const Parts& one = plan->parts_;
  // The runtime sized this executable's scratch (scratch_bytes()) before the plan was built:
  // the plan must fit in it (one thread needs no more workspace or scratchpad than a team).
  if (one.descs != parts_.descs || one.storage != parts_.storage ||
      one.shared_storage != parts_.shared_storage || one.groups != parts_.groups ||
      one.dispatches.size() != parts_.dispatches.size() ||
      one.workspace_bytes > parts_.workspace_bytes ||
      one.scratchpad_bytes > parts_.scratchpad_bytes) {
    return false;
  }
  Plan adopted;
  for (size_t d = 0; d < parts_.dispatches.size(); ++d) {
    const DispatchSteps& full = parts_.dispatches[d];
    const DispatchSteps& single = one.dispatches[d];
    bool take = full.threads > 1 && single.threads == 1 &&
                full.end_step - full.first_step == single.end_step - single.first_step;
    for (size_t i = 0; take && i < full.end_step - full.first_step; ++i) {
      const Step& a = *parts_.steps[full.first_step + i];
      const Step& b = *one.steps[single.first_step + i];
      take = a.describe() == b.describe() && a.same_bits_at_any_team_size() &&
             b.same_bits_at_any_team_size();
    }
    const DispatchSteps& from = take ? single : full;
    const auto& steps = take ? one.steps : parts_.steps;
    DispatchSteps dispatch = from;
    dispatch.first_step = adopted.steps.size();
    for (size_t s = from.first_step; s < from.end_step; ++s)
      adopted.steps.push_back(steps[s].get());
    dispatch.end_step = adopted.steps.size();
    adopted.dispatches.push_back(std::move(dispatch));
  }
  one_thread_plan_ = std::move(adopted);
  one_thread_source_ = std::move(plan);
  return true;
}

size_t CpuExecutable::one_thread_dispatches() const {
  if (!one_thread_plan_) return 0;
  size_t n = 0;
  for (size_t d = 0; d < parts_.dispatches.size(); ++d) {
    n += parts_.dispatches[d].threads > 1 && one_thread_plan_->dispatches[d].threads == 1;
  }
  return n;
}

Team CpuExecutable::choose_team() const {
  if (!one_thread_plan_ && one_thread_spec_ == nullptr) return Team::kFull;
  switch (parts_.device->team_policy) {
    case TeamPolicy::kAdaptive: return team_choice_.next();
    case TeamPolicy::kOneThread: return Team::kOneThread;
    case TeamPolicy::kFull: return Team::kFull;
  }
  return Team::kFull;
}

CpuExecutable::~CpuExecutable() { std::free(own_scratch_); }

size_t CpuExecutable::scratch_bytes() const {
  return rounded(parts_.workspace_bytes) + rounded(parts_.scratchpad_bytes);
}

size_t CpuExecutable::memory_bytes() const {
  size_t primitives = 0;
  for (const auto& step : parts_.steps) {
    primitives += step->primitive_count();
  }
  const size_t plans = (own_scratch_ != nullptr ? scratch_bytes() : 0) +
                       parts_.steps.size() * kStepBytes + primitives * kPrimitiveBytes;
  return plans + (one_thread_source_ != nullptr ? one_thread_source_->memory_bytes() : 0);
}

size_t CpuExecutable::storage_bytes(int32_t value) const {
  if (value < 0 || static_cast<size_t>(value) >= parts_.storage.size()) return 0;
  return parts_.storage[value];
}

int32_t CpuExecutable::storage_shared_with(int32_t value) const {
  if (value < 0 || static_cast<size_t>(value) >= parts_.shared_storage.size()) return -1;
  return parts_.shared_storage[value];
}

std::vector<std::pair<int32_t, int32_t>> CpuExecutable::interleaved_dispatches() const {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const Parts::GroupRun& run : parts_.groups) {
    out.emplace_back(static_cast<int32_t>(run.group.first), static_cast<int32_t>(run.group.end));
  }
  return out;
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
  std::fill(vouched_.begin(), vouched_.end(), uint8_t{0});
  ExecContext ctx{value_ptrs_, workspace, scratchpad, stream_.get(), vouched_.data()};
  // Each dispatch sets its team size; the caller gets its own back.
  const CallerThreads restore;
  Team team = choose_team();
  if (team == Team::kOneThread && !build_one_thread_plan()) team = Team::kFull;
  last_team_ = team;
  const Plan& plan = team == Team::kOneThread ? *one_thread_plan_ : full_plan_;
  // An observed run's time is the observer's too: it teaches the team choice nothing.
  if (args.observer != nullptr) return run_observed(ctx, plan, *args.observer);
  const RunClock clock;
  for (size_t d = 0; d < plan.dispatches.size();) {
    if (group_of_[d] < 0) {
      KILN_RETURN_IF_ERROR(run_dispatch(ctx, plan, d++));
      continue;
    }
    const Parts::GroupRun& run = parts_.groups[group_of_[d]];
    for (int64_t sample = 0; sample < run.group.samples; ++sample) {
      const ExecContext at = at_sample(ctx, run, sample);
      for (size_t i = run.group.first; i < run.group.end; ++i) {
        KILN_RETURN_IF_ERROR(run_dispatch(at, plan, i));
      }
    }
    d = run.group.end;
  }
  if (dnnl_stream_wait(stream_.get()) != dnnl_success) {
    return internal_error("run: oneDNN stream wait failed");
  }
  const bool learning = parts_.device->team_policy == TeamPolicy::kAdaptive &&
                        (one_thread_plan_ || one_thread_spec_ != nullptr);
  if (learning) team_choice_.record(team, clock.wall_ms(), clock.cpu_share());
  return ok_status();
}

Status CpuExecutable::run_dispatch(const ExecContext& ctx, const Plan& plan, size_t d) {
  const DispatchSteps& dispatch = plan.dispatches[d];
  use_threads(dispatch.threads);
  for (size_t s = dispatch.first_step; s < dispatch.end_step; ++s) {
    KILN_RETURN_IF_ERROR(plan.steps[s]->run(ctx));
  }
  return ok_status();
}

ExecContext CpuExecutable::at_sample(const ExecContext& ctx, const Parts::GroupRun& run,
                                     int64_t sample) {
  if (sample == 0) std::copy(value_ptrs_.begin(), value_ptrs_.end(), sample_ptrs_.begin());
  for (size_t i = 0; i < run.values.size(); ++i) {
    const int32_t v = run.values[i];
    sample_ptrs_[v] = value_ptrs_[v] != nullptr
                          ? value_ptrs_[v] + static_cast<size_t>(sample) * run.strides[i]
                          : nullptr;
  }
  return ExecContext{sample_ptrs_, ctx.workspace, ctx.scratchpad, ctx.stream, ctx.vouched};
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

Status CpuExecutable::run_observed(const ExecContext& ctx, const Plan& plan,
                                   RunObserver& observer) {
  for (size_t d = 0; d < plan.dispatches.size();) {
    if (group_of_[d] >= 0) {
      const Parts::GroupRun& run = parts_.groups[group_of_[d]];
      KILN_RETURN_IF_ERROR(run_group_observed(ctx, plan, run, observer));
      d = run.group.end;
      continue;
    }
    const DispatchSteps& dispatch = plan.dispatches[d];
    const auto index = static_cast<int32_t>(d);
    const bool wants = observer.wants_outputs(index);
    const Clock::time_point start = Clock::now();
    KILN_RETURN_IF_ERROR(run_dispatch(ctx, plan, d));
    // The clock stops only once the stream has drained, so the time is this dispatch's alone.
    if (dnnl_stream_wait(stream_.get()) != dnnl_success) {
      return internal_error("run: oneDNN stream wait failed after dispatch '{}'", dispatch.name);
    }
    const double elapsed_ms = ms_since(start);
    std::vector<Tensor> outputs;
    if (wants) {
      for (int32_t v : dispatch.outputs) {
        const ValueSpec& value = parts_.values[v];
        auto tensor =
            read_plain(ctx.values[v], value.name, value.dtype, value.shape, parts_.descs[v]);
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
    ++d;
  }
  return ok_status();
}

Status CpuExecutable::run_group_observed(const ExecContext& ctx, const Plan& plan,
                                         const Parts::GroupRun& run, RunObserver& observer) {
  const size_t first = run.group.first, count = run.group.end - run.group.first;
  std::vector<double> elapsed_ms(count, 0.0);
  std::vector<std::vector<Tensor>> outputs(count);
  for (size_t i = 0; i < count; ++i) {
    if (!observer.wants_outputs(static_cast<int32_t>(first + i))) continue;
    for (int32_t v : plan.dispatches[first + i].outputs) {
      KILN_ASSIGN_OR_RETURN(Tensor whole,
                            Tensor::create(parts_.values[v].dtype, parts_.values[v].shape));
      outputs[i].push_back(std::move(whole));
    }
  }
  for (int64_t sample = 0; sample < run.group.samples; ++sample) {
    const ExecContext at = at_sample(ctx, run, sample);
    for (size_t i = 0; i < count; ++i) {
      const DispatchSteps& dispatch = plan.dispatches[first + i];
      const Clock::time_point start = Clock::now();
      KILN_RETURN_IF_ERROR(run_dispatch(at, plan, first + i));
      if (dnnl_stream_wait(stream_.get()) != dnnl_success) {
        return internal_error("run: oneDNN stream wait failed after dispatch '{}'", dispatch.name);
      }
      elapsed_ms[i] += ms_since(start);
      // Each output's sample now, before a later dispatch of the group may write over its bytes.
      for (size_t o = 0; o < outputs[i].size(); ++o) {
        const int32_t v = dispatch.outputs[o];
        const ValueSpec& value = parts_.values[v];
        ConcreteShape one = value.shape;
        one[0] = 1;
        auto part = read_plain(at.values[v], value.name, value.dtype, one, parts_.sample_descs[v]);
        if (!part.ok()) {
          return std::move(part).status().with_note(
              fmt::format("observing dispatch '{}'", dispatch.name));
        }
        Tensor& whole = outputs[i][o];
        const size_t bytes = part->byte_size();
        std::memcpy(whole.mutable_data() + static_cast<size_t>(sample) * bytes, part->data(),
                    bytes);
      }
    }
  }
  for (size_t i = 0; i < count; ++i) {
    Status observed =
        observer.after_dispatch(static_cast<int32_t>(first + i), elapsed_ms[i], outputs[i]);
    if (!observed.ok()) {
      return std::move(observed).with_note(
          fmt::format("after dispatch '{}'", plan.dispatches[first + i].name));
    }
  }
  return ok_status();
}

StatusOr<Tensor> CpuExecutable::read_plain(const std::byte* from, std::string_view name,
                                           DType dtype, const ConcreteShape& shape,
                                           const std::optional<dnnl::memory::desc>& desc) const {
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(dtype, shape));
  if (out.byte_size() == 0) return out;
  if (from == nullptr) return internal_error("value '{}' has no storage", name);
  if (!desc || is_plain(*desc)) {
    std::memcpy(out.mutable_data(), from, out.byte_size());
    return out;
  }
  KILN_RETURN_IF_ERROR(catch_dnnl("reordering an observed value to plain", [&]() -> Status {
    const dnnl_desc plain = plain_desc(shape, desc->data_type());
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
  if (group_of_[d] >= 0) {
    const SampleGroup& group = parts_.groups[group_of_[d]].group;
    out.push_back(fmt::format("{}dispatches {}..{} run one sample at a time, {} samples",
                              kSampleGroupLinePrefix, group.first, group.end - 1, group.samples));
  }
  return out;
}

}  // namespace kiln::hal::cpu
