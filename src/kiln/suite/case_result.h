// The record of one test-suite case: which model, variant and sizes, what happened, the error
// figures per output, and the verdict against the manifest's expectation. Reports (summary
// table, JUnit, Markdown/HTML) are rendered from these.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/suite/outcome.h"
#include "kiln/tooling/comparator.h"

namespace kiln::suite {

// One output of one case against its reference.
struct OutputReport {
  std::string name;
  std::string reference;  // where the reference came from: "file '...'", "onnxruntime", ...
  Tolerance tolerance;
  std::optional<CompareResult> compare;  // set when the comparison ran
  std::string message;                   // format_compare_result, or why it could not compare
  bool passed = false;
};

struct CaseResult {
  std::string model;     // model name from the manifest (or the case folder)
  std::string data_set;  // backend layout: "test_data_set_0" when the model has several; else ""
  std::string variant;   // "dynamic", "bound", "static", or "" for a model-level failure
  std::string sizes;     // "N=3" or "N=3,H=5"; "" when nothing is symbolic
  std::string name;      // model[/data_set][/variant][/sizes]: what --filter matches
  std::string model_path;
  // The ONNX op types the model uses, sorted (empty when it did not import): failure reports name
  // them, so a broken kernel shows as its op.
  std::vector<std::string> op_types;

  Outcome outcome = Outcome::kPass;
  std::string reason;  // the first failure, one line; empty on pass
  Expectation expected;
  Verdict verdict = Verdict::kPass;

  std::vector<OutputReport> outputs;
  std::vector<std::string> failures;       // every failure in full (the first gave `reason`)
  std::vector<std::string> details;        // checks that held, and notes
  std::optional<double> bound_vs_dynamic;  // bound case: max |bound - dynamic| (0: bitwise equal)
  std::optional<double> batch_invariance;  // dynamic case: max |sample i of batch - alone|
  double seconds = 0;

  // Over outputs that were compared; 0 when none.
  double max_abs_error() const;
  double max_rel_error() const;
  int64_t nan_count() const;  // NaN in kiln's outputs
  int64_t inf_count() const;  // Inf in kiln's outputs
};

// "model[/data_set][/variant][/sizes]".
std::string case_name(const std::string& model, const std::string& data_set,
                      const std::string& variant, const std::string& sizes);

}  // namespace kiln::suite
