#include "kiln/triage/report.h"

namespace kiln::triage {
namespace {

std::string layer_line(const LayerReport& layer) {
  std::string status;
  if (!layer.compared) {
    status = "not compared (the reference has no such tensor)";
  } else if (!layer.error.empty()) {
    status = "FAIL: " + layer.error;
  } else {
    status = format_compare_result(layer.result, layer.tolerance);
  }
  return fmt::format("{:4} {:<44} {:<18} {:<16} {}", layer.dispatch, layer.dispatch_name,
                     layer.op_type, shape_to_string(layer.shape), status);
}

nlohmann::json compare_json(const CompareResult& r) {
  return {{"max_abs_err", r.max_abs_error},
          {"max_rel_err", r.max_rel_error},
          {"mismatches", r.mismatches},
          {"nonfinite", r.actual_nan + r.actual_inf},
          {"passed", r.passed()}};
}

}  // namespace

std::string text_report(const ReportContext& context) {
  const TriageResult& result = *context.result;
  std::string out = fmt::format("kiln triage: '{}' against {}", context.model, result.reference);
  std::vector<std::string> bindings;
  for (const auto& [name, value] : result.bindings)
    bindings.push_back(fmt::format("{}={}", name, value));
  if (!bindings.empty()) out += fmt::format(" ({})", fmt::join(bindings, ", "));
  size_t compared = 0;
  for (const LayerReport& layer : result.layers) compared += layer.compared;
  out += fmt::format("\n  {} dispatch outputs, {} compared with a per-layer tolerance\n",
                     result.layers.size(), compared);
  if (result.clean()) {
    out += "  verdict: CLEAN, every compared layer is within tolerance\n";
  } else {
    const Divergence& d = *result.first_divergence;
    const LayerReport& layer = result.layers[d.layer];
    const size_t from = d.layer >= 3 ? d.layer - 3 : 0;
    out += "  last layers before the divergence, and the first diverging one:\n";
    for (size_t i = from; i <= d.layer; ++i) out += "  " + layer_line(result.layers[i]) + "\n";
    out += fmt::format("  verdict: DIVERGED at dispatch {} '{}' ({}), ONNX nodes: {}\n", d.dispatch,
                       layer.dispatch_name, layer.op_type, fmt::join(layer.nodes, ", "));
    out += fmt::format("    output '{}' {}: NaN {}, Inf {}, max abs err {:.6g}\n", layer.value,
                       shape_to_string(layer.shape), layer.result.actual_nan,
                       layer.result.actual_inf, layer.result.max_abs_error);
    out += fmt::format("    at fault: {}: {}\n", d.at_fault ? "YES" : "no", d.explanation);
  }
  if (context.repro != nullptr) {
    out += fmt::format("  repro: {}\n    {}\n", context.repro->dir, context.repro->command);
  }
  std::vector<std::string> timings;
  for (const auto& [name, ms] : context.timings_ms)
    timings.push_back(fmt::format("{} {:.0f} ms", name, ms));
  if (!timings.empty()) out += fmt::format("  time: {}\n", fmt::join(timings, ", "));
  return out;
}

nlohmann::json json_report(const ReportContext& context) {
  const TriageResult& result = *context.result;
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerReport& layer : result.layers) {
    layers.push_back({{"dispatch", layer.dispatch},
                      {"name", layer.dispatch_name},
                      {"op_type", layer.op_type},
                      {"nodes", layer.nodes},
                      {"output", layer.output},
                      {"value", layer.value},
                      {"shape", layer.shape},
                      {"compared", layer.compared},
                      {"passed", layer.passed()},
                      {"error", layer.error},
                      {"max_abs_err", layer.result.max_abs_error},
                      {"max_rel_err", layer.result.max_rel_error},
                      {"mismatches", layer.result.mismatches},
                      {"count", layer.result.count},
                      {"nan", layer.result.actual_nan},
                      {"inf", layer.result.actual_inf},
                      {"atol", layer.tolerance.atol},
                      {"rtol", layer.tolerance.rtol},
                      {"expected_max_abs", layer.expected_max_abs},
                      {"elapsed_ms", layer.elapsed_ms}});
  }
  nlohmann::json first = nullptr;
  if (!result.clean()) {
    const Divergence& d = *result.first_divergence;
    const LayerReport& layer = result.layers[d.layer];
    nlohmann::json isolated = nlohmann::json::array();
    for (const CompareResult& r : d.isolated) isolated.push_back(compare_json(r));
    first = {{"dispatch", d.dispatch},
             {"dispatch_name", layer.dispatch_name},
             {"op_type", layer.op_type},
             {"nodes", layer.nodes},
             {"value", layer.value},
             {"at_fault", d.at_fault},
             {"max_abs_err", layer.result.max_abs_error},
             {"nonfinite", layer.nonfinite()},
             {"explanation", d.explanation},
             {"isolated", std::move(isolated)}};
    if (context.repro != nullptr) {
      first["repro"] = {{"dir", context.repro->dir},           {"onnx", context.repro->onnx},
                        {"module", context.repro->kmod},       {"inputs", context.repro->inputs},
                        {"expected", context.repro->expected}, {"command", context.repro->command}};
    }
  }
  return {{"verdict", result.clean() ? "clean" : "diverged"},
          {"model", context.model},
          {"reference", result.reference},
          {"bindings", result.bindings},
          {"first_divergence", std::move(first)},
          {"layers", std::move(layers)},
          {"timings_ms", context.timings_ms}};
}

}  // namespace kiln::triage
