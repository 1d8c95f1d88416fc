#include "commands.h"
#include "flags.h"
#include "kiln/ir/text_format.h"
#include "kiln/onnx/importer.h"

namespace kiln::cli {
namespace {

struct ImportFlags {
  std::string model;
  std::string output;
  int64_t opset = 17;
  bool weights_as_inputs = false;
};

}  // namespace

Command add_import_command(CLI::App& app) {
  auto flags = std::make_shared<ImportFlags>();
  CLI::App* sub = app.add_subcommand("import", "import an ONNX model into kiln's IR (.kir)");
  sub->add_option("model", flags->model, "ONNX model file")->required();
  sub->add_option("-o,--output", flags->output, "IR file to write (.kir); - for stdout")
      ->required();
  sub->add_option("--opset-version", flags->opset, "upgrade the model to this opset");
  sub->add_flag("--weights-as-inputs", flags->weights_as_inputs,
                "keep initializers listed in graph.input as runtime inputs");
  return {sub, [flags] {
            if (Status checked = check_output_flag("-o", flags->output); !checked.ok()) {
              return report_error("import", checked);
            }
            onnx_import::ImportOptions options;
            options.target_opset = flags->opset;
            options.weights_as_inputs = flags->weights_as_inputs;
            auto graph = onnx_import::import_file(flags->model, options);
            if (!graph.ok()) return report_error("import", graph.status());
            Status written = ir::write_kir(*graph, flags->output);
            if (!written.ok()) return report_error("import", written);
            std::fprintf(flags->output == "-" ? stderr : stdout,
                         "imported '%s': %zu nodes, %zu values -> %s\n", graph->name.c_str(),
                         graph->nodes().size(), graph->values().size(), flags->output.c_str());
            return kExitOk;
          }};
}

}  // namespace kiln::cli
