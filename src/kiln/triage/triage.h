// The triage engine: runs a compiled module dispatch by dispatch, compares every dispatch output
// with the matching tensor of a reference (layers.h), finds the first dispatch whose output has
// NaN/Inf or exceeds its layer's tolerance, and decides whether that dispatch is itself at fault
// by running it alone on the reference's own inputs (isolate.h): if its isolated output still
// diverges it computes wrongly; if not, it was fed values that were already off.
//
// The reference is computed separately (reference.h) so that callers can reuse one reference
// across many triage runs of the same inputs (the fault-injection tests do).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/ir/graph.h"
#include "kiln/module/module.h"
#include "kiln/runtime/session.h"
#include "kiln/tooling/comparator.h"
#include "kiln/triage/fault_spec.h"
#include "kiln/triage/layers.h"
#include "kiln/triage/reference.h"
#include "kiln/triage/tensor_stats.h"

namespace kiln::triage {

struct TriageOptions {
  LayerTolerance tolerance;
  runtime::SessionOptions session;
  // A fault planted in every device triage creates (the module under test, the isolated re-run,
  // an --against module): fault_device.h. The repro's command carries it too.
  std::optional<FaultSpec> fault;
  // Keep comparing the layers after the first divergence (the report's error-per-layer chart
  // shows how the error spreads); false stops observing there, which is faster.
  bool compare_after_divergence = true;
};

// options.session with options.fault planted in its device (after any decorator it has).
runtime::SessionOptions session_options(const TriageOptions& options);

// One compared dispatch output.
struct LayerReport {
  int32_t dispatch = 0;
  std::string dispatch_name, op_type;
  std::vector<std::string> nodes;  // ONNX origins
  int32_t output = 0;              // which output of the dispatch
  std::string value;               // the reference name it was compared with
  ConcreteShape shape;
  bool compared = false;  // false when the reference has no such tensor
  std::string error;      // set when the tensors could not be compared (shape or dtype differ)
  Tolerance tolerance;
  CompareResult result;
  double expected_max_abs = 0;
  double elapsed_ms = 0;  // the dispatch's run time

  bool passed() const { return !compared || (error.empty() && result.passed()); }
  int64_t nonfinite() const { return result.actual_nan + result.actual_inf; }
};

struct Divergence {
  size_t layer = 0;  // index into TriageResult::layers
  int32_t dispatch = 0;
  bool at_fault = false;
  bool isolated_run = false;            // whether the dispatch could be re-run alone
  std::vector<CompareResult> isolated;  // per output, alone on the reference's inputs
  std::string explanation;              // one or two sentences for people
  std::vector<Tensor> actual;           // kiln's outputs of the dispatch in the full run
};

struct TriageResult {
  std::string reference;  // ReferenceValues::description
  Bindings bindings;
  std::vector<LayerReport> layers;  // in dispatch order
  std::optional<Divergence> first_divergence;
  std::vector<Tensor> outputs;  // kiln's graph outputs
  double kiln_ms = 0;           // the observed run, first-run preparation included
  double isolate_ms = 0;

  bool clean() const { return !first_divergence.has_value(); }
};

class Triage {
 public:
  // `graph` is the unoptimized import the module came from (may be null: reference names are
  // then the module's value names); both must outlive the Triage.
  Triage(std::shared_ptr<const module::ModuleContents> module, const ir::Graph* graph,
         TriageOptions options);

  const module::ModuleContents& module() const { return *module_; }
  // Reference name per module value (layers.h).
  const std::vector<std::string>& reference_names() const { return names_; }

  // Validates `inputs` against the module without running anything: the binding errors of
  // runtime::Session::bind (count, dtype, rank, dims).
  StatusOr<Bindings> check_inputs(std::span<const Tensor> inputs) const;

  // Runs the module on `inputs` (a fresh session, with options.fault planted) and compares with
  // `reference`. Errors: bad inputs, a failing run, a bad tolerance setting.
  StatusOr<TriageResult> run(std::span<const Tensor> inputs,
                             const ReferenceValues& reference) const;

 private:
  Status isolate(std::span<const Tensor> inputs, const ReferenceValues& reference,
                 TriageResult& result) const;

  std::shared_ptr<const module::ModuleContents> module_;
  const ir::Graph* graph_;
  TriageOptions options_;
  std::vector<std::string> names_;
};

}  // namespace kiln::triage
