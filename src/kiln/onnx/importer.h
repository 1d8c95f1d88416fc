// ONNX → IR import. This folder is the only code in kiln that includes protobuf or libonnx
// headers; everything above it sees ir::Graph only.
//
// What import does, in order:
//   1. parses the ModelProto (refusing files larger than max_model_bytes, and any over 2 GiB,
//      before parsing);
//   2. rejects operators from non-default domains (ai.onnx.ml, com.microsoft, ...), listing each
//      domain with its nodes; domains only declared in opset_import and never used are ignored.
//      The one exception is ai.onnx.preview.training version 1 for its optimizers Adagrad, Adam
//      and Momentum (kernels/training.cc); a model of those alone need not declare the default
//      domain;
//   3. rejects every op type the registry (graph_eval::default_registry()) lacks in ONE error that
//   lists
//      each with its node names;
//   4. upgrades the default-domain opset to target_opset with ONNX's version converter (only
//      upgrades; a model above target_opset is an error naming both versions);
//   5. converts inputs, initializers and nodes (Constant nodes become constants) and runs
//      graph_eval::infer_graph, so every value has a dtype and a symbolic shape; declared output
//      dtypes/ranks are checked against inference.
//
// Input dims: dim_value → integer; dim_param → DimExpr::symbol(dim_param); a dim with neither
// (or a negative dim_value, which some exporters write for "dynamic") → a fresh symbol
// "unk_<input>_<axis>" unique in the graph. `bind` then replaces symbols by values.
//
// Element types: f32, f64, i64, i32, i8, u8, bool. Others (f16, bf16, string, complex, u16, ...)
// are Unimplemented naming the input, initializer or node.
//
// External data (TensorProto.data_location = EXTERNAL, keys `location`, `offset`, `length`) is
// read only from files inside the model's directory: absolute paths, `..` components and paths
// that resolve (following symlinks) outside that directory are refused, as are ranges beyond
// the file. Every error names the tensor and the path.
//
// Errors: kNotFound (file missing), kOutOfRange (too large), kDataLoss (truncated/corrupt
// protobuf), kInvalidArgument (malformed model), kUnimplemented (valid ONNX kiln does not
// support). No exception escapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "kiln/base/status.h"
#include "kiln/ir/graph.h"

namespace kiln::onnx_import {

struct ImportOptions {
  // Upgrade the default-domain opset to this with ONNX's version converter. A model already at
  // it is untouched; a model above it is an error naming both.
  int64_t target_opset = 17;
  // Initializers also listed in graph.input (MXNet exporter style) stay runtime inputs instead
  // of constants; their initializer data is dropped.
  bool weights_as_inputs = false;
  // Fix named symbolic dims (dim_param, or the generated "unk_<input>_<axis>") to values at
  // import. Naming a symbol that no graph input uses, or a negative value, is an error.
  std::map<std::string, int64_t> bind;
  // Values for graph inputs that an op needs at compile time
  // (graph_eval::OpDef::compile_time_inputs: Reshape's shape, a reduction's axes, ...), e.g. from a
  // test's data when a model feeds them as graph inputs. Called once per such input with its
  // position among the runtime inputs (ONNX graph.input minus initializers) and its name; a tensor
  // makes the input a constant (its dtype, rank and constant dims must match the declaration),
  // nullopt leaves it an input.
  std::function<StatusOr<std::optional<Tensor>>(size_t position, const std::string& name)>
      compile_time_value;
  // Leave external data in its files instead of reading it in, and with it the big raw_data of an
  // imported file (which import_file turns into references to the file itself): each such
  // constant maps its file and reads it in place (Tensor::borrow_from_file), so the weights are
  // never copied into memory unless something asks for them aligned (Tensor::data). For a caller
  // that writes them out at once (`kiln compile`): module::write_module checks that the files did
  // not change meanwhile (Tensor::source_unchanged); any other reader must check the same.
  bool weights_by_reference = false;
  // Refuse larger files before parsing (protobuf itself cannot exceed 2 GiB).
  uint64_t max_model_bytes = 2ull << 30;
};

// Imports the model at `path`; external data is resolved relative to the file's directory.
StatusOr<ir::Graph> import_file(const std::string& path, const ImportOptions& options = {});

// Imports a serialized ModelProto held in memory (not retained after return). `model_dir` is
// the directory external data is read from; empty means external data is refused.
StatusOr<ir::Graph> import_bytes(const void* data, size_t size, const std::string& model_dir,
                                 const ImportOptions& options = {});

}  // namespace kiln::onnx_import
