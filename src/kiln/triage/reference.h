// The other side of a triage comparison: every tensor a reference computation produced, by value
// name (the ONNX value names of the model's own nodes). Three references:
//   - kiln's float64 reference evaluator (graph_eval::evaluate_graph) on the unoptimized imported
//   IR,
//     which yields every ONNX node output;
//   - ONNX Runtime (CPU EP, through tools/ort/run_ort.js and node) on a copy of the model with
//     the wanted intermediates exposed as graph outputs;
//   - another kiln module (e.g. the static-batch build of the same model), observed dispatch by
//     dispatch.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/session.h"

namespace kiln::triage {

struct ReferenceValues {
  std::string
      description;  // "the float64 reference evaluator", "ONNX Runtime (CPU)", "module 'x.kmod'"
  std::map<std::string, Tensor> values;
  double elapsed_ms = 0;  // wall time of the reference computation
};

// Evaluates `graph` (inputs in graph.inputs() order) keeping every value, graph inputs included.
StatusOr<ReferenceValues> evaluate_reference(const ir::Graph& graph,
                                             std::span<const Tensor> inputs);

struct OrtOptions {
  std::string node = "node";  // the node.js binary
  std::string runner;         // tools/ort/run_ort.js
  std::string work_dir;       // where the model copy, inputs and outputs go (created)
  int threads = 0;            // 0: run_ort.js's default
};

// The run_ort.js next to kiln's sources: $KILN_ORT_RUNNER when set, else the path compiled in.
std::string default_ort_runner();

// Runs `model_path` in ONNX Runtime on `inputs` (graph.inputs() order; `graph` is its import),
// with every name in `wanted` added as a graph output. options.work_dir is removed afterwards.
// Errors: the runner or node missing, ORT failing (its message quoted), an output file missing or
// of the wrong size.
StatusOr<ReferenceValues> run_onnxruntime(const std::string& model_path, const ir::Graph& graph,
                                          std::span<const Tensor> inputs,
                                          std::span<const std::string> wanted,
                                          const OrtOptions& options);

// Runs `session`'s module on `inputs`, keeping every dispatch output and the inputs by value name.
StatusOr<ReferenceValues> run_module_reference(runtime::Session& session,
                                               std::span<const Tensor> inputs,
                                               const std::string& description);

}  // namespace kiln::triage
