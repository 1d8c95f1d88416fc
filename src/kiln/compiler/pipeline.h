// The compiler's named stages over one IR graph:
//   import  (done by the caller: ONNX or .kir → IR)
//   shapes  bind symbols given in CompileOptions::bind, re-run symbolic shape inference (`kiln
//           compile --bind` binds earlier, as the model loads: compiler/model_loader.h)
//   fold    simplify, canonicalize attributes, fold constants and BatchNorm
//   fuse    fuse residual Add / Relu into Conv and BatchNormalization
//   emit    form dispatches and write the module contents
// `stop_after` lets a user stop after any stage and look at the IR (`kiln compile --stop-after`).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/graph.h"
#include "kiln/module/module.h"

namespace kiln::compiler {

enum class Stage { kShapes, kFold, kFuse, kEmit };

// "shapes" | "fold" | "fuse" | "emit"; error lists the valid names.
StatusOr<Stage> parse_stage(std::string_view name);
std::string_view stage_name(Stage stage);

struct CompileOptions {
  // Symbols fixed to values (`--bind N=3`): the module is the dynamic one with these dims bound.
  std::map<std::string, int64_t, std::less<>> bind;
  // Where the module is meant to run: "cpu" or "vulkan". Modules are device-neutral (one module
  // runs on every device), so the target changes no pass; `kiln compile` reports what a GPU
  // target's device will run on its CPU fallback.
  std::string target = "cpu";
};

// Runs the stages up to and including `last` on `graph` in place. Errors carry the stage name.
Status run_stages(ir::Graph& graph, const CompileOptions& options, Stage last);

// Parses `--bind` values "NAME=VALUE" (VALUE a non-negative integer); a later NAME wins. Errors
// quote the spec.
StatusOr<std::map<std::string, int64_t, std::less<>>> parse_bind_specs(
    const std::vector<std::string>& specs);

// Replaces symbols named in `bind` by their values in the graph inputs and re-infers shapes.
// Error if a name is not a symbol of any input.
Status bind_symbols(ir::Graph& graph, const std::map<std::string, int64_t, std::less<>>& bind);

// Full compile: every stage, then dispatch formation. The graph is consumed.
StatusOr<module::ModuleContents> compile(ir::Graph graph, const CompileOptions& options);

}  // namespace kiln::compiler
