#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/base/temp_file_cleanup.h"
#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/module/module.h"
#include "kiln/onnx/tensor_proto_file.h"
#include "kiln/tooling/tensor_file_codec.h"
#include "step_progress.h"

namespace kiln::cli {

int report_error(const char* command, const Status& status) {
  StepProgress::clear_current();
  std::fprintf(stderr, "kiln %s: error: %s\n", command, status.to_string().c_str());
  return kExitError;
}

namespace {

// libgomp, the OpenMP runtime under oneDNN, reads its wait policy once, as it loads. By default a
// waiting thread spins through 300000 pause instructions (about 11 ms on the Zen 4 it was
// measured on) before it sleeps; on a machine with other work that spinning takes the cores from
// the very threads being waited for, and ResNet-50 ran 2-3x slower than with a short spin, which
// costs nothing when the machine is idle. Unless the user set up OpenMP themselves, kiln restarts
// itself once with a short spin. (Not with thread binding: libgomp has already bound this thread,
// and the binding would carry over into the restarted process.)
void restart_with_short_omp_spin(char** argv) {
  for (const char* name :
       {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"}) {
    if (std::getenv(name) != nullptr) return;
  }
  if (setenv("GOMP_SPINCOUNT", "3000", 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when the restart failed: carry on with libgomp's default.
}

// `kiln --version`: the release, then what a module and a run depend on.
std::string version_text() {
  return fmt::format("kiln {}\noneDNN {}\nmodule format {}", KILN_VERSION,
                     hal::cpu::onednn_version(), module::kFormatVersion);
}

}  // namespace
}  // namespace kiln::cli

int main(int argc, char** argv) {
  kiln::cli::restart_with_short_omp_spin(argv);
  // An interrupted command (Ctrl-C, kill) leaves no temporary output file behind.
  kiln::install_temp_file_cleanup();
  // TensorProto (.pb) tensor files for --input/--output/--expected_output: tooling cannot parse
  // protobuf itself (only kiln_onnx may), so the CLI lends it kiln_onnx's reader and writer.
  kiln::register_tensor_file_codec(
      {"TensorProto", ".pb",
       [](const std::string& path) -> kiln::StatusOr<kiln::Tensor> {
         KILN_ASSIGN_OR_RETURN(auto file, kiln::onnx_import::read_tensor_proto_file(path));
         return std::move(file.tensor);
       },
       [](const std::string& path, const kiln::Tensor& tensor) {
         return kiln::onnx_import::write_tensor_proto_file(path, tensor);
       }});
  CLI::App app{"kiln " KILN_VERSION ": ahead-of-time compiler and runtime for ONNX models"};
  app.set_version_flag("--version", kiln::cli::version_text(),
                       "print the version of kiln, of oneDNN and of the module format, and exit");
  app.require_subcommand(1);
  // Every option's default shows in --help (subcommands take this from the app).
  app.option_defaults()->always_capture_default();
  std::vector<kiln::cli::Command> commands = {
      kiln::cli::add_import_command(app), kiln::cli::add_compile_command(app),
      kiln::cli::add_run_command(app),    kiln::cli::add_bench_command(app),
      kiln::cli::add_triage_command(app), kiln::cli::add_test_suite_command(app),
      kiln::cli::add_info_command(app),   kiln::cli::add_devices_command(app)};
  // A repeatable option starts empty: no "=[]" in the help.
  for (const kiln::cli::Command& command : commands) {
    for (CLI::Option* option : command.app->get_options()) {
      if (option->get_default_str() == "[]") option->default_str("");
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kiln::cli::kExitOk : kiln::cli::kExitError;
  }
  for (const kiln::cli::Command& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return kiln::cli::kExitError;
}
