#include "kiln/compiler/model_loader.h"

#include "kiln/compiler/pipeline.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/ir/text_format.h"

namespace kiln::compiler {
namespace {

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

StatusOr<ir::Graph> load_model(const std::string& path, const onnx_import::ImportOptions& options) {
  if (ends_with(path, ".onnx")) return onnx_import::import_file(path, options);
  if (ends_with(path, ".kir")) {
    // Inference runs again on the parsed graph: it is what sets each node's data symbols, which
    // the text does not carry, and it checks the file's shapes against the ops.
    KILN_ASSIGN_OR_RETURN(ir::Graph graph, ir::read_kir(path));
    Status inferred = options.bind.empty()
                          ? graph_eval::infer_graph(graph)
                          : bind_symbols(graph, std::map<std::string, int64_t, std::less<>>(
                                                    options.bind.begin(), options.bind.end()));
    if (!inferred.ok()) return std::move(inferred).with_note(fmt::format("in '{}'", path));
    return graph;
  }
  return invalid_argument("'{}': expected an .onnx model or a .kir file from `kiln import`", path);
}

}  // namespace kiln::compiler
