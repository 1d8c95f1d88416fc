// What `kiln test-suite` prints and writes about a finished suite:
//   - the summary table (model, variant, size, outcome, verdict, max abs/rel error, NaN/Inf, time)
//     and the list of unexpected cases with their reasons, as plain text for the terminal;
//   - a report with per-case details (each output's figures and reference, the bound-vs-dynamic
//     and batch-invariance checks, error text), as Markdown (.md) or HTML (.html);
//   - JUnit XML (junit.h).
#pragma once

#include <string>

#include "kiln/base/status.h"
#include "kiln/suite/suite_runner.h"

namespace kiln::suite {

// The headline, e.g. "kiln-models on cpu: 14 cases in 23.4 s: 13 passed, 1 expected failure,
// 0 failed, 0 unexpected passes".
std::string summary_line(const SuiteResult& result);

// Headline, table, and the unexpected cases with their reasons. Ends with '\n'.
std::string format_summary(const SuiteResult& result);

std::string markdown_report(const SuiteResult& result);
std::string html_report(const SuiteResult& result);

// Error (invalid argument, naming the path) unless the extension is .md, .markdown, .html or .htm.
Status check_report_path(const std::string& path);

// Writes markdown_report or html_report, chosen by the extension (.md, .markdown, .html, .htm),
// atomically. Error (invalid argument) for another extension, naming it.
Status write_report(const std::string& path, const SuiteResult& result);

}  // namespace kiln::suite
