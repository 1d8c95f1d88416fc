#include "kiln/runtime/session.h"

#include <unistd.h>

namespace kiln::runtime {
namespace {

// The tensor interfaces (run, run_into, output_shapes) refuse a sequence or optional output.
Status check_tensor_output(const module::ModuleValue& value, size_t index) {
  if (value.form == ValueForm::kTensor) return ok_status();
  return invalid_argument(
      "output {} '{}' is a {}; run_values takes and gives sequences and optionals", index,
      value.name, value_form_name(value.form));
}

}  // namespace

uint64_t default_max_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{8} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / 4 * 3;
}

Session::Session(std::shared_ptr<const module::ModuleContents> module,
                 std::unique_ptr<hal::Device> device, PlanCacheLimits limits,
                 uint64_t max_memory_bytes)
    : module_(std::move(module)), device_(std::move(device)), stages_(plan_stages(*module_)) {
  for (const module::Dispatch& dispatch : module_->dispatches) {
    data_symbols_.insert(dispatch.data_symbols.begin(), dispatch.data_symbols.end());
  }
  context_.module = module_.get();
  context_.device = device_.get();
  context_.stages = &stages_;
  context_.limits = limits;
  context_.max_memory_bytes = max_memory_bytes;
}

Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::open(const std::string& module_path,
                                                 const SessionOptions& options) {
  module::LoadOptions load_options;
  load_options.verify_checksum = !options.trust_module;
  KILN_ASSIGN_OR_RETURN(auto module, module::load_module(module_path, load_options));
  return create(std::move(module), options);
}

StatusOr<std::unique_ptr<Session>> Session::create(
    std::shared_ptr<const module::ModuleContents> module, const SessionOptions& options) {
  if (options.threads < 0)
    return invalid_argument("--threads must be >= 0, got {}", options.threads);
  hal::DeviceOptions device_options;
  device_options.threads = options.threads;
  device_options.team_policy = options.team_policy;
  device_options.allow_fallback = options.allow_fallback;
  device_options.sample_group_bytes = options.sample_group_bytes;
  KILN_ASSIGN_OR_RETURN(
      auto device, hal::create_device(options.device, device_options, options.decorate_device));
  PlanCacheLimits limits;
  limits.max_plans = options.max_plans != 0 ? options.max_plans : kDefaultMaxPlans;
  limits.max_bytes = options.max_plan_bytes != 0 ? options.max_plan_bytes : kDefaultMaxPlanBytes;
  if (limits.max_plans == 0) limits.max_plans = 1;
  const uint64_t max_memory_bytes =
      options.max_memory_bytes != 0 ? options.max_memory_bytes : default_max_memory_bytes();
  return std::unique_ptr<Session>(
      new Session(std::move(module), std::move(device), limits, max_memory_bytes));
}

StatusOr<Bindings> Session::bind(std::span<const Tensor> inputs) const {
  return bind_inputs(*module_, tensor_values(inputs));
}

StatusOr<Bindings> Session::bind_values(std::span<const HostValue> inputs) const {
  return bind_inputs(*module_, inputs);
}

