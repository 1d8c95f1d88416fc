#include "kiln/runtime/run_state.h"

#include <algorithm>
#include <cstring>

#include <chrono>

#include "kiln/base/checked_math.h"
#include "kiln/base/control_flow.h"
#include "kiln/base/sequence_ops.h"
#include "kiln/hal/host_tensors.h"
#include "kiln/runtime/memory_planner.h"

namespace kiln::runtime {

struct RunState::Prepared {
  hal::ProgramSpec spec;
  std::unique_ptr<hal::Executable> executable;
  std::vector<size_t> offsets;
  size_t arena_bytes = 0;                // activations, then the executable's scratch
  size_t scratch_offset = 0;             // where its scratch starts in the arena
  std::vector<hal::BufferRef> bindings;  // per value, rebuilt for every run (kept for its memory)

  // What evicting the plan frees: the executable's own memory (hal::Executable::memory_bytes)
  // and the runtime's bookkeeping. Shared constants and the arena are not the plan's.
  uint64_t bytes() const {
    uint64_t total = executable->memory_bytes() + sizeof(Prepared) +
                     offsets.size() * sizeof(size_t) + spec.values.size() * sizeof(hal::ValueSpec) +
                     spec.dispatches.size() * sizeof(hal::DispatchSpec);
    for (const hal::ValueSpec& value : spec.values) {
      if (value.known_value) total += value.known_value->byte_size();
    }
    return total;
  }
};

struct RunState::Body {
  std::vector<Stage> stages;
  RunContext context;
  std::unique_ptr<RunState> state;
};

namespace {

// Bytes of a value with these dims, saturating instead of wrapping on absurd shapes.
uint64_t value_bytes(const ConcreteShape& shape, DType dtype) {
  auto count = checked_product(shape);
  if (!count) return UINT64_MAX;
  auto bytes = checked_mul(*count, static_cast<int64_t>(dtype_size(dtype)));
  return bytes ? static_cast<uint64_t>(*bytes) : UINT64_MAX;
}

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

Status check_memory(uint64_t needed, uint64_t limit, std::string_view what,
                    const Bindings& bindings) {
  if (needed <= limit) return ok_status();
  std::vector<std::string> values;
  for (const auto& [symbol, value] : bindings)
    values.push_back(fmt::format("{}={}", symbol, value));
  return out_of_range("{} need {} bytes at [{}], over the memory limit of {} bytes (--max-memory)",
                      what, needed, fmt::join(values, ", "), limit);
}

// The elements of a value the shape program knows, evaluated for `bindings`.
StatusOr<Tensor> known_value_tensor(const module::ModuleValue& value, const ConcreteShape& shape,
                                    const Bindings& bindings) {
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(value.dtype, shape));
  if (out.element_count() != static_cast<int64_t>(value.known_values.size())) {
    return invalid_argument("value '{}' has {} known elements for shape {}", value.name,
                            value.known_values.size(), shape_to_string(shape));
  }
  for (size_t i = 0; i < value.known_values.size(); ++i) {
    auto v = value.known_values[i].evaluate(bindings);
    if (!v.ok()) return std::move(v).status().with_note(fmt::format("in value '{}'", value.name));
    // f32 and f64 values are whole numbers from shapes cast to float (torch.arange(S).float()).
    set_element_from_int64(out, static_cast<int64_t>(i), *v);
  }
  return out;
}

// Numbers a stage's dispatches as in the module for an observer of the whole run.
class StageObserver : public hal::RunObserver {
 public:
  StageObserver(hal::RunObserver* inner, int32_t first) : inner_(inner), first_(first) {}
  bool wants_outputs(int32_t dispatch) override { return inner_->wants_outputs(dispatch + first_); }
  Status after_dispatch(int32_t dispatch, double elapsed_ms,
                        std::span<const Tensor> outputs) override {
    return inner_->after_dispatch(dispatch + first_, elapsed_ms, outputs);
  }

 private:
  hal::RunObserver* inner_;
  int32_t first_;
};

}  // namespace

