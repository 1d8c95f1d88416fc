#include "kiln/compiler/pipeline.h"

#include <cerrno>
#include <cstdlib>
#include <set>

#include "kiln/compiler/emit.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/passes/passes.h"

namespace kiln::compiler {
namespace {

constexpr std::pair<Stage, std::string_view> kStageNames[] = {{Stage::kShapes, "shapes"},
                                                              {Stage::kFold, "fold"},
                                                              {Stage::kFuse, "fuse"},
                                                              {Stage::kEmit, "emit"}};

Status run_stage(ir::Graph& graph, const CompileOptions& options, Stage stage) {
  switch (stage) {
    case Stage::kShapes: return bind_symbols(graph, options.bind);
    case Stage::kFold: {
      KILN_RETURN_IF_ERROR(passes::simplify(graph).status());
      KILN_RETURN_IF_ERROR(passes::canonicalize(graph).status());
      KILN_RETURN_IF_ERROR(passes::fuse_qdq(graph).status());
      KILN_RETURN_IF_ERROR(passes::fold_constants(graph).status());
      KILN_RETURN_IF_ERROR(passes::fold_batchnorm(graph).status());
      return passes::remove_dead(graph).status();
    }
    case Stage::kFuse: {
      KILN_RETURN_IF_ERROR(passes::fuse_mish(graph).status());
      KILN_RETURN_IF_ERROR(passes::fuse_conv(graph).status());
      KILN_RETURN_IF_ERROR(passes::fuse_gelu(graph).status());
      KILN_RETURN_IF_ERROR(passes::fuse_layer_norm(graph).status());
      KILN_RETURN_IF_ERROR(passes::fuse_matmul(graph).status());
      KILN_RETURN_IF_ERROR(passes::split_sliced_matmul(graph).status());
      return passes::remove_dead(graph).status();
    }
    case Stage::kEmit: return ir::verify_graph(graph);
  }
  return internal_error("unknown stage");
}

}  // namespace

StatusOr<Stage> parse_stage(std::string_view name) {
  for (const auto& [stage, stage_text] : kStageNames) {
    if (stage_text == name) return stage;
  }
  return invalid_argument("unknown stage '{}': expected one of shapes, fold, fuse, emit", name);
}

std::string_view stage_name(Stage stage) {
  for (const auto& [candidate, text] : kStageNames) {
    if (candidate == stage) return text;
  }
  return "?";
}

StatusOr<std::map<std::string, int64_t, std::less<>>> parse_bind_specs(
    const std::vector<std::string>& specs) {
  std::map<std::string, int64_t, std::less<>> out;
  for (const std::string& spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return invalid_argument("--bind '{}': expected NAME=VALUE, e.g. --bind N=3", spec);
    }
    std::string value = spec.substr(eq + 1);
    char* end = nullptr;
    errno = 0;
    long long parsed = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno != 0 || parsed < 0) {
      return invalid_argument("--bind '{}': '{}' is not a non-negative integer", spec, value);
    }
    out[spec.substr(0, eq)] = parsed;
  }
  return out;
}

Status bind_symbols(ir::Graph& graph, const std::map<std::string, int64_t, std::less<>>& bind) {
  if (bind.empty()) return ok_status();
  std::map<std::string, DimExpr, std::less<>> replacements;
  for (const auto& [name, value] : bind) {
    if (value < 0) return invalid_argument("--bind {}={}: a dim cannot be negative", name, value);
    replacements.emplace(name, DimExpr(value));
  }
  std::set<std::string> used;
  for (ir::ValueId in : graph.inputs()) {
    ir::Value& value = graph.value(in);
    for (DimExpr& dim : value.shape) {
      for (const std::string& symbol : dim.symbols()) used.insert(symbol);
      dim = dim.substitute(replacements);
    }
  }
  for (const auto& [name, value] : bind) {
    if (!used.count(name)) {
      return invalid_argument("--bind {}={}: no graph input has a dim named '{}'", name, value,
                              name);
    }
  }
  return graph_eval::infer_graph(graph);
}

Status run_stages(ir::Graph& graph, const CompileOptions& options, Stage last) {
  if (options.target != "cpu" && options.target != "vulkan") {
    return invalid_argument(
        "unknown target '{}': this build of kiln compiles for --target=cpu or vulkan",
        options.target);
  }
  for (const auto& [stage, name] : kStageNames) {
    Status status = run_stage(graph, options, stage);
    if (!status.ok())
      return std::move(status).with_note(fmt::format("in compiler stage '{}'", name));
    if (stage == last) break;
  }
  return ok_status();
}

StatusOr<module::ModuleContents> compile(ir::Graph graph, const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(run_stages(graph, options, Stage::kEmit));
  auto contents = emit_module(graph);
  if (!contents.ok()) return std::move(contents).status().with_note("in compiler stage 'emit'");
  return contents;
}

}  // namespace kiln::compiler
