// The `kiln` command line: each subcommand registers its flags on the CLI11 app and returns the
// process exit code from its run function: 0 success, 1 a comparison failed, 2 a usage or input
// error (printed to stderr as one Status, with its notes).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "kiln/base/status.h"

namespace kiln::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitMismatch = 1;
inline constexpr int kExitError = 2;

// A registered subcommand and the function that runs it once its flags are parsed.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_import_command(CLI::App& app);
Command add_compile_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_triage_command(CLI::App& app);
Command add_test_suite_command(CLI::App& app);
Command add_info_command(CLI::App& app);
Command add_devices_command(CLI::App& app);

// Prints "kiln <command>: error: ..." and returns kExitError.
int report_error(const char* command, const Status& status);

}  // namespace kiln::cli
