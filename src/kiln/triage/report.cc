#include "kiln/triage/report.h"

#include <algorithm>
#include <cmath>

#include "kiln/tooling/html.h"

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

std::string html_report(const ReportContext& context) {
  const TriageResult& result = *context.result;
  const auto& layers = result.layers;
  // Chart: x = layer, y = log10 of the max abs error and of the tolerance at the largest |e|.
  constexpr double kWidth = 960, kHeight = 320, kLeft = 60, kRight = 20, kTop = 20, kBottom = 40;
  constexpr double kFloor = 1e-12;
  double lo = 1e300, hi = 0;
  auto bound_of = [](const LayerReport& l) {
    return l.tolerance.atol + l.tolerance.rtol * l.expected_max_abs;
  };
  for (const LayerReport& l : layers) {
    if (!l.compared) continue;
    for (double v : {l.result.max_abs_error, bound_of(l)}) {
      if (v > 0 && std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  if (hi == 0) {
    lo = kFloor;
    hi = 1;
  }
  const double y_lo = std::floor(std::log10(std::max(lo, kFloor))),
               y_hi = std::ceil(std::log10(hi)) + 1;
  const double n = std::max<double>(1, static_cast<double>(layers.size()) - 1);
  auto x_of = [&](size_t i) {
    return kLeft + (kWidth - kLeft - kRight) * static_cast<double>(i) / n;
  };
  auto y_of = [&](double v) {
    const double lv = std::log10(std::max(v, std::pow(10.0, y_lo)));
    return kTop + (kHeight - kTop - kBottom) * (1 - (lv - y_lo) / (y_hi - y_lo));
  };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" "
      "font-size=\"11\">\n",
      kWidth, kHeight);
  for (double e = y_lo; e <= y_hi; e += 1) {
    svg += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">1e{}</text>\n",
        kLeft, kWidth - kRight, y_of(std::pow(10.0, e)), y_of(std::pow(10.0, e)), kLeft - 4,
        y_of(std::pow(10.0, e)) + 4, static_cast<int>(e));
  }
  std::string err_path, tol_path;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerReport& l = layers[i];
    if (!l.compared) continue;
    const char* cmd = err_path.empty() ? "M" : "L";
    err_path += fmt::format("{}{:.1f},{:.1f} ", cmd, x_of(i), y_of(l.result.max_abs_error));
    tol_path +=
        fmt::format("{}{:.1f},{:.1f} ", tol_path.empty() ? "M" : "L", x_of(i), y_of(bound_of(l)));
  }
  svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>\n",
                     tol_path);
  svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"#1f77b4\"/>\n", err_path);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerReport& l = layers[i];
    if (!l.compared) continue;
    const bool nonfinite = l.nonfinite() > 0;
    const double y = nonfinite ? kTop : y_of(l.result.max_abs_error);
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"><title>{} {}: max abs err "
        "{:.3g}{}</title></circle>\n",
        x_of(i), y, l.passed() ? 2.5 : 4, l.passed() ? "#1f77b4" : "#d62728", l.dispatch,
        html_escape(l.dispatch_name), l.result.max_abs_error,
        nonfinite ? fmt::format(", {} NaN/Inf", l.nonfinite()) : "");
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">layer (dispatch output, in run "
      "order)</text>\n",
      (kWidth + kLeft) / 2, kHeight - 8);
  svg += "</svg>\n";

  std::string rows;
  for (const LayerReport& l : layers) {
    rows += fmt::format(
        "<tr "
        "class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3g}</"
        "td><td>{:.3g}</td>"
        "<td>{:.3g}</td><td>{:.3g}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{:.3f}</td></tr>\n",
        l.passed() ? "ok" : "bad", l.dispatch, html_escape(l.dispatch_name), html_escape(l.op_type),
        html_escape(fmt::format("{}", fmt::join(l.nodes, ", "))), shape_to_string(l.shape),
        l.result.max_abs_error, l.result.max_rel_error, l.tolerance.atol, l.tolerance.rtol,
        l.result.mismatches, l.result.count, l.result.actual_nan, l.result.actual_inf,
        l.elapsed_ms);
  }
  std::string summary = html_escape(text_report(context));
  return fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kiln triage: {}</title>\n"
      "<style>body{{font-family:sans-serif;margin:20px}} "
      "table{{border-collapse:collapse;font-size:12px}}"
      " td,th{{border:1px solid #ccc;padding:2px 6px}} tr.bad{{background:#fdd}} "
      "pre{{background:#f6f6f6;"
      "padding:8px}}</style></head><body>\n<h1>kiln triage: {}</h1>\n<pre>{}</pre>\n"
      "<h2>Error per layer (max abs error, log scale; dashed: tolerance at the layer's largest "
      "|expected|;"
      " red: outside tolerance, NaN/Inf drawn at the top)</h2>\n{}"
      "<h2>Layers</h2>\n<table><tr><th>dispatch</th><th>name</th><th>op</th><th>ONNX "
      "nodes</th><th>shape</th>"
      "<th>max abs err</th><th>max rel "
      "err</th><th>atol</th><th>rtol</th><th>mismatches</th><th>NaN</th>"
      "<th>Inf</th><th>ms</th></tr>\n{}</table>\n</body></html>\n",
      html_escape(context.model), html_escape(context.model), summary, svg, rows);
}

}  // namespace kiln::triage