StatusOr<std::vector<ConcreteShape>> Session::value_shapes(const Bindings& bindings) const {
  std::vector<ConcreteShape> shapes;
  shapes.reserve(module_->values.size());
  for (const module::ModuleValue& value : module_->values) {
    KILN_ASSIGN_OR_RETURN(ConcreteShape shape, concrete_shape(value, bindings));
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

std::string Session::data_symbol_of(const module::ModuleValue& value) const {
  for (const DimExpr& dim : value.shape) {
    for (const std::string& symbol : dim.symbols()) {
      if (data_symbols_.count(symbol)) return symbol;
    }
  }
  return {};
}

StatusOr<std::vector<ConcreteShape>> Session::output_shapes(std::span<const Tensor> inputs) const {
  KILN_ASSIGN_OR_RETURN(Bindings bindings, bind(inputs));
  std::vector<ConcreteShape> shapes;
  for (size_t i = 0; i < module_->outputs.size(); ++i) {
    const module::ModuleValue& value = module_->values[module_->outputs[i]];
    KILN_RETURN_IF_ERROR(check_tensor_output(value, i));
    const std::string symbol = data_symbol_of(value);
    if (!symbol.empty()) {
      return failed_precondition(
          "output {} '{}' has dims {} that depend on data: '{}' is known only after a run", i,
          value.name, shape_to_string(value.shape), symbol);
    }
    KILN_ASSIGN_OR_RETURN(ConcreteShape shape, concrete_shape(value, bindings));
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

RunState& Session::acquire() {
  std::lock_guard lock(pool_mutex_);
  if (!idle_.empty()) {
    RunState* state = idle_.back();
    idle_.pop_back();
    return *state;
  }
  slots_.push_back(Slot{std::make_unique<RunState>(context_), {}, 0});
  return *slots_.back().state;
}

void Session::release(RunState& state) {
  std::lock_guard lock(pool_mutex_);
  for (Slot& slot : slots_) {
    if (slot.state.get() != &state) continue;
    slot.stats = state.plan_cache_stats();
    slot.arena_bytes = state.arena_bytes();
  }
  idle_.push_back(&state);
}

PlanCacheStats Session::plan_cache_stats() const {
  std::lock_guard lock(pool_mutex_);
  PlanCacheStats total;
  for (const Slot& slot : slots_) {
    total.plans += slot.stats.plans;
    total.bytes += slot.stats.bytes;
    total.hits += slot.stats.hits;
    total.misses += slot.stats.misses;
    total.evictions += slot.stats.evictions;
  }
  return total;
}

size_t Session::arena_bytes() const {
  std::lock_guard lock(pool_mutex_);
  size_t total = 0;
  for (const Slot& slot : slots_) total += slot.arena_bytes;
  return total;
}

Status Session::check_module_file() const {
  if (module_->source_file == nullptr) return ok_status();
  return module_->source_file->check_unchanged();
}

StatusOr<std::vector<std::vector<std::string>>> Session::describe_dispatches(
    const Bindings& bindings) {
  KILN_RETURN_IF_ERROR(check_module_file());
  return with_state([&](RunState& state) { return state.describe_dispatches(bindings); });
}

// Runs and prepares read the module's constants from its file's mapping: a file changed before
// the call fails it at once, one changed during the call fails it after (its results may hold
// the changed bytes).
StatusOr<std::vector<Tensor>> Session::run(std::span<const Tensor> inputs,
                                           hal::RunObserver* observer, Bindings* bound) {
  for (size_t i = 0; i < module_->outputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(check_tensor_output(module_->values[module_->outputs[i]], i));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<HostValue> outputs,
                        run_values(tensor_values(inputs), observer, bound));
  return value_tensors(std::move(outputs), "output");
}

StatusOr<std::vector<HostValue>> Session::run_values(std::span<const HostValue> inputs,
                                                     hal::RunObserver* observer, Bindings* bound) {
  KILN_ASSIGN_OR_RETURN(Bindings bindings, bind_values(inputs));
  KILN_RETURN_IF_ERROR(check_module_file());
  auto outputs = with_state(
      [&](RunState& state) { return state.run(inputs, std::move(bindings), observer, bound); });
  KILN_RETURN_IF_ERROR(check_module_file());
  return outputs;
}

Status Session::run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  KILN_ASSIGN_OR_RETURN(Bindings bindings, bind(inputs));
  KILN_RETURN_IF_ERROR(check_output_count(*module_, outputs));
  // Outputs whose dims the inputs decide are checked before anything runs; the run checks the
  // others once their stage knows them.
  for (size_t i = 0; i < outputs.size(); ++i) {
    const module::ModuleValue& value = module_->values[module_->outputs[i]];
    KILN_RETURN_IF_ERROR(check_tensor_output(value, i));
    if (!data_symbol_of(value).empty()) continue;
    KILN_ASSIGN_OR_RETURN(ConcreteShape shape, concrete_shape(value, bindings));
    KILN_RETURN_IF_ERROR(check_output_tensor(*module_, i, shape, outputs[i]));
  }
  KILN_RETURN_IF_ERROR(check_module_file());
  const std::vector<HostValue> values = tensor_values(inputs);
  Status ran = with_state([&](RunState& state) {
    return state.run(values, std::move(bindings), nullptr, nullptr, outputs).status();
  });
  KILN_RETURN_IF_ERROR(check_module_file());
  return ran;
}

}  // namespace kiln::runtime
