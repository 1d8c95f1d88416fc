#include <cstdio>
#include <vector>

#include "commands.h"

namespace kiln::cli {

int report_error(const char* command, const Status& status) {
  std::fprintf(stderr, "kiln %s: error: %s\n", command, status.to_string().c_str());
  return kExitError;
}

}  // namespace kiln::cli

int main(int argc, char** argv) {
  CLI::App app{"kiln: ahead-of-time compiler and runtime for ONNX models"};
  app.require_subcommand(1);
  std::vector<kiln::cli::Command> commands = {
      kiln::cli::add_import_command(app), kiln::cli::add_compile_command(app),
      kiln::cli::add_run_command(app), kiln::cli::add_bench_command(app),
      kiln::cli::add_triage_command(app)};
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
