#include "kiln/suite/case_data.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

#include "kiln/graph_eval/graph_eval.h"
#include "kiln/onnx/tensor_proto_file.h"
#include "kiln/suite/input_generator.h"
#include "kiln/suite/path_template.h"
#include "kiln/tooling/npy.h"
#include "kiln/tooling/tensor_spec.h"

namespace kiln::suite {
namespace {

bool has_extension(const std::string& path, std::string_view ext) {
  if (path.size() < ext.size()) return false;
  return std::equal(ext.begin(), ext.end(), path.end() - ext.size(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == b;
  });
}

std::string names_of(const std::vector<Port>& ports) {
  std::string out;
  for (const Port& port : ports) out += (out.empty() ? "" : ", ") + port.name;
  return out.empty() ? "none" : out;
}

// A tensor file in any format kiln reads: .npy and .pb carry their type; a raw file takes
// `dtype` and `shape`.
StatusOr<Tensor> read_any_tensor(const std::string& path, DType dtype, const ConcreteShape& shape) {
  if (has_extension(path, ".npy")) return read_npy_file(path);
  if (has_extension(path, ".pb")) {
    KILN_ASSIGN_OR_RETURN(onnx_import::TensorProtoFile file,
                          onnx_import::read_tensor_proto_file(path));
    return std::move(file.tensor);
  }
  return read_raw_tensor_file(path, dtype, shape);
}

// ONNX's numpy_helper (onnx <= 1.13, which wrote libonnx-testdata) stores bfloat16 tensors as
// UINT16 with the same bits: a backend-test file of u16 where the model has bf16 is read as bf16.
Tensor backend_test_dtype(Tensor tensor, DType declared) {
  if (declared == DType::kBF16 && tensor.dtype() == DType::kU16) {
    Tensor out = Tensor::create(DType::kBF16, tensor.shape()).value();
    if (tensor.byte_size() > 0) std::memcpy(out.mutable_data(), tensor.data(), tensor.byte_size());
    return out;
  }
  return tensor;
}

Status check_type(const Tensor& tensor, DType dtype, const ConcreteShape& shape,
                  std::string_view what) {
  if (tensor.dtype() != dtype || tensor.shape() != shape) {
    return invalid_argument("{} holds {}, but {} is needed", what,
                            format_tensor_type(tensor.dtype(), tensor.shape()),
                            format_tensor_type(dtype, shape));
  }
  return ok_status();
}

const InputSpec* find_input(const ModelSpec& spec, const std::string& name) {
  for (const InputSpec& input : spec.inputs) {
    if (input.name == name) return &input;
  }
  return nullptr;
}

const OutputSpec* find_output(const ModelSpec& spec, const std::string& name) {
  for (const OutputSpec& output : spec.outputs) {
    if (output.name == name) return &output;
  }
  return nullptr;
}

StatusOr<ConcreteShape> shape_at(const Shape& shape, const Bindings& sizes, std::string_view what) {
  auto concrete = evaluate_shape(shape, sizes);
  if (!concrete.ok())
    return std::move(concrete).status().with_note(fmt::format("evaluating the shape of {}", what));
  return concrete;
}

}  // namespace

ModelIo model_io(const ir::Graph& graph) {
  ModelIo io;
  std::set<std::string> seen;
  for (ir::ValueId id : graph.inputs()) {
    const ir::Value& value = graph.value(id);
    io.inputs.push_back({value.name, value.dtype, value.shape, value.form});
    for (const DimExpr& dim : value.shape) {
      for (const std::string& symbol : dim.symbols()) {
        if (seen.insert(symbol).second) io.symbols.push_back(symbol);
      }
    }
  }
  for (ir::ValueId id : graph.outputs()) {
    const ir::Value& value = graph.value(id);
    io.outputs.push_back({value.name, value.dtype, value.shape, value.form});
  }
  return io;
}

bool ModelIo::has_non_tensor() const {
  for (const auto* ports : {&inputs, &outputs}) {
    for (const Port& port : *ports) {
      if (port.form != ValueForm::kTensor) return true;
    }
  }
  return false;
}

Status check_spec_against_model(const ModelSpec& spec, const ModelIo& io) {
  auto has = [](const std::vector<Port>& ports, const std::string& name) {
    return std::any_of(ports.begin(), ports.end(), [&](const Port& p) { return p.name == name; });
  };
  for (const InputSpec& input : spec.inputs) {
    if (!has(io.inputs, input.name)) {
      return invalid_argument("{}: the model has no input '{}' (its inputs: {})", input.json_path,
                              input.name, names_of(io.inputs));
    }
  }
  for (const OutputSpec& output : spec.outputs) {
    if (!has(io.outputs, output.name)) {
      return invalid_argument("{}: the model has no output '{}' (its outputs: {})",
                              output.json_path, output.name, names_of(io.outputs));
    }
  }
  const std::string symbols =
      io.symbols.empty() ? "none" : fmt::format("{}", fmt::join(io.symbols, ", "));
  for (const auto& [symbol, sizes] : spec.dims) {
    if (std::find(io.symbols.begin(), io.symbols.end(), symbol) == io.symbols.end()) {
      return invalid_argument("{}.dims.{}: the model has no symbolic dim '{}' (its symbols: {})",
                              spec.json_path, symbol, symbol, symbols);
    }
  }
  if (spec.batch_dim &&
      std::find(io.symbols.begin(), io.symbols.end(), *spec.batch_dim) == io.symbols.end()) {
    return invalid_argument("{}.batch_dim: the model has no symbolic dim '{}' (its symbols: {})",
                            spec.json_path, *spec.batch_dim, symbols);
  }
  for (const DataSet& set : spec.data_sets) {
    if (set.inputs.size() != io.inputs.size() || set.outputs.size() != io.outputs.size()) {
      return invalid_argument(
          "{}/{}: {} input and {} output files, but the model has {} runtime inputs ({}) "
          "and {} outputs ({})",
          spec.json_path, set.name, set.inputs.size(), set.outputs.size(), io.inputs.size(),
          names_of(io.inputs), io.outputs.size(), names_of(io.outputs));
    }
  }
  return ok_status();
}

std::vector<Bindings> size_combinations(const ModelSpec& spec, const ModelIo& io) {
  std::vector<Bindings> out;
  Bindings current;
  std::function<void(size_t)> visit = [&](size_t i) {
    if (i == io.symbols.size()) {
      out.push_back(current);
      return;
    }
    for (int64_t size : spec.sizes_of(io.symbols[i])) {
      current[io.symbols[i]] = size;
      visit(i + 1);
    }
  };
  visit(0);
  return out;
}

StatusOr<std::vector<HostValue>> data_set_values(const DataSet& set, const ModelIo& io,
                                                 Bindings& sizes) {
  std::vector<HostValue> out;
  for (size_t k = 0; k < io.inputs.size() && k < set.inputs.size(); ++k) {
    const Port& port = io.inputs[k];
    KILN_ASSIGN_OR_RETURN(HostValue value,
                          onnx_import::read_value_proto_file(set.inputs[k], port.form, port.dtype));
    const std::string what = fmt::format("'{}' (input '{}')", set.inputs[k], port.name);
    if (port.form != ValueForm::kTensor) {
      if (value.dtype() != port.dtype) {
        return invalid_argument("{} holds {}, but the model takes a {} of {}", what,
                                value.describe(), value_form_name(port.form),
                                dtype_name(port.dtype));
      }
      out.push_back(std::move(value));
      continue;
    }
    const Tensor tensor = backend_test_dtype(value.tensor(), port.dtype);
    if (tensor.dtype() != port.dtype || tensor.rank() != static_cast<int64_t>(port.shape.size())) {
      return invalid_argument("{} holds {}, but the model takes {} {}", what,
                              format_tensor_type(tensor.dtype(), tensor.shape()),
                              dtype_name(port.dtype), shape_to_string(port.shape));
    }
    for (size_t d = 0; d < port.shape.size(); ++d) {
      const DimExpr& dim = port.shape[d];
      if (!dim.is_symbol()) continue;
      const std::string symbol = dim.symbols().front();
      auto [it, inserted] = sizes.emplace(symbol, tensor.shape()[d]);
      if (!inserted && it->second != tensor.shape()[d]) {
        return invalid_argument("{} has {} = {} at dim {}, but another input has {} = {}", what,
                                symbol, tensor.shape()[d], d, symbol, it->second);
      }
    }
    out.push_back(tensor);
  }
  for (size_t k = 0; k < out.size(); ++k) {
    if (io.inputs[k].form != ValueForm::kTensor) continue;
    KILN_ASSIGN_OR_RETURN(ConcreteShape shape,
                          shape_at(io.inputs[k].shape, sizes, "input '" + io.inputs[k].name + "'"));
    KILN_RETURN_IF_ERROR(
        check_type(out[k].tensor(), io.inputs[k].dtype, shape,
                   fmt::format("'{}' (input '{}')", set.inputs[k], io.inputs[k].name)));
  }
  return out;
}

StatusOr<std::vector<NamedTensor>> data_set_inputs(const DataSet& set, const ModelIo& io,
                                                   Bindings& sizes) {
  KILN_ASSIGN_OR_RETURN(std::vector<HostValue> values, data_set_values(set, io, sizes));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> tensors, value_tensors(std::move(values), "input"));
  std::vector<NamedTensor> out;
  for (size_t k = 0; k < tensors.size(); ++k) out.push_back({io.inputs[k].name, tensors[k]});
  return out;
}