StatusOr<Bindings> bind_inputs(const module::ModuleContents& module,
                               std::span<const HostValue> values) {
  // Sequences and optionals: their form and dtype (their tensors' dims are their own); the
  // checks below are of tensors only.
  for (size_t i = 0; i < values.size() && i < module.inputs.size(); ++i) {
    const module::ModuleValue& expected = module.values[module.inputs[i]];
    if (values[i].form() != expected.form ||
        (expected.form != ValueForm::kTensor && values[i].dtype() != expected.dtype)) {
      return invalid_argument("input {} '{}': expected a {} of {}, got {}", i, expected.name,
                              value_form_name(expected.form), dtype_name(expected.dtype),
                              values[i].describe());
    }
  }
  if (values.size() != module.inputs.size()) {
    std::vector<std::string> names;
    for (int32_t id : module.inputs) names.push_back("'" + module.values[id].name + "'");
    return invalid_argument("the module takes {} input(s) ({}), got {}", module.inputs.size(),
                            fmt::join(names, ", "), values.size());
  }
  Bindings bindings;
  std::map<std::string, std::string> bound_by;
  for (size_t i = 0; i < values.size(); ++i) {
    const module::ModuleValue& expected = module.values[module.inputs[i]];
    if (expected.form != ValueForm::kTensor) continue;
    const Tensor& actual = values[i].tensor();
    if (actual.dtype() != expected.dtype) {
      return invalid_argument("input {} '{}': expected dtype {}, got {}", i, expected.name,
                              dtype_name(expected.dtype), dtype_name(actual.dtype()));
    }
    if (actual.shape().size() != expected.shape.size()) {
      return invalid_argument("input {} '{}': expected rank {} {}, got rank {} {}", i,
                              expected.name, expected.shape.size(), shape_to_string(expected.shape),
                              actual.shape().size(), shape_to_string(actual.shape()));
    }
    for (size_t d = 0; d < expected.shape.size(); ++d) {
      const DimExpr& dim = expected.shape[d];
      int64_t got = actual.shape()[d];
      if (!dim.is_symbol()) continue;
      const std::string symbol = dim.symbols()[0];
      auto [it, inserted] = bindings.emplace(symbol, got);
      std::string where = fmt::format("input '{}' dim {}", expected.name, d);
      if (inserted) {
        bound_by[symbol] = where;
      } else if (it->second != got) {
        return invalid_argument("{} is {}, but symbol '{}' is {} from {}", where, got, symbol,
                                it->second, bound_by[symbol]);
      }
    }
  }
  // Static and compound dims are checked once every symbol has a value.
  for (size_t i = 0; i < values.size(); ++i) {
    const module::ModuleValue& expected = module.values[module.inputs[i]];
    if (expected.form != ValueForm::kTensor) continue;
    const Tensor& actual = values[i].tensor();
    for (size_t d = 0; d < expected.shape.size(); ++d) {
      auto want = expected.shape[d].evaluate(bindings);
      if (!want.ok())
        return std::move(want).status().with_note(fmt::format("in input '{}'", expected.name));
      if (*want != actual.shape()[d]) {
        return invalid_argument(
            "input {} '{}' dim {}: expected {} ({} in {}), got {} (input shape {})", i,
            expected.name, d, *want, expected.shape[d].to_string(), shape_to_string(expected.shape),
            actual.shape()[d], shape_to_string(actual.shape()));
      }
    }
  }
  // An input whose elements are symbols (a body's iteration number) binds them from its data.
  for (size_t i = 0; i < values.size(); ++i) {
    const module::ModuleValue& expected = module.values[module.inputs[i]];
    if (expected.known_values.empty() || expected.form != ValueForm::kTensor) continue;
    const Tensor& actual = values[i].tensor();
    if (actual.element_count() != static_cast<int64_t>(expected.known_values.size()) ||
        !(is_integer(actual.dtype()) || actual.dtype() == DType::kBool)) {
      return invalid_argument("input {} '{}': expected {} integer elements, got {} {}", i,
                              expected.name, expected.known_values.size(),
                              dtype_name(actual.dtype()), shape_to_string(actual.shape()));
    }
    for (size_t e = 0; e < expected.known_values.size(); ++e) {
      const int64_t got = element_as_int64(actual, static_cast<int64_t>(e));
      const DimExpr& element = expected.known_values[e];
      if (element.is_symbol()) {
        auto [it, inserted] = bindings.emplace(element.symbols()[0], got);
        if (!inserted && it->second != got) {
          return invalid_argument("input {} '{}' element {} is {}, but symbol '{}' is {}", i,
                                  expected.name, e, got, it->first, it->second);
        }
      }
    }
  }
  for (const std::string& symbol : module.symbols) {
    if (!bindings.count(symbol))
      return invalid_argument("symbol '{}' is not set by any input", symbol);
  }
  KILN_RETURN_IF_ERROR(check_bound_assumptions(module.assumptions, bindings));
  return bindings;
}

