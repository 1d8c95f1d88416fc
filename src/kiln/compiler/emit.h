// Dispatch formation and module emission: one dispatch per node of the optimized graph, values
// classified as inputs / constants / intermediates, and the module's symbol list. Every symbol a
// shape uses must be bindable from the graph inputs' shapes, or emission fails naming the value.
// A control-flow node's bodies are emitted the same way, each as a nested module of its dispatch
// (module::Dispatch::bodies).
#pragma once

#include "kiln/base/status.h"
#include "kiln/ir/graph.h"
#include "kiln/module/module.h"

namespace kiln::compiler {

StatusOr<module::ModuleContents> emit_module(const ir::Graph& graph);

}  // namespace kiln::compiler
