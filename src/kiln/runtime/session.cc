#include "kiln/runtime/session.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "kiln/base/checked_math.h"
#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/runtime/memory_planner.h"

namespace kiln::runtime {

struct Session::Prepared {
  std::vector<ConcreteShape> shapes;
  hal::ProgramSpec spec;
  std::unique_ptr<hal::Executable> executable;
  std::vector<size_t> offsets;
  size_t arena_bytes = 0;
};

uint64_t default_max_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{8} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / 4 * 3;
}

namespace {

// Bytes of a value with these dims, saturating instead of wrapping on absurd shapes.
uint64_t value_bytes(const ConcreteShape& shape, DType dtype) {
  auto count = checked_product(shape);
  if (!count) return UINT64_MAX;
  auto bytes = checked_mul(*count, static_cast<int64_t>(dtype_size(dtype)));
  return bytes ? static_cast<uint64_t>(*bytes) : UINT64_MAX;
}

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

Status check_memory(uint64_t needed, uint64_t limit, std::string_view what, const Bindings& bindings) {
  if (needed <= limit) return ok_status();
  std::vector<std::string> values;
  for (const auto& [symbol, value] : bindings) values.push_back(fmt::format("{}={}", symbol, value));
  return out_of_range("{} need {} bytes at [{}], over the memory limit of {} bytes (--max-memory)",
                      what, needed, fmt::join(values, ", "), limit);
}

}  // namespace

StatusOr<std::unique_ptr<hal::Device>> create_device(const std::string& name,
                                                     const hal::DeviceOptions& options) {
  if (name == "cpu") return hal::cpu::create_cpu_device(options);
  return invalid_argument("unknown device '{}': available devices: cpu", name);
}

Session::Session(std::shared_ptr<const module::ModuleContents> module,
                 std::unique_ptr<hal::Device> device)
    : module_(std::move(module)), device_(std::move(device)) {}

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
  if (options.threads < 0) return invalid_argument("--threads must be >= 0, got {}", options.threads);
  hal::DeviceOptions device_options;
  device_options.threads = options.threads;
  KILN_ASSIGN_OR_RETURN(auto device, create_device(options.device, device_options));
  auto session = std::unique_ptr<Session>(new Session(std::move(module), std::move(device)));
  session->max_memory_bytes_ =
      options.max_memory_bytes != 0 ? options.max_memory_bytes : default_max_memory_bytes();
  return session;
}

StatusOr<Bindings> Session::bind(std::span<const Tensor> inputs) const {
  const auto& module = *module_;
  if (inputs.size() != module.inputs.size()) {
    std::vector<std::string> names;
    for (int32_t id : module.inputs) names.push_back("'" + module.values[id].name + "'");
    return invalid_argument("the module takes {} input(s) ({}), got {}", module.inputs.size(),
                            fmt::join(names, ", "), inputs.size());
  }
  Bindings bindings;
  std::map<std::string, std::string> bound_by;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const module::ModuleValue& expected = module.values[module.inputs[i]];
    const Tensor& actual = inputs[i];
    if (actual.dtype() != expected.dtype) {
      return invalid_argument("input {} '{}': expected dtype {}, got {}", i, expected.name,
                              dtype_name(expected.dtype), dtype_name(actual.dtype()));
    }
    if (actual.shape().size() != expected.shape.size()) {
      return invalid_argument("input {} '{}': expected rank {} {}, got rank {} {}", i, expected.name,
                              expected.shape.size(), shape_to_string(expected.shape),
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
  for (size_t i = 0; i < inputs.size(); ++i) {
    const module::ModuleValue& expected = module.values[module.inputs[i]];
    for (size_t d = 0; d < expected.shape.size(); ++d) {
      auto want = expected.shape[d].evaluate(bindings);
      if (!want.ok()) return std::move(want).status().with_note(fmt::format("in input '{}'", expected.name));
      if (*want != inputs[i].shape()[d]) {
        return invalid_argument("input {} '{}' dim {}: expected {} ({} in {}), got {} (input shape {})",
                                i, expected.name, d, *want, expected.shape[d].to_string(),
                                shape_to_string(expected.shape), inputs[i].shape()[d],
                                shape_to_string(inputs[i].shape()));
      }
    }
  }
  for (const std::string& symbol : module.symbols) {
    if (!bindings.count(symbol)) return invalid_argument("symbol '{}' is not set by any input", symbol);
  }
  return bindings;
}

namespace {

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
    set_element_from_int64(out, static_cast<int64_t>(i), *v);
  }
  return out;
}

}  // namespace

