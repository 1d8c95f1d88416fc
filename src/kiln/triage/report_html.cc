// The HTML page of `kiln triage` (report.h): the verdict first, in a banner, then the chart of
// the error per layer (labelled axes, a legend) and the table behind it. The page reflows to the
// window: text wraps, the chart scales with the page's width, the table scrolls sideways.
#include <algorithm>
#include <cmath>
#include <string>

#include "kiln/tooling/html.h"
#include "kiln/triage/report.h"

namespace kiln::triage {
namespace {

// Chart geometry in SVG user units; the SVG scales to the page's width (viewBox).
constexpr double kWidth = 1000, kHeight = 380;
constexpr double kLeft = 78, kRight = 24, kTop = 52, kBottom = 56;
constexpr double kFloor = 1e-12;
constexpr const char* kErrorColor = "#1f77b4";
constexpr const char* kFailColor = "#d62728";

double tolerance_bound(const LayerReport& layer) {
  return layer.tolerance.atol + layer.tolerance.rtol * layer.expected_max_abs;
}

// The one-line verdict, and the details that follow it in the banner.
struct Verdict {
  bool clean = true;
  std::string headline;
  std::string details;
};

Verdict verdict_of(const TriageResult& result) {
  Verdict v;
  if (result.clean()) {
    v.headline = "CLEAN: every compared layer is within tolerance";
    return v;
  }
  const Divergence& d = *result.first_divergence;
  const LayerReport& layer = result.layers[d.layer];
  v.clean = false;
  v.headline = fmt::format("DIVERGED at dispatch {} '{}' ({}), ONNX nodes: {}", d.dispatch,
                           layer.dispatch_name, layer.op_type, fmt::join(layer.nodes, ", "));
  v.details = fmt::format("output '{}' {}: NaN {}, Inf {}, max abs err {:.6g}. At fault: {}: {}",
                          layer.value, shape_to_string(layer.shape), layer.result.actual_nan,
                          layer.result.actual_inf, layer.result.max_abs_error,
                          d.at_fault ? "YES" : "no", d.explanation);
  return v;
}

// A line chart: x = dispatch in run order, y = log10 of the max abs error and of the tolerance
// at the layer's largest |expected|; failing layers in red, NaN/Inf drawn at the top.
std::string error_chart(const std::vector<LayerReport>& layers) {
  double lo = 1e300, hi = 0;
  for (const LayerReport& l : layers) {
    if (!l.compared) continue;
    for (double v : {l.result.max_abs_error, tolerance_bound(l)}) {
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
  const double y_lo = std::floor(std::log10(std::max(lo, kFloor)));
  const double y_hi = std::ceil(std::log10(hi)) + 1;
  const size_t last = layers.empty() ? 0 : layers.back().dispatch;
  const double x_span = std::max<double>(1, static_cast<double>(last));
  auto x_of = [&](double dispatch) {
    return kLeft + (kWidth - kLeft - kRight) * dispatch / x_span;
  };
  auto y_of = [&](double v) {
    const double lv = std::log10(std::max(v, std::pow(10.0, y_lo)));
    return kTop + (kHeight - kTop - kBottom) * (1 - (lv - y_lo) / (y_hi - y_lo));
  };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" class=\"chart\" "
      "role=\"img\" aria-label=\"max abs error per layer\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n",
      kWidth, kHeight);
  // Axes, with a grid line and a label per decade and per x tick.
  const double bottom = kHeight - kBottom;
  svg += fmt::format(
      "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#333\"/>"
      "<line x1=\"{0}\" x2=\"{3}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#333\"/>\n",
      kLeft, kTop, bottom, kWidth - kRight);
  for (double e = y_lo; e <= y_hi; e += 1) {
    const double y = y_of(std::pow(10.0, e));
    svg += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">1e{}</text>\n",
        kLeft + 1, kWidth - kRight, y, y, kLeft - 6, y + 4, static_cast<int>(e));
  }
  const size_t step = std::max<size_t>(1, (last + 1) / 10);
  for (size_t d = 0; d <= last; d += step) {
    const double x = x_of(static_cast<double>(d));
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#333\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        x, bottom, bottom + 5, bottom + 18, d);
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">dispatch (run order)</text>\n"
      "<text transform=\"translate(18 {}) rotate(-90)\" text-anchor=\"middle\">max abs error "
      "(log scale)</text>\n",
      (kWidth + kLeft - kRight) / 2, kHeight - 12, (kTop + bottom) / 2);
  // The series.
  std::string err_path, tol_path;
  for (const LayerReport& l : layers) {
    if (!l.compared) continue;
    const double x = x_of(static_cast<double>(l.dispatch));
    // A layer with NaN/Inf sits at the top, as its dot does, not at its finite elements' error.
    const double y = l.nonfinite() > 0 ? kTop : y_of(l.result.max_abs_error);
    err_path += fmt::format("{}{:.1f},{:.1f} ", err_path.empty() ? "M" : "L", x, y);
    tol_path +=
        fmt::format("{}{:.1f},{:.1f} ", tol_path.empty() ? "M" : "L", x, y_of(tolerance_bound(l)));
  }
  svg += fmt::format(
      "<path d=\"{}\" fill=\"none\" stroke=\"#888\" stroke-dasharray=\"5 4\"/>\n"
      "<path d=\"{}\" fill=\"none\" stroke=\"{}\"/>\n",
      tol_path, err_path, kErrorColor);
  for (const LayerReport& l : layers) {
    if (!l.compared) continue;
    const bool nonfinite = l.nonfinite() > 0;
    const double y = nonfinite ? kTop : y_of(l.result.max_abs_error);
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"><title>{} {}: max abs err "
        "{:.3g}{}</title></circle>\n",
        x_of(static_cast<double>(l.dispatch)), y, l.passed() ? 2.5 : 4.5,
        l.passed() ? kErrorColor : kFailColor, l.dispatch, html_escape(l.dispatch_name),
        l.result.max_abs_error, nonfinite ? fmt::format(", {} NaN/Inf", l.nonfinite()) : "");
  }
  // The legend, above the plot.
  const double ly = 22;
  svg += fmt::format(
      "<g class=\"legend\">"
      "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"2\"/>"
      "<text x=\"{4}\" y=\"{5}\">max abs error of the layer's output</text>"
      "<line x1=\"{6}\" x2=\"{7}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#888\" stroke-dasharray=\"5 4\" "
      "stroke-width=\"2\"/>"
      "<text x=\"{8}\" y=\"{5}\">tolerance: atol + rtol &#183; max |expected|</text>"
      "<circle cx=\"{9}\" cy=\"{2}\" r=\"4.5\" fill=\"{10}\"/>"
      "<text x=\"{11}\" y=\"{5}\">outside tolerance (NaN/Inf: at the top)</text></g>\n",
      kLeft, kLeft + 28, ly, kErrorColor, kLeft + 34, ly + 4, kLeft + 290, kLeft + 318, kLeft + 324,
      kLeft + 620, kFailColor, kLeft + 630);
  svg += "</svg>\n";
  return svg;
}

std::string layer_rows(const std::vector<LayerReport>& layers) {
  std::string rows;
  for (const LayerReport& l : layers) {
    rows += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3g}</td>"
        "<td>{:.3g}</td><td>{:.3g}</td><td>{:.3g}</td><td>{}/{}</td><td>{}</td><td>{}</td>"
        "<td>{:.3f}</td></tr>\n",
        l.passed() ? "ok" : "bad", l.dispatch, html_escape(l.dispatch_name), html_escape(l.op_type),
        html_escape(fmt::format("{}", fmt::join(l.nodes, ", "))), shape_to_string(l.shape),
        l.result.max_abs_error, l.result.max_rel_error, l.tolerance.atol, l.tolerance.rtol,
        l.result.mismatches, l.result.count, l.result.actual_nan, l.result.actual_inf,
        l.elapsed_ms);
  }
  return rows;
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:20px auto;max-width:1400px;padding:0 20px}"
    " h1{font-size:22px;overflow-wrap:anywhere}"
    " .verdict{padding:12px 16px;border-radius:6px;font-size:17px;overflow-wrap:anywhere}"
    " .verdict.clean{background:#e3f4e1;border:1px solid #7cbf76}"
    " .verdict.diverged{background:#fde2e2;border:1px solid #d66}"
    " .verdict p{margin:6px 0 0;font-size:14px}"
    " pre{background:#f6f6f6;padding:8px;white-space:pre-wrap;overflow-wrap:anywhere}"
    " .chart{width:100%;height:auto;max-width:1300px}"
    " .table{overflow-x:auto} table{border-collapse:collapse;font-size:12px}"
    " td,th{border:1px solid #ccc;padding:2px 6px} tr.bad{background:#fdd}";

}  // namespace

