#include "kiln/compiler/model_loader.h"

#include "kiln/ir/text_format.h"

namespace kiln::compiler {
namespace {

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

StatusOr<ir::Graph> load_model(const std::string& path, const onnx_import::ImportOptions& options) {
  if (ends_with(path, ".onnx")) return onnx_import::import_file(path, options);
  if (ends_with(path, ".kir")) return ir::read_kir(path);
  return invalid_argument("'{}': expected an .onnx model or a .kir file from `kiln import`", path);
}

}  // namespace kiln::compiler
