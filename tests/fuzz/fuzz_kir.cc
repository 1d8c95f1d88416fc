// libFuzzer target: untrusted `.kir` IR text (and its constant blob) through the parser, the
// verifier and shape inference.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kiln/graph_eval/graph_eval.h"
#include "kiln/ir/text_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto graph = kiln::ir::parse_kir(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!graph.ok()) return 0;
  if (!kiln::ir::verify_graph(*graph).ok()) return 0;
  (void)kiln::graph_eval::infer_graph(*graph);
  return 0;
}