StatusOr<ConcreteShape> concrete_shape(const module::ModuleValue& value, const Bindings& bindings) {
  auto shape = evaluate_shape(value.shape, bindings);
  if (!shape.ok())
    return std::move(shape).status().with_note(fmt::format("in value '{}'", value.name));
  KILN_RETURN_IF_ERROR(element_count(*shape).status());
  return shape;
}

Status check_output_count(const module::ModuleContents& module, std::span<const Tensor> outputs) {
  if (outputs.size() == module.outputs.size()) return ok_status();
  std::vector<std::string> names;
  for (int32_t id : module.outputs) names.push_back("'" + module.values[id].name + "'");
  return invalid_argument("the module has {} output(s) ({}), got {} output tensor(s)",
                          module.outputs.size(), fmt::join(names, ", "), outputs.size());
}

Status check_output_tensor(const module::ModuleContents& module, size_t index,
                           const ConcreteShape& shape, const Tensor& tensor) {
  const module::ModuleValue& value = module.values[module.outputs[index]];
  if (tensor.dtype() != value.dtype || tensor.shape() != shape) {
    return invalid_argument("output {} '{}': expected {} {} for these inputs, got {} {}", index,
                            value.name, dtype_name(value.dtype), shape_to_string(shape),
                            dtype_name(tensor.dtype()), shape_to_string(tensor.shape()));
  }
  if (tensor.byte_size() > 0 && tensor.empty_storage()) {
    return invalid_argument("output {} '{}': the tensor has no bytes to write its {} into", index,
                            value.name, tensor.byte_size());
  }
  return ok_status();
}

RunState::RunState(const RunContext& context) : context_(context), plans_(context.limits) {}

RunState::~RunState() = default;

