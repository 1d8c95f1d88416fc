// The ONNX backend-test / model-zoo folder layout, run without a manifest:
//   CASE/model.onnx
//   CASE/test_data_set_0/input_0.pb, input_1.pb, ..., output_0.pb, ...   (TensorProto files)
//   CASE/test_data_set_1/...
// Inputs map to the model's runtime inputs and outputs to its outputs by position. A suite folder
// is either one such CASE or a folder of them (like /usr/share/libonnx-testdata/data/node).
// Tolerances default to the ONNX backend test runner's (rtol 1e-3, atol 1e-7); every case is
// expected to pass.
#pragma once

#include <string>

#include "kiln/base/status.h"
#include "kiln/suite/manifest.h"

namespace kiln::suite {

// The ONNX backend test runner's default tolerance: atol 1e-7, rtol 1e-3, and NaN in the expected
// output matched by NaN (the runner's numpy assert_allclose has equal_nan=True; NaN or Inf where
// the expected value is finite still fails).
ToleranceSpec backend_test_tolerance();

// True when `dir` holds a model.onnx.
bool is_backend_case_dir(const std::string& dir);

// One CASE folder as a model. Errors (not found / invalid argument, naming the folder and
// `json_path` when given): no model.onnx, no test_data_set_N folder, a data set with no
// input_K.pb or with gaps in its numbering.
StatusOr<ModelSpec> model_from_case_dir(const std::string& dir, const std::string& json_path = "");

// A suite from a folder: a CASE itself, or every CASE directly inside it (sorted by name).
// Sub-folders without model.onnx are ignored; a folder with no CASE at all is an error. A CASE
// that cannot be read becomes a model with `setup_error` set, so it does not stop the others.
StatusOr<Manifest> load_suite_folder(const std::string& dir);

}  // namespace kiln::suite
