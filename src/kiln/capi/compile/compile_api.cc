// The C API's compile functions (include/kiln/kiln.h), in libkiln.so only: ONNX model to module,
// as `kiln compile` does.
#include <cstdlib>
#include <cstring>

#include "kiln/capi/handles.h"
#include "kiln/compiler/model_loader.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/onnx/importer.h"

namespace {

using kiln::Status;
using kiln::StatusOr;

struct ParsedOptions {
  kiln::onnx_import::ImportOptions import;
  kiln::compiler::CompileOptions compile;
};

StatusOr<ParsedOptions> parse_options(const kiln_compile_options* options) {
  ParsedOptions out;
  std::vector<std::string> bind;
  if (options != nullptr) {
    if (options->bind_count > 0 && options->bind == nullptr) {
      return kiln::invalid_argument("bind_count is {} but bind is null", options->bind_count);
    }
    for (size_t i = 0; i < options->bind_count; ++i) {
      if (options->bind[i] == nullptr) return kiln::invalid_argument("bind[{}] is null", i);
      bind.emplace_back(options->bind[i]);
    }
    if (options->target != nullptr) out.compile.target = options->target;
    if (options->opset_version != 0) out.import.target_opset = options->opset_version;
  }
  // Bound as the model loads, before import makes any shape decision (as `kiln compile`).
  auto parsed = kiln::compiler::parse_bind_specs(bind);
  if (!parsed.ok()) return std::move(parsed).status();
  out.import.bind = std::map<std::string, int64_t>(parsed->begin(), parsed->end());
  return out;
}

}  // namespace

extern "C" {

kiln_status* kiln_compile_file(const char* model_path, const char* module_path,
                               const kiln_compile_options* options) {
  return kiln::capi::guarded([&]() -> Status {
    if (model_path == nullptr || module_path == nullptr) {
      return kiln::invalid_argument("kiln_compile_file: model_path and module_path must be set");
    }
    KILN_ASSIGN_OR_RETURN(ParsedOptions parsed, parse_options(options));
    // The weights stay in the model's files until write_module streams them out and checks them.
    parsed.import.weights_by_reference = true;
    KILN_ASSIGN_OR_RETURN(kiln::ir::Graph graph,
                          kiln::compiler::load_model(model_path, parsed.import));
    KILN_ASSIGN_OR_RETURN(kiln::module::ModuleContents contents,
                          kiln::compiler::compile(std::move(graph), parsed.compile));
    return kiln::module::write_module(contents, module_path);
  });
}

kiln_status* kiln_compile_memory(const void* onnx_data, size_t onnx_size,
                                 const kiln_compile_options* options, kiln_bytes* out_module) {
  return kiln::capi::guarded([&]() -> Status {
    if ((onnx_data == nullptr && onnx_size > 0) || out_module == nullptr) {
      return kiln::invalid_argument("kiln_compile_memory: onnx_data and out_module must be set");
    }
    KILN_ASSIGN_OR_RETURN(ParsedOptions parsed, parse_options(options));
    // No directory: a model in memory cannot refer to external data files.
    KILN_ASSIGN_OR_RETURN(
        kiln::ir::Graph graph,
        kiln::onnx_import::import_bytes(onnx_data, onnx_size, /*model_dir=*/"", parsed.import));
    KILN_ASSIGN_OR_RETURN(kiln::module::ModuleContents contents,
                          kiln::compiler::compile(std::move(graph), parsed.compile));
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, kiln::module::serialize_module(contents));
    void* data = std::malloc(bytes.empty() ? 1 : bytes.size());
    if (data == nullptr) return kiln::out_of_range("out of memory for {} bytes", bytes.size());
    std::memcpy(data, bytes.data(), bytes.size());
    *out_module = kiln_bytes{data, bytes.size()};
    return kiln::ok_status();
  });
}

void kiln_bytes_release(kiln_bytes* bytes) {
  if (bytes == nullptr) return;
  std::free(bytes->data);
  bytes->data = nullptr;
  bytes->size = 0;
}

}  // extern "C"