StatusOr<RunState::Prepared*> RunState::prepare(size_t stage_index, const Bindings& all_bindings) {
  const auto& module = *context_.module;
  const std::vector<Stage>& stages = *context_.stages;
  // The plan depends only on the symbols its values and dispatches use (not on those of later
  // stages, nor on a body's iteration number where no shape uses it).
  PlanKey key(stage_index, {});
  for (const std::string& symbol : stages[stage_index].symbols) {
    auto bound = all_bindings.find(symbol);
    if (bound != all_bindings.end()) key.second.insert(*bound);
  }
  if (Prepared* held = plans_.find(key)) return held;
  const Bindings& bindings = key.second;
  const Stage& stage = stages[stage_index];
  auto prepared = std::make_unique<Prepared>();
  hal::ProgramSpec& spec = prepared->spec;
  // Module value index -> index in this stage's spec.
  std::map<int32_t, int32_t> local;
  for (size_t i = 0; i < stage.values.size(); ++i) local[stage.values[i]] = static_cast<int32_t>(i);
  auto role_of = [&](int32_t v) {
    if (module.values[v].kind == module::ValueKind::kConstant) return hal::ValueRole::kConstant;
    if (std::binary_search(stage.inputs.begin(), stage.inputs.end(), v))
      return hal::ValueRole::kInput;
    if (std::binary_search(stage.outputs.begin(), stage.outputs.end(), v))
      return hal::ValueRole::kOutput;
    return hal::ValueRole::kIntermediate;
  };
  for (int32_t v : stage.values) {
    const module::ModuleValue& value = module.values[v];
    hal::ValueSpec value_spec;
    value_spec.name = value.name;
    value_spec.dtype = value.dtype;
    KILN_ASSIGN_OR_RETURN(value_spec.shape, concrete_shape(value, bindings));
    value_spec.role = role_of(v);
    // Any single activation or output over the limit is refused before the backend sizes kernels.
    if (value_spec.role == hal::ValueRole::kIntermediate ||
        value_spec.role == hal::ValueRole::kOutput) {
      KILN_RETURN_IF_ERROR(check_memory(value_bytes(value_spec.shape, value.dtype),
                                        context_.max_memory_bytes,
                                        fmt::format("value '{}' would", value.name), bindings));
    }
    if (value_spec.role == hal::ValueRole::kConstant) value_spec.constant = &value.constant;
    if (!value.known_values.empty()) {
      KILN_ASSIGN_OR_RETURN(value_spec.known_value,
                            known_value_tensor(value, value_spec.shape, bindings));
    }
    spec.values.push_back(std::move(value_spec));
  }
  for (int32_t d = stage.first; d < stage.end; ++d) {
    const module::Dispatch& dispatch = module.dispatches[d];
    hal::DispatchSpec dispatch_spec{
        dispatch.name, dispatch.op_type, &dispatch.attributes, {}, {}, d, dispatch.origins, {}};
    for (int32_t in : dispatch.inputs) dispatch_spec.inputs.push_back(in < 0 ? in : local.at(in));
    for (int32_t out : dispatch.outputs) dispatch_spec.outputs.push_back(local.at(out));
    for (const std::string& symbol : dispatch.data_symbols) {
      auto bound = bindings.find(symbol);
      if (bound == bindings.end()) {
        return invalid_argument(
            "symbol '{}' of dispatch '{}' ({}) is bound from data at run time, "
            "and these bindings lack it",
            symbol, dispatch.name, dispatch.op_type);
      }
      dispatch_spec.data_sizes.push_back(bound->second);
    }
    spec.dispatches.push_back(std::move(dispatch_spec));
  }
  for (int32_t in : stage.inputs) spec.inputs.push_back(local.at(in));
  for (int32_t out : stage.outputs) spec.outputs.push_back(local.at(out));
  KILN_ASSIGN_OR_RETURN(prepared->executable, context_.device->prepare(spec));

  std::vector<BufferRequest> requests(spec.values.size());
  for (size_t d = 0; d < spec.dispatches.size(); ++d) {
    for (int32_t out : spec.dispatches[d].outputs) {
      requests[out].first = requests[out].last = static_cast<int32_t>(d);
    }
    for (int32_t in : spec.dispatches[d].inputs) {
      if (in >= 0) requests[in].last = static_cast<int32_t>(d);
    }
  }
  extend_over_ranges(requests, prepared->executable->interleaved_dispatches());
  uint64_t output_bytes = 0;
  for (size_t v = 0; v < spec.values.size(); ++v) {
    const hal::ValueSpec& value = spec.values[v];
    if (value.role == hal::ValueRole::kIntermediate) {
      requests[v].bytes = prepared->executable->storage_bytes(static_cast<int32_t>(v));
      requests[v].same_as = prepared->executable->storage_shared_with(static_cast<int32_t>(v));
    }
    if (value.role == hal::ValueRole::kOutput) {
      output_bytes = saturating_add(output_bytes, value_bytes(value.shape, value.dtype));
    }
  }
  ArenaPlan plan = plan_arena(requests);
  // The executable's temporaries follow the activations: one arena serves every plan's.
  const size_t scratch_offset = (plan.arena_bytes + 63) / 64 * 64;
  const uint64_t arena_bytes =
      saturating_add(scratch_offset, prepared->executable->scratch_bytes());
  KILN_RETURN_IF_ERROR(check_memory(saturating_add(arena_bytes, output_bytes),
                                    context_.max_memory_bytes, "activations and outputs would",
                                    bindings));
  prepared->offsets = std::move(plan.offsets);
  prepared->scratch_offset = scratch_offset;
  prepared->arena_bytes = static_cast<size_t>(arena_bytes);
  // Stages that bind data symbols share the one cache: a new data size is a new plan like any.
  const uint64_t bytes = prepared->bytes();
  return plans_.insert(key, std::move(prepared), bytes,
                       [&](const PlanKey&, const Prepared&) { plan_evicted_ = true; });
}

Status RunState::size_arena(const Prepared& prepared) {
  // After an eviction the arena may be larger than any held plan needs: give the excess back.
  size_t needed = prepared.arena_bytes;
  if (plan_evicted_) {
    plans_.for_each([&](const PlanKey&, const Prepared& held, uint64_t) {
      needed = std::max(needed, held.arena_bytes);
    });
  }
  needed = (needed + 63) / 64 * 64;
  const bool grow = needed > arena_bytes_;
  const bool shrink = plan_evicted_ && needed < arena_bytes_;
  plan_evicted_ = false;
  if (!grow && !shrink) return ok_status();
  arena_.reset();
  arena_bytes_ = 0;
  if (needed == 0) return ok_status();
  auto arena = context_.device->allocator().allocate(needed, hal::MemoryType::kDeviceLocal);
  if (!arena.ok()) return std::move(arena).status().with_note("allocating the activation arena");
  arena_ = std::move(arena).value();
  arena_bytes_ = needed;
  return ok_status();
}

