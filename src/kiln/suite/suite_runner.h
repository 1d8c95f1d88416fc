// Runs a whole suite: every model of the manifest (or suite folder) whose cases the filter may
// select, `jobs` models at a time, each run with threads / jobs threads so parallel jobs do not
// oversubscribe the cores (oneDNN and kiln's kernels share one OpenMP runtime, whose team size is
// per calling thread). A model that fails in any way yields failed cases; the others still run.
#pragma once

#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/suite/case_filter.h"
#include "kiln/suite/case_result.h"
#include "kiln/suite/case_runner.h"
#include "kiln/suite/manifest.h"

namespace kiln::suite {

class Progress;

struct SuiteOptions {
  std::string backend = "cpu";
  int jobs = 1;     // models run in parallel (>= 1)
  int threads = 0;  // threads in total; 0: every core
  CaseFilter filter;
  OrtRunner ort;  // an empty cache_dir means <suite folder>/.kiln-cache
  // See RunContext::tamper (tests of the suite only).
  std::function<void(const std::string& case_name, std::vector<Tensor>& outputs)> tamper;
  Progress* progress = nullptr;  // may be null
  // Wraps every device the suite creates (optional): KILN_FAULT's fault injection.
  hal::DeviceDecorator decorate_device = {};
};

struct SuiteResult {
  std::string name;    // the manifest's suite name
  std::string source;  // manifest file or folder
  std::string backend;
  std::vector<CaseResult> cases;  // in manifest order, each model's cases in run order
  double seconds = 0;
  int threads_per_job = 1;

  int count(Verdict verdict) const;
  // FAIL + XPASS: non-zero means `kiln test-suite` exits 1.
  int unexpected() const { return count(Verdict::kFail) + count(Verdict::kXpass); }
};

// Errors only for options that make no sense (jobs < 1), and when the filter selects no case at
// all (so a mistyped filter cannot look like a green run).
StatusOr<SuiteResult> run_suite(const Manifest& manifest, const SuiteOptions& options);

}  // namespace kiln::suite
