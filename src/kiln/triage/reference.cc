#include "kiln/triage/reference.h"

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "kiln/base/file_util.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/onnx/exporter.h"
#include "kiln/tooling/tensor_io.h"

namespace kiln::triage {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// run_ort.js's file name for an output.
std::string safe_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  return out;
}

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class KeepAll : public hal::RunObserver {
 public:
  explicit KeepAll(const module::ModuleContents& module, std::map<std::string, Tensor>& values)
      : module_(module), values_(values) {}
  bool wants_outputs(int32_t) override { return true; }
  Status after_dispatch(int32_t d, double, std::span<const Tensor> outputs) override {
    const auto& ids = module_.dispatches[d].outputs;
    for (size_t i = 0; i < outputs.size(); ++i) values_[module_.values[ids[i]].name] = outputs[i];
    return ok_status();
  }

 private:
  const module::ModuleContents& module_;
  std::map<std::string, Tensor>& values_;
};

}  // namespace

StatusOr<ReferenceValues> evaluate_reference(const ir::Graph& graph,
                                             std::span<const Tensor> inputs) {
  ReferenceValues out;
  out.description = "the float64 reference evaluator";
  const Clock::time_point start = Clock::now();
  std::map<ir::ValueId, Tensor> intermediates;
  auto results = graph_eval::evaluate_graph(graph, inputs, &intermediates);
  if (!results.ok()) return std::move(results).status().with_note("in the reference evaluation");
  out.elapsed_ms = ms_since(start);
  for (auto& [id, tensor] : intermediates) out.values[graph.value(id).name] = std::move(tensor);
  for (size_t i = 0; i < inputs.size() && i < graph.inputs().size(); ++i) {
    out.values[graph.value(graph.inputs()[i]).name] = inputs[i];
  }
  return out;
}

std::string default_ort_runner() {
  if (const char* env = std::getenv("KILN_ORT_RUNNER"); env != nullptr && *env != '\0') return env;
  return KILN_DEFAULT_ORT_RUNNER;
}

StatusOr<ReferenceValues> run_onnxruntime(const std::string& model_path, const ir::Graph& graph,
                                          std::span<const Tensor> inputs,
                                          std::span<const std::string> wanted,
                                          const OrtOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(options.runner, ec)) {
    return not_found(
        "the ONNX Runtime runner '{}' does not exist (set KILN_ORT_RUNNER to "
        "tools/ort/run_ort.js)",
        options.runner);
  }
  fs::create_directories(options.work_dir + "/outputs", ec);
  if (ec) return invalid_argument("cannot create '{}': {}", options.work_dir, ec.message());
  if (inputs.size() != graph.inputs().size()) {
    return invalid_argument("the model takes {} inputs, got {}", graph.inputs().size(),
                            inputs.size());
  }
  std::vector<std::pair<std::string, DType>> extra;
  for (const std::string& name : wanted) {
    auto id = graph.find_value(name);
    if (!id || graph.value(*id).constant) continue;
    if (std::find(graph.inputs().begin(), graph.inputs().end(), *id) != graph.inputs().end())
      continue;
    extra.emplace_back(name, graph.value(*id).dtype);
  }
  const std::string copy = options.work_dir + "/model_with_intermediates.onnx";
  KILN_RETURN_IF_ERROR(onnx_import::write_model_with_outputs(model_path, extra, copy));
  std::string command = fmt::format("{} {} run {}", shell_quote(options.node),
                                    shell_quote(options.runner), shell_quote(copy));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value& value = graph.value(graph.inputs()[i]);
    // The runner takes kiln's dtype names; onnxruntime-node has no bfloat16 tensors.
    const std::string_view type = dtype_name(inputs[i].dtype());
    if (inputs[i].dtype() == DType::kBF16) {
      return unimplemented("input '{}': ONNX Runtime runner cannot take {}", value.name, type);
    }
    const std::string file = fmt::format("{}/input_{}.bin", options.work_dir, i);
    KILN_RETURN_IF_ERROR(write_tensor_file(file, inputs[i], TensorFileFormat::kRaw));
    std::string dims =
        inputs[i].shape().empty() ? "scalar" : fmt::format("{}", fmt::join(inputs[i].shape(), "x"));
    command += " --input " + shell_quote(fmt::format("{}={}:{}:{}", value.name, dims, type, file));
  }
  command += " --output-dir " + shell_quote(options.work_dir + "/outputs");
  if (options.threads > 0) command += fmt::format(" --threads {}", options.threads);
  command += " 2>&1";

  ReferenceValues out;
  out.description = "ONNX Runtime (CPU)";
  const Clock::time_point start = Clock::now();
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return internal_error("cannot start '{}'", command);
  std::string log;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) log.append(buffer, n);
  const int status = pclose(pipe);
  out.elapsed_ms = ms_since(start);
  if (status != 0) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (log.size() > 2000) log = "..." + log.substr(log.size() - 2000);
    return failed_precondition("ONNX Runtime failed (exit {}): {}", code, log);
  }
  for (const std::string& name : wanted) {
    auto id = graph.find_value(name);
    if (!id || graph.value(*id).constant) continue;
    const std::string base = options.work_dir + "/outputs/" + safe_name(name);
    if (!fs::exists(base + ".bin")) continue;  // a graph input, or a value ORT did not expose
    auto shape_text = read_file(base + ".shape", 4096);
    if (!shape_text.ok()) return shape_text.status();
    std::string text = *shape_text;
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    ConcreteShape shape;
    if (text != "scalar") {
      size_t pos = 0;
      while (pos <= text.size()) {
        size_t x = text.find('x', pos);
        std::string part = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
        char* end = nullptr;
        long long dim = std::strtoll(part.c_str(), &end, 10);
        if (part.empty() || *end != '\0' || dim < 0) {
          return data_loss("'{}.shape' holds '{}', not a shape", base, text);
        }
        shape.push_back(dim);
        if (x == std::string::npos) break;
        pos = x + 1;
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor tensor,
                          read_raw_tensor_file(base + ".bin", graph.value(*id).dtype, shape));
    out.values[name] = std::move(tensor);
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    out.values[graph.value(graph.inputs()[i]).name] = inputs[i];
  // The model copy and the outputs are large and now in memory.
  fs::remove_all(options.work_dir, ec);
  return out;
}

StatusOr<ReferenceValues> run_module_reference(runtime::Session& session,
                                               std::span<const Tensor> inputs,
                                               const std::string& description) {
  ReferenceValues out;
  out.description = description;
  KeepAll observer(session.module(), out.values);
  const Clock::time_point start = Clock::now();
  KILN_RETURN_IF_ERROR(session.run(inputs, &observer).status());
  out.elapsed_ms = ms_since(start);
  const auto& module = session.module();
  for (size_t i = 0; i < inputs.size() && i < module.inputs.size(); ++i) {
    out.values[module.values[module.inputs[i]].name] = inputs[i];
  }
  return out;
}

}  // namespace kiln::triage