StatusOr<std::vector<std::vector<std::string>>> RunState::describe_dispatches(
    const Bindings& bindings) {
  const std::vector<Stage>& stages = *context_.stages;
  std::vector<std::vector<std::string>> out;
  for (size_t s = 0; s < stages.size(); ++s) {
    if (stages[s].control) {
      const module::Dispatch& dispatch = context_.module->dispatches[stages[s].first];
      if (dispatch.bodies.empty() || dispatch.op_type == "SequenceMap") {
        out.push_back({fmt::format(
            "host: {} runs on the host, where sequences and optionals live{}", dispatch.op_type,
            dispatch.bodies.empty() ? ""
                                    : "; its body runs per element as a nested program on "
                                      "this device")});
        continue;
      }
      out.push_back({fmt::format(
          "control flow: {} runs its {} on the host, each as a nested "
          "program on this device",
          dispatch.op_type, dispatch.op_type == "If" ? "taken branch" : "body per iteration")});
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Prepared * prepared, prepare(s, bindings));
    for (int32_t d = 0; d < stages[s].end - stages[s].first; ++d) {
      out.push_back(prepared->executable->describe_dispatch(d));
    }
  }
  return out;
}

Status RunState::bind_data_symbols(const Stage& stage, const std::map<int32_t, HostValue>& held,
                                   Bindings& bindings) {
  const auto& module = *context_.module;
  const module::Dispatch& dispatch = module.dispatches[stage.first];
  std::vector<Tensor> inputs;
  for (int32_t in : dispatch.inputs) {
    if (in < 0) {
      inputs.emplace_back();
    } else if (module.values[in].kind == module::ValueKind::kConstant) {
      inputs.push_back(module.values[in].constant);
    } else {
      inputs.push_back(held.at(in).tensor());
    }
  }
  // The module's value indices: data_sizes reads only how many there are.
  hal::DispatchSpec spec{dispatch.name,    dispatch.op_type, &dispatch.attributes, dispatch.inputs,
                         dispatch.outputs, stage.first,      dispatch.origins,     {}};
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, context_.device->data_sizes(spec, inputs));
  if (sizes.size() != dispatch.data_symbols.size()) {
    return invalid_argument("dispatch '{}' ({}) gave {} data-dependent sizes for its {} symbols",
                            dispatch.name, dispatch.op_type, sizes.size(),
                            dispatch.data_symbols.size());
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) {
      return internal_error("dispatch '{}' ({}) gave size {} for symbol '{}'", dispatch.name,
                            dispatch.op_type, sizes[i], dispatch.data_symbols[i]);
    }
    bindings[dispatch.data_symbols[i]] = sizes[i];
  }
  return ok_status();
}

RunState::Body& RunState::body(int32_t dispatch, size_t b) {
  std::unique_ptr<Body>& held = bodies_[{dispatch, b}];
  if (held == nullptr) {
    held = std::make_unique<Body>();
    const module::ModuleContents& module = *context_.module->dispatches[dispatch].bodies[b];
    held->stages = plan_stages(module);
    held->context = context_;
    held->context.module = &module;
    held->context.stages = &held->stages;
    held->state = std::make_unique<RunState>(held->context);
  }
  return *held;
}

namespace {

// The per-iteration type of control-flow output `value` when no iteration produced it: its dims
// without `axis`, for the bindings known before the dispatch ran.
StatusOr<control_flow::SliceType> empty_slice(const module::ModuleValue& value, int64_t axis,
                                              const Bindings& bindings) {
  control_flow::SliceType type{value.dtype, {}};
  for (size_t d = 0; d < value.shape.size(); ++d) {
    if (static_cast<int64_t>(d) == axis) continue;
    auto n = value.shape[d].evaluate(bindings);
    if (!n.ok()) {
      return std::move(n).status().with_note(
          fmt::format("the loop ran zero times: dim {} of '{}' is not known without an iteration",
                      d, value.name));
    }
    type.shape.push_back(*n);
  }
  return type;
}

}  // namespace