StatusOr<std::vector<ConcreteShape>> Session::value_shapes(const Bindings& bindings) const {
  std::vector<ConcreteShape> shapes;
  shapes.reserve(module_->values.size());
  for (const module::ModuleValue& value : module_->values) {
    auto shape = evaluate_shape(value.shape, bindings);
    if (!shape.ok()) return std::move(shape).status().with_note(fmt::format("in value '{}'", value.name));
    KILN_RETURN_IF_ERROR(element_count(*shape).status());
    shapes.push_back(std::move(shape).value());
  }
  return shapes;
}

StatusOr<Session::Prepared*> Session::prepare(const Bindings& bindings) {
  if (auto it = prepared_.find(bindings); it != prepared_.end()) return it->second.get();
  const auto& module = *module_;
  auto prepared = std::make_unique<Prepared>();
  KILN_ASSIGN_OR_RETURN(prepared->shapes, value_shapes(bindings));
  // Any single activation or output over the limit is refused before the backend sizes kernels.
  for (size_t v = 0; v < module.values.size(); ++v) {
    if (module.values[v].kind != module::ValueKind::kIntermediate) continue;
    uint64_t bytes = value_bytes(prepared->shapes[v], module.values[v].dtype);
    KILN_RETURN_IF_ERROR(check_memory(bytes, max_memory_bytes_,
                                      fmt::format("value '{}' would", module.values[v].name), bindings));
  }

  hal::ProgramSpec& spec = prepared->spec;
  std::vector<hal::ValueRole> roles(module.values.size(), hal::ValueRole::kIntermediate);
  for (size_t v = 0; v < module.values.size(); ++v) {
    if (module.values[v].kind == module::ValueKind::kConstant) roles[v] = hal::ValueRole::kConstant;
    if (module.values[v].kind == module::ValueKind::kInput) roles[v] = hal::ValueRole::kInput;
  }
  for (int32_t out : module.outputs) {
    if (roles[out] == hal::ValueRole::kIntermediate) roles[out] = hal::ValueRole::kOutput;
  }
  for (size_t v = 0; v < module.values.size(); ++v) {
    const module::ModuleValue& value = module.values[v];
    hal::ValueSpec value_spec;
    value_spec.name = value.name;
    value_spec.dtype = value.dtype;
    value_spec.shape = prepared->shapes[v];
    value_spec.role = roles[v];
    if (roles[v] == hal::ValueRole::kConstant) value_spec.constant = &value.constant;
    if (!value.known_values.empty()) {
      KILN_ASSIGN_OR_RETURN(value_spec.known_value,
                            known_value_tensor(value, prepared->shapes[v], bindings));
    }
    spec.values.push_back(std::move(value_spec));
  }
  for (size_t d = 0; d < module.dispatches.size(); ++d) {
    const module::Dispatch& dispatch = module.dispatches[d];
    spec.dispatches.push_back({dispatch.name, dispatch.op_type, &dispatch.attributes,
                               dispatch.inputs, dispatch.outputs, static_cast<int32_t>(d),
                               dispatch.origins});
  }
  spec.inputs = module.inputs;
  for (int32_t out : module.outputs) {
    // Outputs that are inputs or constants are copied by the session, not computed.
    if (roles[out] == hal::ValueRole::kOutput) spec.outputs.push_back(out);
  }
  KILN_ASSIGN_OR_RETURN(prepared->executable, device_->prepare(spec));

  std::vector<BufferRequest> requests(module.values.size());
  for (size_t d = 0; d < module.dispatches.size(); ++d) {
    for (int32_t out : module.dispatches[d].outputs) {
      requests[out].first = requests[out].last = static_cast<int32_t>(d);
    }
    for (int32_t in : module.dispatches[d].inputs) {
      if (in >= 0) requests[in].last = static_cast<int32_t>(d);
    }
  }
  for (size_t v = 0; v < module.values.size(); ++v) {
    if (roles[v] == hal::ValueRole::kIntermediate) {
      requests[v].bytes = prepared->executable->storage_bytes(static_cast<int32_t>(v));
      requests[v].same_as = prepared->executable->storage_shared_with(static_cast<int32_t>(v));
    }
  }
  ArenaPlan plan = plan_arena(requests);
  uint64_t output_bytes = 0;
  for (int32_t out : module.outputs) {
    output_bytes = saturating_add(output_bytes, value_bytes(prepared->shapes[out], module.values[out].dtype));
  }
  KILN_RETURN_IF_ERROR(check_memory(saturating_add(plan.arena_bytes, output_bytes), max_memory_bytes_,
                                    "activations and outputs would", bindings));
  prepared->offsets = std::move(plan.offsets);
  prepared->arena_bytes = plan.arena_bytes;
  Prepared* raw = prepared.get();
  prepared_.emplace(bindings, std::move(prepared));
  return raw;
}

