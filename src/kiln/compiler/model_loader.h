// Loads a model for the compiler from either form a user has: an ONNX file (imported, opset
// upgraded) or a `.kir` IR file written by `kiln import`. Chosen by extension; the error for any
// other extension names the file.
#pragma once

#include <string>

#include "kiln/base/status.h"
#include "kiln/ir/graph.h"
#include "kiln/onnx/importer.h"

namespace kiln::compiler {

StatusOr<ir::Graph> load_model(const std::string& path, const onnx_import::ImportOptions& options);

}  // namespace kiln::compiler
