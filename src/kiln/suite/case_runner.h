// Runs the cases of one model: import once, compile the dynamic module once, then for each set
// of sizes (or data set) run
//   dynamic (or static): the dynamic module at these sizes; every output against its reference
//            with the strict comparator (so NaN/Inf fail unless the reference has them at the
//            same places and the tolerance says "nan": "match"); batch invariance when a batch
//            symbol is > 1: sample i of the batch vs sample i run alone (reported, and a failure
//            when the manifest says "enforce");
//   bound:   the model compiled with every symbol bound to these sizes (CompileOptions::bind);
//            every output against the reference, and bit for bit against the dynamic run.
// On a device whose outputs are placeholders (RunContext::compare_results false, the null device)
// both only check that the module compiles, binds and runs, or is refused cleanly.
// Every failure is recorded in the case, never returned: one broken model yields failed cases,
// and the suite goes on with the next.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/base/tensor.h"
#include "kiln/hal/registry.h"
#include "kiln/suite/case_result.h"
#include "kiln/suite/manifest.h"
#include "kiln/suite/ort_reference.h"

namespace kiln::suite {

struct RunContext {
  // The device to run on (a registered one, or "reference" for the float64 evaluator) and the
  // key of the expectations. Modules are compiled for the cpu target, which every registered
  // device runs.
  std::string backend = "cpu";
  // False for a device whose outputs are placeholders (hal::DeviceResults): a case passes when
  // it compiles and runs cleanly, and its outputs are not compared.
  bool compare_results = true;
  int threads = 1;  // threads for each run (the suite gives each parallel job its share)
  OrtRunner ort;
  hal::DeviceDecorator decorate_device = {};  // wraps every device created (optional)
  // Which cases to run, by CaseResult::name; null runs all.
  std::function<bool(const std::string& case_name)> selected;
  // Test seam for the suite's own tests: sees every case's outputs (variant run, before any
  // check) and may change them, to plant a regression in one variant only. Null in normal use.
  std::function<void(const std::string& case_name, std::vector<Tensor>& outputs)> tamper;
  // Called when a case starts and when it is finished (from the thread running the model).
  std::function<void(const std::string& case_name)> on_start;
  std::function<void(const CaseResult& result)> on_done;
};

std::vector<CaseResult> run_model(const ModelSpec& spec, const RunContext& context);

}  // namespace kiln::suite
