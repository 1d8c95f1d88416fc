#include "commands.h"
#include "flags.h"
#include "kiln/compiler/model_loader.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/hal/registry.h"
#include "kiln/ir/text_format.h"
#include "kiln/module/module.h"
#include "kiln/triage/dispatch_dump.h"
#include "step_progress.h"

namespace kiln::cli {
namespace {

struct CompileFlags {
  std::string model;
  std::string output;
  std::string target = "cpu";
  std::vector<std::string> bind;
  std::string stop_after;
  std::string dump_dispatches;
  int64_t opset = 17;
  bool weights_as_inputs = false;
};

// For a GPU target: the dispatches its device has no kernel for (they run on its CPU fallback),
// on stdout. A device that cannot be created here is noted, not an error: the module is the same.
void report_target_fallbacks(const std::string& target, const module::ModuleContents& contents,
                             std::FILE* out) {
  if (target == "cpu") return;
  auto device = hal::create_device(target, {});
  if (!device.ok()) {
    std::fprintf(out, "note: cannot check which dispatches run on %s here: %s\n", target.c_str(),
                 device.status().message().c_str());
    return;
  }
  std::vector<std::string> lines;
  for (size_t d = 0; d < contents.dispatches.size(); ++d) {
    const module::Dispatch& dispatch = contents.dispatches[d];
    // Control flow runs on the host; its bodies' dispatches are not listed here.
    if (!dispatch.bodies.empty()) continue;
    std::string reason = (*device)->fallback_reason_for_op(dispatch.op_type);
    if (reason.empty()) continue;
    lines.push_back(
        fmt::format("  dispatch {} '{}' ({}): {}", d, dispatch.name, dispatch.op_type, reason));
  }
  const std::string more =
      lines.empty() ? std::string()
                    : " (kiln run --device=" + target +
                          " also names those whose shapes or attributes send them there):";
  std::fprintf(out, "%s: %zu of %zu dispatches run on the CPU fallback%s\n", target.c_str(),
               lines.size(), contents.dispatches.size(), more.c_str());
  for (const std::string& line : lines) std::fprintf(out, "%s\n", line.c_str());
}

int run_compile(const CompileFlags& flags) {
  if (!flags.stop_after.empty() && !flags.dump_dispatches.empty()) {
    return report_error(
        "compile", invalid_argument("--dump-dispatches needs a full compile, not --stop-after"));
  }
  auto bind = compiler::parse_bind_specs(flags.bind);
  if (!bind.ok()) return report_error("compile", bind.status());
  if (Status checked = check_output_flag("-o", flags.output); !checked.ok()) {
    return report_error("compile", checked);
  }
  // `-o -` writes the module (or IR) to stdout; the summary then goes to stderr.
  std::FILE* summary = flags.output == "-" ? stderr : stdout;
  onnx_import::ImportOptions import_options;
  import_options.target_opset = flags.opset;
  import_options.weights_as_inputs = flags.weights_as_inputs;
  // Bound as the model loads, before import makes any shape decision.
  import_options.bind = std::map<std::string, int64_t>(bind->begin(), bind->end());
  // The weights stay in the model's files until the module writer streams them out (and checks
  // the files did not change meanwhile); a .kir written by --stop-after reads them in as usual.
  import_options.weights_by_reference = flags.stop_after.empty();
  StepProgress progress("compile");
  progress.step("importing the model");
  auto graph = compiler::load_model(flags.model, import_options);
  if (!graph.ok()) return report_error("compile", graph.status());

  compiler::CompileOptions options;
  options.target = flags.target;

  if (!flags.stop_after.empty()) {
    auto stage = compiler::parse_stage(flags.stop_after);
    if (!stage.ok()) return report_error("compile", stage.status());
    Status status = compiler::run_stages(*graph, options, *stage);
    if (!status.ok()) return report_error("compile", status);
    status = ir::write_kir(*graph, flags.output);
    if (!status.ok()) return report_error("compile", status);
    std::fprintf(summary, "stopped after stage '%s': %zu nodes -> %s\n", flags.stop_after.c_str(),
                 graph->nodes().size(), flags.output.c_str());
    return kExitOk;
  }
  triage::OriginOps origin_ops;
  for (const ir::Node& node : graph->nodes()) origin_ops[node.name] = node.op_type;
  progress.step("compiling");
  auto contents = compiler::compile(std::move(graph).value(), options);
  if (!contents.ok()) return report_error("compile", contents.status());
  if (!flags.dump_dispatches.empty()) {
    Status dumped =
        triage::write_dispatch_dump(flags.dump_dispatches, *contents, origin_ops, nullptr);
    if (!dumped.ok())
      return report_error("compile", std::move(dumped).with_note("in --dump-dispatches"));
  }
  progress.step("writing the module");
  Status written = module::write_module(*contents, flags.output);
  progress.done();
  if (!written.ok()) return report_error("compile", written);
  std::vector<std::string> data_symbols;
  for (const module::Dispatch& d : contents->dispatches) {
    data_symbols.insert(data_symbols.end(), d.data_symbols.begin(), d.data_symbols.end());
  }
  const std::string from_data =
      data_symbols.empty() ? ""
                           : fmt::format(", bound from data [{}]", fmt::join(data_symbols, ","));
  std::fprintf(summary, "compiled '%s': %zu dispatches, symbols [%s]%s -> %s\n",
               contents->model_name.c_str(), contents->dispatches.size(),
               fmt::format("{}", fmt::join(contents->symbols, ",")).c_str(), from_data.c_str(),
               flags.output.c_str());
  report_target_fallbacks(flags.target, *contents, summary);
  if (!contents->assumptions.empty()) {
    std::fprintf(summary, "assumes (checked when the sizes are bound at run time):\n");
    for (const Assumption& assumption : contents->assumptions) {
      std::fprintf(summary, "  %s  (%s)\n", assumption.to_string().c_str(),
                   assumption.origin.c_str());
    }
  }
  return kExitOk;
}

}  // namespace

Command add_compile_command(CLI::App& app) {
  auto flags = std::make_shared<CompileFlags>();
  CLI::App* sub =
      app.add_subcommand("compile", "compile an .onnx or .kir model into a module (.kmod)");
  sub->add_option("model", flags->model, "model file (.onnx or .kir)")->required();
  sub->add_option("-o,--output", flags->output,
                  "module file to write (.kmod), or .kir with --stop-after; - for stdout")
      ->required();
  sub->add_option("--target", flags->target,
                  "where the module is meant to run: cpu or vulkan (the module runs on every "
                  "device; for vulkan, the dispatches without a GPU kernel are listed)");
  sub->add_option("--bind", flags->bind, "fix a symbolic dim, e.g. --bind N=3 (repeatable)");
  sub->add_option("--stop-after", flags->stop_after,
                  "stop after a stage (shapes|fold|fuse) and write its IR");
  sub->add_option(
      "--dump-dispatches", flags->dump_dispatches,
      "also describe every dispatch (ONNX origins, fused ops, symbolic shapes) in this directory");
  sub->add_option("--opset-version", flags->opset, "upgrade an .onnx model to this opset");
  sub->add_flag("--weights-as-inputs", flags->weights_as_inputs,
                "keep initializers listed in graph.input as runtime inputs");
  return {sub, [flags] { return run_compile(*flags); }};
}

}  // namespace kiln::cli