StatusOr<std::vector<std::vector<std::string>>> Session::describe_dispatches(
    const Bindings& bindings) {
  KILN_ASSIGN_OR_RETURN(Prepared * prepared, prepare(bindings));
  std::vector<std::vector<std::string>> out;
  for (size_t d = 0; d < module_->dispatches.size(); ++d) {
    out.push_back(prepared->executable->describe_dispatch(static_cast<int32_t>(d)));
  }
  return out;
}

StatusOr<std::vector<Tensor>> Session::run(std::span<const Tensor> inputs,
                                           hal::RunObserver* observer) {
  KILN_ASSIGN_OR_RETURN(Bindings bindings, bind(inputs));
  KILN_ASSIGN_OR_RETURN(Prepared * prepared, prepare(bindings));
  const auto& module = *module_;

  if (prepared->arena_bytes > arena_bytes_) {
    size_t bytes = (prepared->arena_bytes + 63) / 64 * 64;
    void* raw = std::aligned_alloc(64, bytes);
    if (raw == nullptr) return out_of_range("cannot allocate a {}-byte activation arena", bytes);
    arena_.reset(static_cast<std::byte*>(raw), [](std::byte* p) { std::free(p); });
    arena_bytes_ = bytes;
  }

  std::vector<Tensor> computed;
  for (int32_t out : prepared->spec.outputs) {
    KILN_ASSIGN_OR_RETURN(Tensor tensor, Tensor::create(module.values[out].dtype, prepared->shapes[out]));
    computed.push_back(std::move(tensor));
  }
  hal::RunArgs args;
  args.arena = arena_.get();
  args.offsets = prepared->offsets;
  args.inputs = inputs;
  args.outputs = computed;
  args.observer = observer;
  KILN_RETURN_IF_ERROR(prepared->executable->run(args));

  std::vector<Tensor> outputs;
  size_t next_computed = 0;
  for (int32_t out : module.outputs) {
    const module::ModuleValue& value = module.values[out];
    if (value.kind == module::ValueKind::kConstant) {
      outputs.push_back(value.constant.clone());
    } else if (value.kind == module::ValueKind::kInput) {
      auto pos = std::find(module.inputs.begin(), module.inputs.end(), out) - module.inputs.begin();
      outputs.push_back(inputs[pos].clone());
    } else {
      outputs.push_back(computed[next_computed++]);
    }
  }
  return outputs;
}

}  // namespace kiln::runtime
