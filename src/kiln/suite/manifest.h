// The test-suite manifest (docs/test-suite.md): which models to run, their inputs (files or
// seeded generators), where reference outputs come from (files, ONNX Runtime, kiln's float64
// reference evaluator), tolerances, the sizes to run each symbolic dim at, and the outcome
// expected on each backend.
//
// load_manifest reads a JSON file strictly: an unknown key, a value of the wrong type, a
// tolerance out of range, a missing model or data file is an error (invalid argument or not
// found) naming the JSON path ("$.models[1].inputs.data.file") and the manifest file.
// Paths are resolved when loading: relative ones against the manifest's folder, or against the
// model directory for a manifest with "root": "model-dir".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/base/status.h"
#include "kiln/shape/shape.h"
#include "kiln/suite/outcome.h"
#include "kiln/tooling/comparator.h"

namespace kiln::suite {

// A tolerance whose unset fields inherit from the enclosing level (output → model → defaults →
// built-in atol 1e-5, rtol 1e-5, NaN fails).
struct ToleranceSpec {
  std::optional<double> atol;     // >= 0, finite
  std::optional<double> rtol;     // in [0, 1)
  std::optional<bool> nan_match;  // "nan": "match" (true) or "fail" (false)

  // This spec's fields, falling back to `outer`'s where unset.
  ToleranceSpec over(const ToleranceSpec& outer) const;
  // The comparator tolerance, built-in defaults for unset fields.
  Tolerance resolve() const;
};

struct Generator {
  enum class Distribution { kUniform, kNormal };
  Distribution distribution = Distribution::kUniform;
  uint64_t seed = 0;
  double low = -1, high = 1;    // uniform: [low, high) for floats, [low, high] for integers
  double mean = 0, stddev = 1;  // normal
};

// How an input gets its values. `file` may contain {SYMBOL} placeholders replaced by the size
// the case binds (e.g. "input_b{N}.bin").
struct InputSpec {
  std::string name;
  std::string file;                   // resolved path template; empty when generated
  std::optional<Generator> generate;  // set when there is no file
  std::optional<DType> dtype;         // default: the model input's dtype
  std::optional<Shape> shape;         // ints and symbol names; default: the model input's
  std::string json_path;              // for errors found at run time
};

// Where an output's reference comes from: a file (path template like InputSpec::file), or, when
// `file` is empty, the model's `reference` source.
struct OutputSpec {
  std::string name;
  std::string file;
  std::optional<DType> dtype;
  std::optional<Shape> shape;
  ToleranceSpec tolerance;  // output-level fields only
  std::string json_path;
};

// One test data set in the ONNX backend-test layout: input_K.pb / output_K.pb, by position.
struct DataSet {
  std::string name;  // "test_data_set_0"
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

enum class ReferenceSource { kOnnxRuntime, kKilnReference };
enum class BatchInvariance { kOff, kReport, kEnforce };

struct ModelSpec {
  std::string name;
  std::string path;       // resolved model file (.onnx or .kir)
  std::string json_path;  // "$.models[3]", or the folder for the backend layout

  std::vector<InputSpec> inputs;    // named inputs; model inputs not named here are generated
                                    // with the default Generator
  std::vector<OutputSpec> outputs;  // named outputs; others use `reference`
  std::vector<DataSet> data_sets;   // backend layout: when not empty, inputs/outputs are unused
  ReferenceSource reference = ReferenceSource::kOnnxRuntime;

  // Sizes per symbol, from the model entry (`dims`) and from the suite defaults. A symbol in
  // neither runs at 1 and 3.
  std::map<std::string, std::vector<int64_t>> dims;
  std::map<std::string, std::vector<int64_t>> default_dims;

  ToleranceSpec tolerance;               // model level over suite defaults
  std::optional<std::string> batch_dim;  // the symbol to split for batch invariance; auto if unset
  BatchInvariance batch_invariance = BatchInvariance::kReport;
  // By backend: entries tried in order, the first whose `cases` matches a case's name applies;
  // no backend entry, or no match: pass.
  std::map<std::string, std::vector<Expectation>> expect;
  // Set when the folder layout could not be read (a suite folder with one broken case); the
  // runner reports the model as one case with outcome "error" and goes on with the rest.
  std::string setup_error;

  // The expectation for the case named `case_name` on `backend` (pass when no entry matches).
  Expectation expectation(const std::string& backend, std::string_view case_name) const;
  // The tolerance for output `name`: its own fields over the model's.
  Tolerance tolerance_for(const std::string& output) const;
  // Sizes a symbol runs at: dims, else default_dims, else {1, 3}.
  std::vector<int64_t> sizes_of(const std::string& symbol) const;
};

struct Manifest {
  std::string name;       // "suite" key, or the file / folder name
  std::string source;     // the manifest file or suite folder
  std::string suite_dir;  // folder of the manifest (or the suite folder): default cache location
  std::vector<ModelSpec> models;
};

struct ManifestOptions {
  // Base for relative paths of a "root": "model-dir" manifest (and of any manifest when set);
  // empty: $KILN_MODEL_DIR for such manifests.
  std::string model_dir;
};

StatusOr<Manifest> load_manifest(const std::string& path, const ManifestOptions& options = {});

// The same from JSON text; `source` names it in errors and `manifest_dir` stands for its folder.
StatusOr<Manifest> parse_manifest(std::string_view text, const std::string& source,
                                  const std::string& manifest_dir,
                                  const ManifestOptions& options = {});

}  // namespace kiln::suite
