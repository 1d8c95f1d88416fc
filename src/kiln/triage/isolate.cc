#include "kiln/triage/isolate.h"

#include <map>

#include "kiln/hal/host_tensors.h"
#include "kiln/hal/registry.h"

namespace kiln::triage {

StatusOr<std::vector<Tensor>> run_dispatch_alone(const module::ModuleContents& module, int32_t d,
                                                 std::span<const Tensor> inputs,
                                                 const Bindings& bindings,
                                                 const runtime::SessionOptions& options) {
  if (d < 0 || static_cast<size_t>(d) >= module.dispatches.size()) {
    return invalid_argument("dispatch {} is out of range: the module has {}", d,
                            module.dispatches.size());
  }
  const module::Dispatch& dispatch = module.dispatches[d];
  if (inputs.size() != dispatch.inputs.size()) {
    return invalid_argument("dispatch '{}' takes {} inputs, got {}", dispatch.name,
                            dispatch.inputs.size(), inputs.size());
  }
  hal::ProgramSpec spec;
  std::map<int32_t, int32_t> remap;  // module value -> program value
  std::vector<Tensor> run_inputs;
  hal::DispatchSpec one{
      dispatch.name, dispatch.op_type, &dispatch.attributes, {}, {}, d, dispatch.origins, {}};
  for (const std::string& symbol : dispatch.data_symbols) {
    auto bound = bindings.find(symbol);
    if (bound == bindings.end()) {
      return invalid_argument("dispatch '{}': no value for its data-dependent size '{}'",
                              dispatch.name, symbol);
    }
    one.data_sizes.push_back(bound->second);
  }
  for (size_t i = 0; i < dispatch.inputs.size(); ++i) {
    const int32_t v = dispatch.inputs[i];
    if (v < 0) {
      one.inputs.push_back(-1);
      continue;
    }
    if (auto it = remap.find(v); it != remap.end()) {
      one.inputs.push_back(it->second);
      continue;
    }
    const module::ModuleValue& value = module.values[v];
    hal::ValueSpec value_spec;
    value_spec.name = value.name;
    value_spec.dtype = value.dtype;
    if (value.kind == module::ValueKind::kConstant && inputs[i].empty_storage()) {
      value_spec.role = hal::ValueRole::kConstant;
      value_spec.shape = value.constant.shape();
      value_spec.constant = &value.constant;
    } else {
      if (inputs[i].empty_storage()) {
        return invalid_argument("dispatch '{}': input {} '{}' has no data", dispatch.name, i,
                                value.name);
      }
      if (inputs[i].dtype() != value.dtype) {
        return invalid_argument("dispatch '{}': input {} '{}' must be {}, got {}", dispatch.name, i,
                                value.name, dtype_name(value.dtype), dtype_name(inputs[i].dtype()));
      }
      value_spec.role = hal::ValueRole::kInput;
      value_spec.shape = inputs[i].shape();
      spec.inputs.push_back(static_cast<int32_t>(spec.values.size()));
      run_inputs.push_back(inputs[i]);
    }
    remap[v] = static_cast<int32_t>(spec.values.size());
    one.inputs.push_back(static_cast<int32_t>(spec.values.size()));
    spec.values.push_back(std::move(value_spec));
  }
  std::vector<Tensor> outputs;
  for (int32_t v : dispatch.outputs) {
    const module::ModuleValue& value = module.values[v];
    auto shape = evaluate_shape(value.shape, bindings);
    if (!shape.ok())
      return std::move(shape).status().with_note(fmt::format("in value '{}'", value.name));
    KILN_ASSIGN_OR_RETURN(Tensor tensor, Tensor::create(value.dtype, *shape));
    outputs.push_back(std::move(tensor));
    one.outputs.push_back(static_cast<int32_t>(spec.values.size()));
    spec.outputs.push_back(static_cast<int32_t>(spec.values.size()));
    spec.values.push_back(
        {value.name, value.dtype, std::move(shape).value(), hal::ValueRole::kOutput, nullptr});
  }
  spec.dispatches.push_back(std::move(one));

  KILN_ASSIGN_OR_RETURN(auto device, hal::create_device(options.device,
                                                        {.threads = options.threads,
                                                         .allow_fallback = options.allow_fallback},
                                                        options.decorate_device));
  KILN_ASSIGN_OR_RETURN(auto executable, device->prepare(spec));
  KILN_RETURN_IF_ERROR(hal::run_on_host(*device, *executable, spec, run_inputs, outputs));
  return outputs;
}

}  // namespace kiln::triage
