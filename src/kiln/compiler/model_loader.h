// Loads a model for the compiler from either form a user has: an ONNX file (imported, opset
// upgraded) or a `.kir` IR file written by `kiln import`. Chosen by extension; the error for any
// other extension names the file.
//
// `options.bind` fixes symbols before any shape decision: an ONNX model is imported with them
// bound (ImportOptions::bind), a .kir graph has them substituted into its inputs before its
// shapes are inferred. So `kiln compile --bind N=3` sees what a static model with N written as 3
// would give, and can compile a model whose dynamic form import refuses. A name that is no
// symbol of any graph input is an error naming it.
#pragma once

#include <string>

#include "kiln/base/status.h"
#include "kiln/ir/graph.h"
#include "kiln/onnx/importer.h"

namespace kiln::compiler {

StatusOr<ir::Graph> load_model(const std::string& path, const onnx_import::ImportOptions& options);

}  // namespace kiln::compiler
