#include "kiln/suite/report.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/base/file_util.h"
#include "kiln/tooling/html.h"

namespace kiln::suite {
namespace {

struct Table {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
};

std::string figure(double value) { return fmt::format("{:.3g}", value); }

std::string dash_if_empty(const std::string& text) { return text.empty() ? "-" : text; }

// A failed comparison whose mismatches are all NaN or Inf shows no "0" error, which reads as a
// pass.
bool nan_inf_only(const CompareResult& r) { return !r.passed() && r.tolerance_mismatches() == 0; }

std::string error_cell(const CaseResult& c, double value) {
  const bool failed = std::any_of(c.outputs.begin(), c.outputs.end(), [](const OutputReport& o) {
    return o.compare && !o.compare->passed();
  });
  const bool only_nan_inf = std::all_of(
      c.outputs.begin(), c.outputs.end(),
      [](const OutputReport& o) { return !o.compare || o.compare->tolerance_mismatches() == 0; });
  return failed && only_nan_inf ? "n/a (NaN/Inf)" : figure(value);
}

Table summary_table(const SuiteResult& result) {
  Table table{{"model", "variant", "size", "outcome", "result", "max abs err", "max rel err",
               "NaN/Inf", "time"},
              {}};
  for (const CaseResult& c : result.cases) {
    const bool compared = std::any_of(c.outputs.begin(), c.outputs.end(),
                                      [](const OutputReport& o) { return o.compare.has_value(); });
    std::string model = c.data_set.empty() ? c.model : c.model + "/" + c.data_set;
    table.rows.push_back({model, dash_if_empty(c.variant), dash_if_empty(c.sizes),
                          std::string(outcome_name(c.outcome)),
                          std::string(verdict_name(c.verdict)),
                          compared ? error_cell(c, c.max_abs_error()) : "-",
                          compared ? error_cell(c, c.max_rel_error()) : "-",
                          compared ? fmt::format("{}/{}", c.nan_count(), c.inf_count()) : "-",
                          fmt::format("{:.2f} s", c.seconds)});
  }
  return table;
}

Table output_table(const CaseResult& c) {
  Table table{{"output", "reference", "atol", "rtol", "NaN", "result", "max abs err", "max rel err",
               "NaN/Inf (kiln)"},
              {}};
  for (const OutputReport& o : c.outputs) {
    table.rows.push_back(
        {o.name, o.reference, figure(o.tolerance.atol), figure(o.tolerance.rtol),
         o.tolerance.nan_equal ? "match" : "fail", o.passed ? "ok" : "FAIL",
         !o.compare                 ? "-"
         : nan_inf_only(*o.compare) ? "n/a (NaN/Inf)"
                                    : figure(o.compare->max_abs_error),
         !o.compare                 ? "-"
         : nan_inf_only(*o.compare) ? "n/a (NaN/Inf)"
                                    : figure(o.compare->max_rel_error),
         o.compare ? fmt::format("{}/{}", o.compare->actual_nan, o.compare->actual_inf) : "-"});
  }
  return table;
}

std::string render_text(const Table& table) {
  std::vector<size_t> width(table.headers.size());
  for (size_t i = 0; i < width.size(); ++i) {
    width[i] = table.headers[i].size();
    for (const auto& row : table.rows) width[i] = std::max(width[i], row[i].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      out += i + 1 == cells.size() ? cells[i] : fmt::format("{:<{}}  ", cells[i], width[i]);
    }
    return out + "\n";
  };
  std::string out = line(table.headers);
  for (const auto& row : table.rows) out += line(row);
  return out;
}

std::string markdown_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|' || c == '\\' || c == '`' || c == '*' || c == '_' || c == '<' || c == '>')
      out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

std::string render_markdown(const Table& table) {
  auto row = [](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (const std::string& cell : cells) out += " " + markdown_escape(cell) + " |";
    return out + "\n";
  };
  std::string out = row(table.headers) + "|";
  for (size_t i = 0; i < table.headers.size(); ++i) out += " --- |";
  out += "\n";
  for (const auto& cells : table.rows) out += row(cells);
  return out;
}

std::string render_html(const Table& table) {
  std::string out = "<table>\n<tr>";
  for (const std::string& h : table.headers) out += "<th>" + html_escape(h) + "</th>";
  out += "</tr>\n";
  for (const auto& cells : table.rows) {
    out += "<tr>";
    for (const std::string& cell : cells) {
      const bool bad = cell == "FAIL" || cell == "XPASS";
      out += (bad ? "<td class=\"bad\">" : "<td>") + html_escape(cell) + "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

std::string expectation_text(const CaseResult& c) {
  if (c.expected.outcome == Outcome::kPass) return "pass";
  return fmt::format("{} ({})", outcome_name(c.expected.outcome), c.expected.reason);
}

// Why a case is unexpected, one line.
std::string unexpected_reason(const CaseResult& c) {
  if (c.verdict == Verdict::kXpass)
    return fmt::format("unexpected pass: expected {}", expectation_text(c));
  if (c.expected.outcome != Outcome::kPass) {
    return fmt::format("expected {}, got {}: {}", expectation_text(c), outcome_name(c.outcome),
                       c.reason);
  }
  return fmt::format("{}: {}", outcome_name(c.outcome), c.reason);
}

// Every line of `text` prefixed, ending in '\n'.
std::string indent(const std::string& text, const std::string& prefix) {
  std::string out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += prefix + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

// Failures, then each output's comparison, then the notes: the body of a case in the reports.
std::string case_text(const CaseResult& c) {
  std::string out;
  for (const std::string& failure : c.failures) out += "FAIL: " + failure + "\n";
  for (const OutputReport& o : c.outputs)
    out += fmt::format("output '{}' vs {}: {}\n", o.name, o.reference, o.message);
  for (const std::string& line : c.details) out += line + "\n";
  return out;
}

bool has_suffix(const std::string& path, std::initializer_list<std::string_view> suffixes) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (std::string_view s : suffixes) {
    if (lower.size() >= s.size() && lower.compare(lower.size() - s.size(), s.size(), s) == 0)
      return true;
  }
  return false;
}

}  // namespace

std::string summary_line(const SuiteResult& result) {
  return fmt::format(
      "{} on {}: {} cases in {:.1f} s: {} passed, {} expected failure{}, {} failed, {} unexpected "
      "pass{}",
      result.name, result.backend, result.cases.size(), result.seconds,
      result.count(Verdict::kPass), result.count(Verdict::kXfail),
      result.count(Verdict::kXfail) == 1 ? "" : "s", result.count(Verdict::kFail),
      result.count(Verdict::kXpass), result.count(Verdict::kXpass) == 1 ? "" : "es");
}

std::string format_summary(const SuiteResult& result) {
  std::string out = render_text(summary_table(result)) + "\n" + summary_line(result) + "\n";
  if (result.unexpected() == 0) return out;
  out += "\nunexpected:\n";
  for (const CaseResult& c : result.cases) {
    if (!is_unexpected(c.verdict)) continue;
    out += fmt::format("  {} {} on {} ({}){}\n", verdict_name(c.verdict), c.name, result.backend,
                       outcome_name(c.outcome),
                       c.op_types.empty() ? "" : fmt::format(" [{}]", fmt::join(c.op_types, ", ")));
    if (c.verdict == Verdict::kXpass || c.expected.outcome != Outcome::kPass) {
      out += "    " + unexpected_reason(c) + "\n";
    }
    for (const std::string& failure : c.failures) out += indent(failure, "    ");
  }
  return out;
}

std::string markdown_report(const SuiteResult& result) {
  std::string out = fmt::format("# kiln test-suite: {}\n\n", markdown_escape(result.name));
  out += fmt::format("Suite `{}`, backend `{}`, {} thread(s) per job.\n\n**{}**\n\n", result.source,
                     result.backend, result.threads_per_job, markdown_escape(summary_line(result)));
  out += render_markdown(summary_table(result));
  out += "\n## Cases\n";
  for (const CaseResult& c : result.cases) {
    out += fmt::format("\n### {} {}\n\n", verdict_name(c.verdict), markdown_escape(c.name));
    out +=
        fmt::format("- model: `{}`\n- outcome: {} (expected {})\n- time: {:.2f} s\n", c.model_path,
                    outcome_name(c.outcome), markdown_escape(expectation_text(c)), c.seconds);
    if (is_unexpected(c.verdict))
      out += fmt::format("- **{}**\n", markdown_escape(unexpected_reason(c)));
    if (c.bound_vs_dynamic)
      out +=
          fmt::format("- bound vs dynamic: max abs difference {}\n", figure(*c.bound_vs_dynamic));
    if (c.batch_invariance)
      out +=
          fmt::format("- batch invariance: max abs difference {}\n", figure(*c.batch_invariance));
    if (!c.outputs.empty()) out += "\n" + render_markdown(output_table(c));
    if (const std::string text = case_text(c); !text.empty()) out += "\n```\n" + text + "```\n";
  }
  return out;
}

std::string html_report(const SuiteResult& result) {
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kiln test-suite: " +
      html_escape(result.name) +
      "</"
      "title>\n<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px "
      "solid #ccc;"
      "padding:2px "
      "6px}.bad{background:#fcc;font-weight:bold}pre{background:#f4f4f4;padding:6px}</style></head>"
      "<body>\n";
  out += "<h1>kiln test-suite: " + html_escape(result.name) + "</h1>\n";
  out += fmt::format(
      "<p>Suite <code>{}</code>, backend <code>{}</code>, {} thread(s) per "
      "job.</p>\n<p><b>{}</b></p>\n",
      html_escape(result.source), html_escape(result.backend), result.threads_per_job,
      html_escape(summary_line(result)));
  out += render_html(summary_table(result));
  out += "<h2>Cases</h2>\n";
  for (const CaseResult& c : result.cases) {
    out += fmt::format("<h3{}>{} {}</h3>\n<ul>", is_unexpected(c.verdict) ? " class=\"bad\"" : "",
                       verdict_name(c.verdict), html_escape(c.name));
    out += fmt::format(
        "<li>model: <code>{}</code></li><li>outcome: {} (expected {})</li><li>time: {:.2f} s</li>",
        html_escape(c.model_path), outcome_name(c.outcome), html_escape(expectation_text(c)),
        c.seconds);
    if (is_unexpected(c.verdict))
      out += "<li class=\"bad\">" + html_escape(unexpected_reason(c)) + "</li>";
    if (c.bound_vs_dynamic)
      out += "<li>bound vs dynamic: max abs difference " + figure(*c.bound_vs_dynamic) + "</li>";
    if (c.batch_invariance)
      out += "<li>batch invariance: max abs difference " + figure(*c.batch_invariance) + "</li>";
    out += "</ul>\n";
    if (!c.outputs.empty()) out += render_html(output_table(c));
    if (const std::string text = case_text(c); !text.empty())
      out += "<pre>" + html_escape(text) + "</pre>\n";
  }
  return out + "</body></html>\n";
}

Status check_report_path(const std::string& path) {
  if (has_suffix(path, {".md", ".markdown", ".html", ".htm"})) return ok_status();
  return invalid_argument("report '{}': the extension must be .md or .html", path);
}

Status write_report(const std::string& path, const SuiteResult& result) {
  KILN_RETURN_IF_ERROR(check_report_path(path));
  if (has_suffix(path, {".md", ".markdown"}))
    return write_file_atomically(path, markdown_report(result));
  return write_file_atomically(path, html_report(result));
}

}  // namespace kiln::suite
