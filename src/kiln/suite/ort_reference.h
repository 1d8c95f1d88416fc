// Reference outputs from ONNX Runtime (onnxruntime-node through tools/ort/run_ort.js), cached on
// disk so a suite runs ONNX Runtime once per model and input set, and later runs (or machines
// without node) use the cache.
//
// Cache layout: <cache_dir>/<model stem>-<16 hex digits>/<output>.bin + <output>.shape, exactly
// what `run_ort.js run --output-dir` writes; the hex digits are XXH64 of the model file's bytes
// and of every input's name, dtype, shape and data. Entries appear atomically (written to a
// temporary folder, then renamed), so parallel cases and interrupted runs never see half of one.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln::suite {

struct OrtRunner {
  std::string node = "node";  // the node executable, looked up on PATH
  std::string script;         // run_ort.js; empty when ONNX Runtime is not available
  std::string cache_dir;      // required
  int threads = 1;            // ONNX Runtime intra-op threads
};

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct OutputType {
  std::string name;
  DType dtype = DType::kF32;
};

// ONNX Runtime's outputs of the .onnx model at `model_path` for `inputs`, in `outputs` order.
// Errors (each naming the model): no cache entry and no usable runner (failed precondition,
// saying how to install it); node failing (its last lines of output); a cached or produced output
// missing or of the wrong size (data loss).
StatusOr<std::vector<Tensor>> onnxruntime_reference(const std::string& model_path,
                                                    std::span<const NamedTensor> inputs,
                                                    std::span<const OutputType> outputs,
                                                    const OrtRunner& runner);

// run_ort.js's file name for an output: characters outside [A-Za-z0-9._-] become '_'.
std::string ort_safe_name(const std::string& name);

}  // namespace kiln::suite
