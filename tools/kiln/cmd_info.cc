// `kiln info FILE [--json]`: what a compiled module (.kmod) or a model (.onnx, .kir) takes and
// gives, with symbolic shapes, without running it.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "kiln/compiler/model_loader.h"
#include "kiln/module/module.h"

namespace kiln::cli {
namespace {

using Json = nlohmann::ordered_json;

struct InfoFlags {
  std::string file;
  bool json = false;
};

bool is_model_path(const std::string& path) {
  auto ends_with = [&](std::string_view ext) {
    return path.size() >= ext.size() &&
           path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  return ends_with(".onnx") || ends_with(".kir");
}

// A dim as JSON: its value when static, its expression ("N", "2*N + 1") when symbolic.
Json dims_json(const Shape& shape) {
  Json dims = Json::array();
  for (const DimExpr& dim : shape) {
    if (auto value = dim.constant_value()) {
      dims.push_back(*value);
    } else {
      dims.push_back(dim.to_string());
    }
  }
  return dims;
}

// A sequence or optional also says its form ("sequence", "optional tensor", ...); its dtype is its
// tensors'.
Json tensor_json(const std::string& name, DType dtype, const Shape& shape, ValueForm form) {
  Json out{{"name", name}, {"dtype", std::string(dtype_name(dtype))}, {"shape", dims_json(shape)}};
  if (form != ValueForm::kTensor) out["form"] = std::string(value_form_name(form));
  return out;
}

// "  data: f32[N,3,224,224]" for each of `tensors` ("  s: sequence of f32" for a sequence).
void print_tensors(const char* title, const Json& tensors) {
  std::printf("%s:\n", title);
  for (const Json& tensor : tensors) {
    std::string dims;
    for (const Json& dim : tensor["shape"]) {
      dims += (dims.empty() ? "" : ",") + (dim.is_string() ? dim.get<std::string>() : dim.dump());
    }
    if (tensor.contains("form")) {
      std::printf("  %s: %s of %s\n", tensor["name"].get<std::string>().c_str(),
                  tensor["form"].get<std::string>().c_str(),
                  tensor["dtype"].get<std::string>().c_str());
      continue;
    }
    std::printf("  %s: %s[%s]\n", tensor["name"].get<std::string>().c_str(),
                tensor["dtype"].get<std::string>().c_str(), dims.c_str());
  }
}

StatusOr<Json> module_info(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto module, module::load_module(path));
  Json info{{"file", path},
            {"kind", "module"},
            {"format_version", module::kFormatVersion},
            {"producer", module->producer},
            {"model_name", module->model_name}};
  Json inputs = Json::array(), outputs = Json::array();
  for (int32_t id : module->inputs) {
    const module::ModuleValue& value = module->values[id];
    inputs.push_back(tensor_json(value.name, value.dtype, value.shape, value.form));
  }
  for (int32_t id : module->outputs) {
    const module::ModuleValue& value = module->values[id];
    outputs.push_back(tensor_json(value.name, value.dtype, value.shape, value.form));
  }
  info["inputs"] = std::move(inputs);
  info["outputs"] = std::move(outputs);
  info["symbols"] = module->symbols;
  Json assumptions = Json::array();
  for (const Assumption& assumption : module->assumptions) {
    assumptions.push_back({{"assumption", assumption.to_string()}, {"origin", assumption.origin}});
  }
  info["assumptions"] = std::move(assumptions);
  info["dispatches"] = module->dispatches.size();
  size_t constants = 0;
  uint64_t constant_bytes = 0;
  for (const module::ModuleValue& value : module->values) {
    if (value.kind != module::ValueKind::kConstant) continue;
    ++constants;
    constant_bytes += value.constant.byte_size();
  }
  info["constants"] = constants;
  info["constant_bytes"] = constant_bytes;
  return info;
}

StatusOr<Json> model_info(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(ir::Graph graph, compiler::load_model(path, {}));
  Json info{{"file", path}, {"kind", "model"}, {"model_name", graph.name}, {"opset", graph.opset}};
  Json inputs = Json::array(), outputs = Json::array();
  for (ir::ValueId id : graph.inputs()) {
    const ir::Value& value = graph.value(id);
    inputs.push_back(tensor_json(value.name, value.dtype, value.shape, value.form));
  }
  for (ir::ValueId id : graph.outputs()) {
    const ir::Value& value = graph.value(id);
    outputs.push_back(tensor_json(value.name, value.dtype, value.shape, value.form));
  }
  info["inputs"] = std::move(inputs);
  info["outputs"] = std::move(outputs);
  info["nodes"] = graph.nodes().size();
  Json assumptions = Json::array();
  for (const Assumption& assumption : graph.assumptions) {
    assumptions.push_back({{"assumption", assumption.to_string()}, {"origin", assumption.origin}});
  }
  info["assumptions"] = std::move(assumptions);
  return info;
}

void print_info(const Json& info) {
  const bool module = info["kind"] == "module";
  if (module) {
    std::printf("module %s (format %u, produced by %s)\n", info["file"].get<std::string>().c_str(),
                info["format_version"].get<unsigned>(),
                info["producer"].get<std::string>().c_str());
  } else {
    std::printf("model %s (opset %lld after import)\n", info["file"].get<std::string>().c_str(),
                static_cast<long long>(info["opset"].get<int64_t>()));
  }
  std::printf("name: %s\n", info["model_name"].get<std::string>().c_str());
  print_tensors("inputs", info["inputs"]);
  print_tensors("outputs", info["outputs"]);
  if (module) {
    std::string symbols;
    for (const Json& symbol : info["symbols"]) {
      symbols += (symbols.empty() ? "" : ", ") + symbol.get<std::string>();
    }
    std::printf("symbols: %s\n", symbols.empty() ? "(none)" : symbols.c_str());
  }
  std::printf("assumptions:%s\n", info["assumptions"].empty() ? " (none)" : "");
  for (const Json& assumption : info["assumptions"]) {
    std::printf("  %s  (%s)\n", assumption["assumption"].get<std::string>().c_str(),
                assumption["origin"].get<std::string>().c_str());
  }
  if (module) {
    std::printf("dispatches: %zu\n", info["dispatches"].get<size_t>());
    std::printf("constants: %zu, %llu bytes\n", info["constants"].get<size_t>(),
                static_cast<unsigned long long>(info["constant_bytes"].get<uint64_t>()));
  } else {
    std::printf("nodes: %zu\n", info["nodes"].get<size_t>());
  }
}

int run_info(const InfoFlags& flags) {
  auto info = is_model_path(flags.file) ? model_info(flags.file) : module_info(flags.file);
  if (!info.ok()) return report_error("info", info.status());
  if (flags.json) {
    std::printf("%s\n", info->dump(2).c_str());
  } else {
    print_info(*info);
  }
  return kExitOk;
}

}  // namespace

Command add_info_command(CLI::App& app) {
  auto flags = std::make_shared<InfoFlags>();
  CLI::App* sub = app.add_subcommand(
      "info", "show a module's or a model's inputs and outputs (symbolic shapes) and contents");
  sub->add_option("file", flags->file,
                  "compiled module (.kmod), or a model (.onnx, .kir), which is imported")
      ->required();
  sub->add_flag("--json", flags->json, "print one JSON object instead of text");
  return {sub, [flags] { return run_info(*flags); }};
}

}  // namespace kiln::cli