StatusOr<std::vector<HostValue>> data_set_outputs(const DataSet& set, const ModelIo& io) {
  std::vector<HostValue> out;
  for (size_t k = 0; k < io.outputs.size() && k < set.outputs.size(); ++k) {
    const Port& port = io.outputs[k];
    KILN_ASSIGN_OR_RETURN(
        HostValue value, onnx_import::read_value_proto_file(set.outputs[k], port.form, port.dtype));
    if (value.is_tensor()) value = backend_test_dtype(value.tensor(), port.dtype);
    out.push_back(std::move(value));
  }
  return out;
}

StatusOr<std::vector<NamedTensor>> manifest_inputs(const ModelSpec& spec, const ModelIo& io,
                                                   const Bindings& sizes) {
  std::vector<NamedTensor> out;
  for (const Port& port : io.inputs) {
    const InputSpec* input = find_input(spec, port.name);
    const std::string what = input ? input->json_path : fmt::format("input '{}'", port.name);
    const DType dtype = input && input->dtype ? *input->dtype : port.dtype;
    if (dtype != port.dtype) {
      return invalid_argument("{}.dtype: {} given, but the model's input '{}' is {}", what,
                              dtype_name(dtype), port.name, dtype_name(port.dtype));
    }
    KILN_ASSIGN_OR_RETURN(ConcreteShape model_shape,
                          shape_at(port.shape, sizes, "input '" + port.name + "'"));
    ConcreteShape shape = model_shape;
    if (input && input->shape) {
      KILN_ASSIGN_OR_RETURN(shape, shape_at(*input->shape, sizes, what + ".shape"));
    }
    if (shape != model_shape) {
      return invalid_argument("{}.shape: {} at {}, but the model's input '{}' is {} there", what,
                              shape_to_string(shape), format_sizes(sizes, io.symbols), port.name,
                              shape_to_string(model_shape));
    }
    Tensor tensor;
    if (input && !input->file.empty()) {
      KILN_ASSIGN_OR_RETURN(std::string path, expand_path(input->file, sizes, what + ".file"));
      KILN_ASSIGN_OR_RETURN(tensor, read_any_tensor(path, dtype, shape));
      KILN_RETURN_IF_ERROR(
          check_type(tensor, dtype, shape, fmt::format("{}.file '{}'", what, path)));
    } else {
      const Generator generator = input && input->generate ? *input->generate : Generator{};
      auto generated = generate_tensor(generator, port.name, dtype, shape);
      if (!generated.ok()) return std::move(generated).status().with_note("generating " + what);
      tensor = std::move(generated).value();
    }
    out.push_back({port.name, std::move(tensor)});
  }
  return out;
}

