#include "tests/support/test_env.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kiln::testing {

std::string model_dir() {
  const char* env = std::getenv("KILN_MODEL_DIR");
  return env != nullptr && *env != '\0' ? env : KILN_DEFAULT_MODEL_DIR;
}

std::string model_path(const std::string& relative) {
  std::string path = model_dir() + "/" + relative;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "fixture " << path << " is missing: run `make models` first";
  }
  return path;
}

std::string kiln_binary() { return KILN_BINARY_PATH; }

CommandResult run_kiln(const std::string& args) { return run_command(kiln_binary() + " " + args); }

CommandResult run_command(const std::string& command_line) {
  const std::string command = command_line + " 2>&1";
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Tensor read_f32_prefix(const std::string& path, const ConcreteShape& shape) {
  Tensor tensor = Tensor::create(DType::kF32, shape).value();
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path << ": run `make models` first";
  in.read(reinterpret_cast<char*>(tensor.mutable_data()),
          static_cast<std::streamsize>(tensor.byte_size()));
  EXPECT_EQ(static_cast<size_t>(in.gcount()), tensor.byte_size()) << path << " is too short";
  return tensor;
}

std::string make_temp_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("kiln_test_" + std::to_string(getpid()) + "_" + info->test_suite_name() +
                      "_" + info->name() + "_" + name))
                        .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace kiln::testing
