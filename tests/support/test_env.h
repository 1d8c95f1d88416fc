// Shared helpers for kiln's cross-module tests: where the generated fixtures are, how to run the
// `kiln` binary, and how to load a raw fixture tensor.
#pragma once

#include <string>

#include "kiln/base/tensor.h"

namespace kiln::testing {

// $KILN_MODEL_DIR, else the build's models/ folder. Tests fail (not skip) when a fixture is
// missing, with a message saying to run `make models`.
std::string model_dir();
std::string model_path(const std::string& relative);
// Absolute path of the built `kiln` binary.
std::string kiln_binary();

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs `kiln <args>` through the shell and captures its output.
CommandResult run_kiln(const std::string& args);
// Runs a shell command line (e.g. "VAR=value /path/to/kiln ...") and captures its output.
CommandResult run_command(const std::string& command_line);

// Reads a raw f32 fixture with the given dims; the file may hold more elements (a batch prefix).
Tensor read_f32_prefix(const std::string& path, const ConcreteShape& shape);

// A fresh empty directory under the test's temporary folder, removed when the test ends
// (KILN_KEEP_TEST_DIRS=1 keeps it).
std::string make_temp_dir(const std::string& name);

}  // namespace kiln::testing
