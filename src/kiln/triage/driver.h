// `kiln triage` as a library call: import the model, compile it, check every input and the
// --against module before any work, run the reference and the module, compare layer by layer,
// and write the repro and the reports.
#pragma once

#include <functional>
#include <string_view>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/tooling/input_args.h"
#include "kiln/triage/reference.h"
#include "kiln/triage/repro.h"
#include "kiln/triage/triage.h"

namespace kiln::triage {

struct TriageRequest {
  std::string model;  // .onnx (or .kir; --against=onnxruntime needs .onnx)
  std::vector<Tensor> inputs;
  // Or `--input` arguments, each positional or naming its input (NAME=SPEC): put in the order of
  // the model's inputs once it is compiled, and used instead of `inputs`.
  std::vector<InputArg> input_args;
  // "reference" (float64 evaluator), "onnxruntime", a registered device that computes results
  // ("cpu": the same module on that device, with no fault planted, to tell the device under test
  // from a trusted one), or the path of another module (.kmod).
  std::string against = "reference";
  std::map<std::string, int64_t, std::less<>> bind;  // applied to the module under test
  TriageOptions options;
  // report.html, repro/, (onnxruntime/); empty: a new kiln-triage-XXXXXX in the temporary folder
  // ($TMPDIR, else /tmp), created once the request has been checked.
  std::string output_dir;
  std::string kiln = "kiln";  // how the repro command names the kiln binary
  OrtOptions ort;             // runner and node; work_dir defaults to output_dir
  // Called as each step starts ("importing the model", "compiling", ...), for a progress line;
  // may be empty.
  std::function<void(std::string_view step)> progress;
};

struct TriageOutcome {
  TriageResult result;
  std::optional<ReproFiles> repro;
  std::string text;        // the summary for stdout
  std::string output_dir;  // where the reports went (request.output_dir, or the folder made)
  std::string html_path;   // the report written
  nlohmann::json json;
  std::map<std::string, double> timings_ms;
};

// Errors (all before any run when they concern the request): an unknown --against, a model or
// module that cannot be loaded, a module built from another model, inputs that do not fit the
// model; then run, export and file system errors.
StatusOr<TriageOutcome> run_triage(const TriageRequest& request);

}  // namespace kiln::triage