Status RunState::run_control(const Stage& stage, std::map<int32_t, HostValue>& held,
                             Bindings& bindings, hal::RunObserver* observer) {
  const auto& module = *context_.module;
  const int32_t d = stage.first;
  const module::Dispatch& dispatch = module.dispatches[d];
  const std::string where = fmt::format("dispatch '{}' ({})", dispatch.name, dispatch.op_type);
  const auto started = std::chrono::steady_clock::now();
  std::vector<HostValue> inputs;
  for (int32_t in : dispatch.inputs) {
    if (in < 0) {
      inputs.emplace_back();
    } else if (module.values[in].kind == module::ValueKind::kConstant) {
      inputs.push_back(module.values[in].constant);
    } else {
      inputs.push_back(held.at(in));
    }
  }
  auto runner = [&](size_t b) -> control_flow::BodyRunner {
    return [this, d, b](std::vector<HostValue> body_inputs) -> StatusOr<std::vector<HostValue>> {
      Body& run = body(d, b);
      auto result = [&]() -> StatusOr<std::vector<HostValue>> {
        KILN_ASSIGN_OR_RETURN(Bindings body_bindings,
                              bind_inputs(*run.context.module, body_inputs));
        return run.state->run(body_inputs, std::move(body_bindings), nullptr, nullptr);
      }();
      if (!result.ok()) return std::move(result).status().with_note(fmt::format("in body {}", b));
      return result;
    };
  };
  KILN_ASSIGN_OR_RETURN(int64_t captures, dispatch.attributes.get_int("kiln_captures", 0));
  control_flow::LoopArgs args;
  args.where = where;
  args.captures = static_cast<size_t>(captures);
  args.output_count = dispatch.outputs.size();
  args.max_bytes = context_.max_memory_bytes;
  StatusOr<std::vector<HostValue>> outputs = std::vector<HostValue>{};
  if (dispatch.bodies.empty() || dispatch.op_type == "SequenceMap") {
    // A sequence or optional op, or Identity on one.
    sequence_ops::OpArgs op;
    op.where = where;
    op.attributes = &dispatch.attributes;
    for (int32_t out : dispatch.outputs) op.output_dtypes.push_back(module.values[out].dtype);
    op.max_bytes = context_.max_memory_bytes;
    if (!dispatch.bodies.empty()) op.body = runner(0);
    outputs = sequence_ops::run(dispatch.op_type, inputs, op);
  } else if (dispatch.op_type == "If") {
    KILN_ASSIGN_OR_RETURN(
        bool cond, control_flow::read_condition(inputs.at(0).tensor(), where + ": the condition"));
    const size_t then_inputs = dispatch.bodies[0]->inputs.size();
    std::vector<HostValue> taken =
        cond ? std::vector<HostValue>(inputs.begin() + 1, inputs.begin() + 1 + then_inputs)
             : std::vector<HostValue>(inputs.begin() + 1 + then_inputs, inputs.end());
    outputs = runner(cond ? 0 : 1)(std::move(taken));
  } else if (dispatch.op_type == "Loop") {
    const size_t carried = inputs.size() - 2 - args.captures;
    for (size_t v = 0; v < carried && v < dispatch.outputs.size(); ++v) {
      args.carried_forms.push_back(module.values[dispatch.outputs[v]].form);
    }
    args.body = runner(0);
    args.empty_scan_shape = [&](size_t k) {
      return empty_slice(module.values[dispatch.outputs.at(carried + k)], 0, bindings);
    };
    outputs = control_flow::run_loop(inputs, args);
  } else {
    KILN_ASSIGN_OR_RETURN(
        control_flow::ScanAttributes attrs,
        control_flow::parse_scan_attributes(dispatch.attributes, inputs.size() - args.captures,
                                            dispatch.outputs.size(), where));
    const size_t states = inputs.size() - args.captures - attrs.num_scan_inputs;
    args.body = runner(0);
    args.empty_scan_shape = [&](size_t k) -> StatusOr<control_flow::SliceType> {
      const module::ModuleValue& value = module.values[dispatch.outputs.at(states + k)];
      KILN_ASSIGN_OR_RETURN(int64_t axis,
                            control_flow::normalize_axis(attrs.output_axes[k],
                                                         static_cast<int64_t>(value.shape.size()),
                                                         where + ": scan_output_axes"));
      return empty_slice(value, axis, bindings);
    };
    outputs = control_flow::run_scan(inputs, dispatch.attributes, args);
  }
  if (!outputs.ok()) return std::move(outputs).status();
  if (outputs->size() != dispatch.outputs.size()) {
    return internal_error("{}: gave {} outputs for {}", where, outputs->size(),
                          dispatch.outputs.size());
  }
  // Sequences and optionals: their form and dtype, as the module says.
  for (size_t k = 0; k < outputs->size(); ++k) {
    const module::ModuleValue& value = module.values[dispatch.outputs[k]];
    const HostValue& out = (*outputs)[k];
    if (out.form() != value.form || out.dtype() != value.dtype) {
      return invalid_argument("{}: output {} '{}' is {}, but the module says a {} of {}", where, k,
                              value.name, out.describe(), value_form_name(value.form),
                              dtype_name(value.dtype));
    }
  }
  // The data symbols from the outputs' dims, then every output checked against the module.
  for (size_t k = 0; k < outputs->size(); ++k) {
    const module::ModuleValue& value = module.values[dispatch.outputs[k]];
    if (value.form != ValueForm::kTensor) continue;
    const Tensor& tensor = (*outputs)[k].tensor();
    if (tensor.rank() != static_cast<int64_t>(value.shape.size())) continue;  // reported below
    for (size_t i = 0; i < value.shape.size(); ++i) {
      const DimExpr& dim = value.shape[i];
      if (!dim.is_symbol()) continue;
      const std::string symbol = dim.symbols()[0];
      if (std::find(dispatch.data_symbols.begin(), dispatch.data_symbols.end(), symbol) ==
          dispatch.data_symbols.end()) {
        continue;
      }
      auto [it, inserted] = bindings.emplace(symbol, tensor.shape()[i]);
      if (!inserted && it->second != tensor.shape()[i]) {
        return invalid_argument("{}: output {} '{}' dim {} is {}, but '{}' is {}", where, k,
                                value.name, i, tensor.shape()[i], symbol, it->second);
      }
    }
  }
  for (size_t k = 0; k < outputs->size(); ++k) {
    const module::ModuleValue& value = module.values[dispatch.outputs[k]];
    if (value.form != ValueForm::kTensor) continue;
    const Tensor& tensor = (*outputs)[k].tensor();
    KILN_ASSIGN_OR_RETURN(ConcreteShape shape, concrete_shape(value, bindings));
    if (tensor.dtype() != value.dtype || tensor.shape() != shape) {
      return invalid_argument("{}: output {} '{}' is {} {}, but the module says {} {}", where, k,
                              value.name, dtype_name(tensor.dtype()),
                              shape_to_string(tensor.shape()), dtype_name(value.dtype),
                              shape_to_string(shape));
    }
    KILN_RETURN_IF_ERROR(check_memory(value_bytes(shape, value.dtype), context_.max_memory_bytes,
                                      fmt::format("value '{}' would", value.name), bindings));
  }
  KILN_RETURN_IF_ERROR(check_bound_assumptions(module.assumptions, bindings));
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (observer != nullptr) {
    std::vector<Tensor> observed;
    if (observer->wants_outputs(d)) {
      // A sequence or optional is seen as an empty tensor: observers compare tensors.
      for (const HostValue& v : *outputs) {
        observed.push_back(v.is_tensor() ? v.tensor().clone() : Tensor());
      }
    }
    Status seen = observer->after_dispatch(d, elapsed_ms, observed);
    if (!seen.ok()) return std::move(seen).with_note("after " + where);
  }
  for (size_t k = 0; k < outputs->size(); ++k) held[dispatch.outputs[k]] = std::move((*outputs)[k]);
  return ok_status();
}

