// libFuzzer target: untrusted ONNX bytes through import, verification and the whole compiler.
// Any Status is fine; a crash, hang, leak or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>

#include "kiln/compiler/pipeline.h"
#include "kiln/ir/graph.h"
#include "kiln/onnx/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::onnx_import::ImportOptions options;
  options.max_model_bytes = 1 << 20;
  auto graph = kiln::onnx_import::import_bytes(data, size, /*model_dir=*/"", options);
  if (!graph.ok()) return 0;
  if (!kiln::ir::verify_graph(*graph).ok()) return 0;
  auto module = kiln::compiler::compile(std::move(graph).value(), {});
  (void)module;
  return 0;
}