std::string html_report(const ReportContext& context) {
  const TriageResult& result = *context.result;
  const Verdict verdict = verdict_of(result);
  const std::string details =
      verdict.details.empty() ? "" : "<p>" + html_escape(verdict.details) + "</p>";
  return fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>kiln triage: {0}</title>\n<style>{1}</style></head><body>\n"
      "<h1>kiln triage: {0}</h1>\n"
      "<div class=\"verdict {2}\"><strong>{3}</strong>{4}</div>\n"
      "<h2>Error per layer</h2>\n{5}"
      "<h2>Summary</h2>\n<pre>{6}</pre>\n"
      "<h2>Layers</h2>\n<div class=\"table\"><table><tr><th>dispatch</th><th>name</th>"
      "<th>op</th><th>ONNX nodes</th><th>shape</th><th>max abs err</th><th>max rel err</th>"
      "<th>atol</th><th>rtol</th><th>mismatches</th><th>NaN</th><th>Inf</th><th>ms</th></tr>\n"
      "{7}</table></div>\n</body></html>\n",
      html_escape(context.model), kStyle, verdict.clean ? "clean" : "diverged",
      html_escape(verdict.headline), details, error_chart(result.layers),
      html_escape(text_report(context)), layer_rows(result.layers));
}

}  // namespace kiln::triage