StatusOr<std::vector<HostValue>> RunState::run(std::span<const HostValue> inputs, Bindings bindings,
                                               hal::RunObserver* observer, Bindings* bound,
                                               std::span<Tensor> into) {
  const auto& module = *context_.module;
  const std::vector<Stage>& stages = *context_.stages;
  if (!into.empty()) KILN_RETURN_IF_ERROR(check_output_count(module, into));
  // Module value -> the caller tensor it is computed into (the first, for a value listed twice).
  std::map<int32_t, size_t> into_index;
  if (!into.empty()) {
    for (size_t i = 0; i < module.outputs.size(); ++i) into_index.emplace(module.outputs[i], i);
  }
  // Graph inputs and the values stages hand over, by module value index.
  std::map<int32_t, HostValue> held;
  for (size_t i = 0; i < inputs.size(); ++i) held[module.inputs[i]] = inputs[i];

  for (size_t s = 0; s < stages.size(); ++s) {
    const Stage& stage = stages[s];
    if (stage.control) {
      KILN_RETURN_IF_ERROR(run_control(stage, held, bindings, observer));
      continue;
    }
    if (stage.binds_data) {
      KILN_RETURN_IF_ERROR(bind_data_symbols(stage, held, bindings));
      KILN_RETURN_IF_ERROR(check_bound_assumptions(module.assumptions, bindings));
    }
    KILN_ASSIGN_OR_RETURN(Prepared * prepared, prepare(s, bindings));
    KILN_RETURN_IF_ERROR(size_arena(*prepared));
    std::vector<Tensor> stage_inputs;
    for (int32_t in : stage.inputs) {
      const HostValue& value = held.at(in);
      if (!value.is_tensor()) {
        return internal_error("value '{}' is a {}, read by a device stage", module.values[in].name,
                              value_form_name(value.form()));
      }
      stage_inputs.push_back(value.tensor());
    }
    // The stage's outputs: the caller's tensors for graph outputs run_into writes, else new ones.
    std::vector<Tensor> computed;
    for (size_t i = 0; i < stage.outputs.size(); ++i) {
      const hal::ValueSpec& value = prepared->spec.values[prepared->spec.outputs[i]];
      auto target = into_index.find(stage.outputs[i]);
      if (target != into_index.end()) {
        const Tensor& tensor = into[target->second];
        KILN_RETURN_IF_ERROR(check_output_tensor(module, target->second, value.shape, tensor));
        computed.push_back(tensor);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(Tensor tensor, Tensor::create(value.dtype, value.shape));
      computed.push_back(std::move(tensor));
    }
    StageObserver stage_observer(observer, stage.first);
    // Intermediates in the arena; inputs and outputs bound to the host tensors.
    std::vector<hal::BufferRef>& values = prepared->bindings;
    values.assign(prepared->spec.values.size(), hal::BufferRef{});
    for (size_t v = 0; v < values.size(); ++v) {
      if (prepared->spec.values[v].role == hal::ValueRole::kIntermediate) {
        values[v] = {arena_.get(), prepared->offsets[v]};
      }
    }
    hal::HostTensorBinding io(*context_.device);
    for (size_t i = 0; i < stage_inputs.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(values[prepared->spec.inputs[i]], io.input(stage_inputs[i]));
    }
    for (size_t i = 0; i < computed.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(values[prepared->spec.outputs[i]], io.output(computed[i]));
    }
    hal::RunArgs args;
    args.values = values;
    if (prepared->arena_bytes > prepared->scratch_offset) {
      args.scratch = {arena_.get(), prepared->scratch_offset};
    }
    args.observer = observer == nullptr || stage.first == 0 ? observer : &stage_observer;
    KILN_RETURN_IF_ERROR(io.run(*prepared->executable, args));
    for (size_t i = 0; i < stage.outputs.size(); ++i)
      held[stage.outputs[i]] = std::move(computed[i]);
  }

  std::vector<HostValue> outputs;
  for (size_t i = 0; i < module.outputs.size(); ++i) {
    const int32_t out = module.outputs[i];
    const module::ModuleValue& value = module.values[out];
    if (value.form != ValueForm::kTensor) {
      if (!into.empty()) {
        return invalid_argument("output {} '{}' is a {}; run_into writes tensor outputs only", i,
                                value.name, value_form_name(value.form));
      }
      const HostValue& result = held.at(out);
      outputs.push_back(value.kind == module::ValueKind::kIntermediate ? result : result.clone());
      continue;
    }
    const Tensor& result =
        value.kind == module::ValueKind::kConstant ? value.constant : held.at(out).tensor();
    if (!into.empty()) {
      // Computed outputs are in place already; constants, graph inputs and a value listed twice
      // are copied.
      KILN_RETURN_IF_ERROR(check_output_tensor(module, i, result.shape(), into[i]));
      if (into[i].data() != result.data() && result.byte_size() > 0)
        std::memcpy(into[i].mutable_data(), result.data(), result.byte_size());
    } else if (value.kind == module::ValueKind::kIntermediate) {
      outputs.push_back(result);
    } else {
      outputs.push_back(result.clone());
    }
  }
  if (bound != nullptr) *bound = std::move(bindings);
  return outputs;
}

}  // namespace kiln::runtime
