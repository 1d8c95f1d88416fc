#include <cstdlib>
#include <filesystem>

#include "commands.h"
#include "flags.h"
#include "kiln/suite/backend_layout.h"
#include "kiln/suite/junit.h"
#include "kiln/suite/manifest.h"
#include "kiln/suite/progress.h"
#include "kiln/suite/report.h"
#include "kiln/suite/suite_runner.h"
#include "kiln/triage/fault_device.h"

#ifndef KILN_DEFAULT_ORT_RUNNER
#define KILN_DEFAULT_ORT_RUNNER ""
#endif

namespace kiln::cli {
namespace {

struct TestSuiteFlags {
  std::string suite;
  std::string backend = "cpu";
  int jobs = 1;
  int threads = 0;
  std::vector<std::string> filters;
  std::vector<std::string> exclusions;
  std::string junit;
  std::string report;
  std::string model_dir;
  std::string cache_dir;
  std::string ort_runner;
  std::string progress = "auto";
};

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

int run_test_suite(const TestSuiteFlags& flags) {
  std::error_code ec;
  StatusOr<suite::Manifest> manifest =
      std::filesystem::is_directory(flags.suite, ec)
          ? suite::load_suite_folder(flags.suite)
          : suite::load_manifest(
                flags.suite,
                {flags.model_dir.empty() ? env_or("KILN_MODEL_DIR", "") : flags.model_dir});
  if (!manifest.ok()) return report_error("test-suite", manifest.status());
  if (!flags.report.empty()) {
    // Checked before the run so a typo does not cost one.
    Status format = suite::check_report_path(flags.report);
    if (!format.ok()) return report_error("test-suite", format);
  }
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string&>{"--junit", flags.junit},
        {"--report", flags.report}}) {
    if (Status checked = check_output_flag(flag, path); !checked.ok()) {
      return report_error("test-suite", checked);
    }
  }

  suite::Progress::Style style = suite::Progress::style_for(stderr);
  if (flags.progress == "bar") style = suite::Progress::Style::kBar;
  if (flags.progress == "lines") style = suite::Progress::Style::kLines;
  if (flags.progress == "none") style = suite::Progress::Style::kQuiet;
  suite::Progress progress(stderr, style);

  suite::SuiteOptions options;
  options.backend = flags.backend;
  options.jobs = flags.jobs;
  options.threads = flags.threads;
  options.filter = suite::CaseFilter(flags.filters, flags.exclusions);
  options.ort.script = flags.ort_runner.empty() ? env_or("KILN_ORT_RUNNER", KILN_DEFAULT_ORT_RUNNER)
                                                : flags.ort_runner;
  options.ort.cache_dir = flags.cache_dir;
  options.progress = &progress;
  auto fault = triage::fault_from_environment();
  if (!fault.ok()) return report_error("test-suite", fault.status());
  options.decorate_device = triage::fault_decorator(std::move(fault).value());
  auto result = suite::run_suite(*manifest, options);
  if (!result.ok()) return report_error("test-suite", result.status());

  std::fputs(suite::format_summary(*result).c_str(), stdout);
  std::fflush(stdout);
  if (!flags.junit.empty()) {
    Status written = suite::write_junit(flags.junit, *result);
    if (!written.ok())
      return report_error("test-suite", std::move(written).with_note("writing --junit"));
  }
  if (!flags.report.empty()) {
    Status written = suite::write_report(flags.report, *result);
    if (!written.ok())
      return report_error("test-suite", std::move(written).with_note("writing --report"));
  }
  return result->unexpected() > 0 ? kExitMismatch : kExitOk;
}

}  // namespace

Command add_test_suite_command(CLI::App& app) {
  auto flags = std::make_shared<TestSuiteFlags>();
  CLI::App* sub =
      app.add_subcommand("test-suite",
                         "run a model test suite: a manifest (.json, docs/test-suite.md) or a "
                         "folder in the ONNX backend test layout");
  sub->add_option("suite", flags->suite,
                  "manifest file, or folder (model.onnx + test_data_set_N, or folders of them)")
      ->required();
  sub->add_option(
      "--backend", flags->backend,
      "device to run on (cpu, null, any registered one; a device whose outputs are placeholders "
      "only has to run or refuse each case cleanly), or `reference` for the float64 reference "
      "evaluator without compiling; picks the manifest's expectations");
  sub->add_option("-j,--jobs", flags->jobs,
                  "models to run in parallel (each gets threads/jobs threads)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--threads", flags->threads, "threads in total; 0: all cores")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--filter", flags->filters,
                  "run only cases whose name (model/variant/size) contains this, or matches it as "
                  "a glob (repeatable)");
  sub->add_option("--exclude", flags->exclusions,
                  "leave out cases whose name contains this, or matches it as a glob "
                  "(repeatable; after --filter)");
  sub->add_option("--junit", flags->junit, "write JUnit XML here");
  sub->add_option("--report", flags->report, "write a per-case report here (.md or .html)");
  sub->add_option(
      "--model-dir", flags->model_dir,
      "base folder of a manifest with \"root\": \"model-dir\" (default: $KILN_MODEL_DIR)");
  sub->add_option("--cache-dir", flags->cache_dir,
                  "where ONNX Runtime references are cached (default: <suite>/.kiln-cache)");
  sub->add_option("--ort-runner", flags->ort_runner,
                  "tools/ort/run_ort.js, for \"reference\": \"onnxruntime\" (default: "
                  "$KILN_ORT_RUNNER or the source tree's)");
  sub->add_option("--progress", flags->progress, "progress display: auto, bar, lines, none")
      ->check(CLI::IsMember({"auto", "bar", "lines", "none"}));
  return {sub, [flags] { return run_test_suite(*flags); }};
}

}  // namespace kiln::cli
