#include "kiln/triage/dispatch_dump.h"

#include <filesystem>

#include "kiln/base/file_util.h"
#include "kiln/kernels/activation.h"

namespace kiln::triage {
namespace {

const char* kind_name(module::ValueKind kind) {
  switch (kind) {
    case module::ValueKind::kInput: return "input";
    case module::ValueKind::kConstant: return "constant";
    case module::ValueKind::kIntermediate: return "intermediate";
  }
  return "?";
}

nlohmann::ordered_json attribute_json(const Attribute& attribute) {
  return std::visit([](const auto& v) { return nlohmann::ordered_json(v); }, attribute);
}

nlohmann::ordered_json value_json(const module::ModuleContents& module, int32_t v,
                                  const DispatchRunInfo* run) {
  if (v < 0) return nullptr;
  const module::ModuleValue& value = module.values[v];
  nlohmann::ordered_json out = {{"name", value.name},
                                {"kind", kind_name(value.kind)},
                                {"dtype", std::string(dtype_name(value.dtype))},
                                {"shape", shape_to_string(value.shape)}};
  if (run != nullptr && static_cast<size_t>(v) < run->value_shapes.size()) {
    out["concrete"] = run->value_shapes[v];
  }
  return out;
}

// How each origin after the first was folded into the dispatch: from the origin's op type when
// known, else from the dispatch's own kiln extensions (ops/registry.h).
std::vector<std::string> fused_ops(const module::Dispatch& d, const OriginOps& origin_ops) {
  std::vector<std::string> fused;
  bool described_activation = false, described_residual = false;
  for (size_t i = 1; i < d.origins.size(); ++i) {
    auto it = origin_ops.find(d.origins[i]);
    if (it == origin_ops.end()) continue;
    const std::string& op = it->second;
    std::string how = "fused";
    if (op == "BatchNormalization" && d.op_type == "Conv") {
      how = "folded into the weights and bias";
    } else if (op == "Add" && d.op_type == "Conv") {
      how = "residual input, added in the conv's post-ops";
      described_residual = true;
    } else if (op == "Relu" || op == "Clip") {
      auto act = kernels::read_fused_activation(d.attributes);
      how = fmt::format("activation (kiln_activation={})",
                        act.ok() ? kernels::describe(*act) : "invalid");
      described_activation = true;
    }
    fused.push_back(fmt::format("{} ({}): {}", d.origins[i], op, how));
  }
  if (auto act = d.attributes.get_string("kiln_activation", "");
      act.ok() && !act->empty() && !described_activation) {
    fused.push_back(fmt::format("activation {} (kiln_activation)", *act));
  }
  if (d.op_type == "Conv" && d.inputs.size() > 3 && d.inputs[3] >= 0 && !described_residual) {
    fused.push_back("residual input 3, added in the conv's post-ops");
  }
  return fused;
}

}  // namespace

std::string dispatch_file_stem(const module::ModuleContents& module, size_t dispatch) {
  const module::Dispatch& d = module.dispatches[dispatch];
  std::string base = d.origins.empty() ? d.name : d.origins.front();
  for (char& c : base) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  if (base.size() > 100) base.resize(100);
  return fmt::format("d{:03d}_{}", dispatch, base);
}

nlohmann::ordered_json describe_dispatch(const module::ModuleContents& module, size_t d,
                                         const OriginOps& origin_ops, const DispatchRunInfo* run) {
  const module::Dispatch& dispatch = module.dispatches[d];
  nlohmann::ordered_json origins = nlohmann::ordered_json::array();
  for (const std::string& origin : dispatch.origins) {
    nlohmann::ordered_json o = {{"name", origin}};
    if (auto it = origin_ops.find(origin); it != origin_ops.end()) o["op_type"] = it->second;
    origins.push_back(std::move(o));
  }
  nlohmann::ordered_json attributes = nlohmann::ordered_json::object();
  for (const auto& [name, value] : dispatch.attributes.all())
    attributes[name] = attribute_json(value);
  nlohmann::ordered_json inputs = nlohmann::ordered_json::array(),
                         outputs = nlohmann::ordered_json::array();
  for (int32_t v : dispatch.inputs) inputs.push_back(value_json(module, v, run));
  for (int32_t v : dispatch.outputs) outputs.push_back(value_json(module, v, run));
  nlohmann::ordered_json out = {{"index", d},
                                {"name", dispatch.name},
                                {"op_type", dispatch.op_type},
                                {"origins", std::move(origins)},
                                {"fused", fused_ops(dispatch, origin_ops)},
                                {"attributes", std::move(attributes)},
                                {"inputs", std::move(inputs)},
                                {"outputs", std::move(outputs)}};
  if (run != nullptr) {
    out["bindings"] = run->bindings;
    if (d < run->kernels.size()) out["kernels"] = run->kernels[d];
    if (d < run->extra.size() && run->extra[d].is_object()) out.update(run->extra[d]);
  } else {
    out["kernels"] =
        "chosen when the module is prepared for concrete shapes: see `kiln run --trace=DIR`";
  }
  return out;
}

Status write_dispatch_dump(const std::string& dir, const module::ModuleContents& module,
                           const OriginOps& origin_ops, const DispatchRunInfo* run) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return invalid_argument("cannot create directory '{}': {}", dir, ec.message());
  nlohmann::ordered_json index = {{"model", module.model_name}, {"symbols", module.symbols}};
  if (run != nullptr) index["bindings"] = run->bindings;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  std::string text = fmt::format("# {} dispatches of '{}'{}\n", module.dispatches.size(),
                                 module.model_name, run ? "" : " (symbolic shapes)");
  for (size_t d = 0; d < module.dispatches.size(); ++d) {
    const module::Dispatch& dispatch = module.dispatches[d];
    const std::string file = dispatch_file_stem(module, d) + ".json";
    KILN_RETURN_IF_ERROR(write_file_atomically(
        dir + "/" + file, describe_dispatch(module, d, origin_ops, run).dump(2) + "\n"));
    entries.push_back({{"index", d},
                       {"name", dispatch.name},
                       {"op_type", dispatch.op_type},
                       {"origins", dispatch.origins},
                       {"file", file}});
    std::vector<std::string> shapes;
    for (int32_t v : dispatch.outputs) {
      shapes.push_back(run != nullptr && static_cast<size_t>(v) < run->value_shapes.size()
                           ? shape_to_string(run->value_shapes[v])
                           : shape_to_string(module.values[v].shape));
    }
    text += fmt::format("{:4} {:<48} {:<20} {:<20} <- {}\n", d, dispatch.name, dispatch.op_type,
                        fmt::join(shapes, " "), fmt::join(dispatch.origins, ", "));
  }
  index["dispatches"] = std::move(entries);
  KILN_RETURN_IF_ERROR(write_file_atomically(dir + "/index.json", index.dump(2) + "\n"));
  return write_file_atomically(dir + "/index.txt", text);
}

}  // namespace kiln::triage
