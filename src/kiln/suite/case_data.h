// What one test-suite case runs on and compares with: the model's interface (from the imported
// graph), the sizes each case binds, the input tensors (data-set files, manifest files or seeded
// generators) and the reference outputs (files, ONNX Runtime, or kiln's float64 reference
// evaluator graph_eval::evaluate_graph). Errors here are the suite's own (a missing file, a shape
// that does not fit the model) and name the manifest entry or file.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "kiln/base/host_value.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/ir/graph.h"
#include "kiln/suite/manifest.h"
#include "kiln/suite/ort_reference.h"

namespace kiln::suite {

struct Port {
  std::string name;
  DType dtype = DType::kF32;  // a sequence's or optional's: its tensors'
  Shape shape;                // empty for a sequence or optional
  ValueForm form = ValueForm::kTensor;
};

// The runtime inputs and the outputs of an imported model.
struct ModelIo {
  std::vector<Port> inputs;
  std::vector<Port> outputs;
  std::vector<std::string> symbols;  // of the inputs' dims, in order of first appearance

  // Whether an input or output is a sequence or an optional (run with host values).
  bool has_non_tensor() const;
};

ModelIo model_io(const ir::Graph& graph);

// Checks the manifest entry against the model: every named input and output exists, `dims` and
// `batch_dim` name symbols of its inputs, data sets have one file per input. Errors name the
// JSON path and list what the model has.
Status check_spec_against_model(const ModelSpec& spec, const ModelIo& io);

// Every combination of the sizes each symbol runs at (ModelSpec::sizes_of), the first symbol
// varying slowest; one empty binding for a static model.
std::vector<Bindings> size_combinations(const ModelSpec& spec, const ModelIo& io);

// The inputs of a backend-layout data set (input_K.pb for input K) and the sizes they bind.
// Error when a file cannot be read, when a dtype or static dim differs from the model's, or when
// one symbol would take two sizes.
StatusOr<std::vector<NamedTensor>> data_set_inputs(const DataSet& set, const ModelIo& io,
                                                   Bindings& sizes);

// data_set_inputs for a model with sequence or optional ports: each file read as the value its
// port takes (onnx_import::read_value_proto_file), tensors checked and binding sizes as there.
StatusOr<std::vector<HostValue>> data_set_values(const DataSet& set, const ModelIo& io,
                                                 Bindings& sizes);
// The data set's expected outputs (output_K.pb), each read as the value its port gives.
StatusOr<std::vector<HostValue>> data_set_outputs(const DataSet& set, const ModelIo& io);

// The inputs at `sizes` from the manifest: files (with {SYMBOL} expanded) or generators; inputs
// the manifest does not name are generated with the default generator. Error when a file's dtype
// or shape differs from what the model takes at these sizes.
StatusOr<std::vector<NamedTensor>> manifest_inputs(const ModelSpec& spec, const ModelIo& io,
                                                   const Bindings& sizes);

struct References {
  std::vector<Tensor> outputs;       // in ModelIo::outputs order
  std::vector<std::string> sources;  // per output: "file '...'", "onnxruntime", "kiln-reference"
};

// The reference outputs for one case. `graph` is the imported model (for kiln-reference); `set`
// is the data set for the backend layout, else null.
StatusOr<References> reference_outputs(const ModelSpec& spec, const ModelIo& io,
                                       const ir::Graph& graph, const DataSet* set,
                                       const Bindings& sizes, std::span<const NamedTensor> inputs,
                                       const OrtRunner& ort);

// "N=3,H=5" ("" for no symbols), in `symbols` order.
std::string format_sizes(const Bindings& sizes, const std::vector<std::string>& symbols);

}  // namespace kiln::suite