StatusOr<References> reference_outputs(const ModelSpec& spec, const ModelIo& io,
                                       const ir::Graph& graph, const DataSet* set,
                                       const Bindings& sizes, std::span<const NamedTensor> inputs,
                                       const OrtRunner& ort) {
  References refs;
  refs.outputs.resize(io.outputs.size());
  refs.sources.resize(io.outputs.size());
  std::vector<size_t> from_source;
  for (size_t k = 0; k < io.outputs.size(); ++k) {
    const Port& port = io.outputs[k];
    if (set != nullptr) {
      KILN_ASSIGN_OR_RETURN(onnx_import::TensorProtoFile file,
                            onnx_import::read_tensor_proto_file(set->outputs[k]));
      refs.outputs[k] = backend_test_dtype(std::move(file.tensor), port.dtype);
      refs.sources[k] = fmt::format("file '{}'", set->outputs[k]);
      continue;
    }
    const OutputSpec* output = find_output(spec, port.name);
    if (output == nullptr || output->file.empty()) {
      from_source.push_back(k);
      continue;
    }
    const DType dtype = output->dtype.value_or(port.dtype);
    KILN_ASSIGN_OR_RETURN(std::string path,
                          expand_path(output->file, sizes, output->json_path + ".file"));
    // A .npy or .pb file carries its shape: the output's need not be known from the sizes (a
    // data-dependent size, NonMaxSuppression's count).
    ConcreteShape shape;
    if (!has_extension(path, ".npy") && !has_extension(path, ".pb")) {
      KILN_ASSIGN_OR_RETURN(shape,
                            shape_at(output->shape.value_or(port.shape), sizes, output->json_path));
    }
    auto tensor = read_any_tensor(path, dtype, shape);
    if (!tensor.ok())
      return std::move(tensor).status().with_note("reading the reference " + output->json_path);
    refs.outputs[k] = std::move(tensor).value();
    refs.sources[k] = fmt::format("file '{}'", path);
  }
  if (from_source.empty()) return refs;

  std::vector<Tensor> computed;
  std::string source;
  if (spec.reference == ReferenceSource::kKilnReference) {
    std::vector<Tensor> tensors;
    for (const NamedTensor& input : inputs) tensors.push_back(input.tensor);
    auto evaluated = graph_eval::evaluate_graph(graph, tensors);
    if (!evaluated.ok())
      return std::move(evaluated).status().with_note("computing the kiln-reference outputs");
    computed = std::move(evaluated).value();
    source = "kiln-reference (float64 evaluator)";
  } else {
    std::vector<OutputType> types;
    for (const Port& port : io.outputs) types.push_back({port.name, port.dtype});
    auto produced = onnxruntime_reference(spec.path, inputs, types, ort);
    if (!produced.ok())
      return std::move(produced).status().with_note("getting the onnxruntime reference");
    computed = std::move(produced).value();
    source = "onnxruntime";
  }
  if (computed.size() != io.outputs.size()) {
    return internal_error("the reference gave {} outputs for {} model outputs", computed.size(),
                          io.outputs.size());
  }
  for (size_t k : from_source) {
    refs.outputs[k] = std::move(computed[k]);
    refs.sources[k] = source;
  }
  return refs;
}

std::string format_sizes(const Bindings& sizes, const std::vector<std::string>& symbols) {
  std::string out;
  for (const std::string& symbol : symbols) {
    auto it = sizes.find(symbol);
    if (it == sizes.end()) continue;
    out += fmt::format("{}{}={}", out.empty() ? "" : ",", symbol, it->second);
  }
  return out;
}

}  // namespace kiln::suite
