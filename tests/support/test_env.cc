#include "tests/support/test_env.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

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

namespace {

// Removes the test's folders when the test ends (they hold modules of hundreds of MB), unless
// KILN_KEEP_TEST_DIRS=1 asks to keep them for a look.
class TempDirCleaner : public ::testing::EmptyTestEventListener {
 public:
  void add(std::string dir) { dirs_.push_back(std::move(dir)); }
  void OnTestEnd(const ::testing::TestInfo&) override {
    const char* keep = std::getenv("KILN_KEEP_TEST_DIRS");
    if (keep == nullptr || std::string(keep) != "1") {
      std::error_code ignored;
      for (const std::string& dir : dirs_) std::filesystem::remove_all(dir, ignored);
    }
    dirs_.clear();
  }

 private:
  std::vector<std::string> dirs_;
};

TempDirCleaner& temp_dir_cleaner() {
  static TempDirCleaner* cleaner = [] {
    auto* created = new TempDirCleaner();  // owned by gtest's listener list from here on
    ::testing::UnitTest::GetInstance()->listeners().Append(created);
    return created;
  }();
  return *cleaner;
}

}  // namespace

std::string make_temp_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("kiln_test_" + std::to_string(getpid()) + "_" + info->test_suite_name() +
                      "_" + info->name() + "_" + name))
                        .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  temp_dir_cleaner().add(dir);
  return dir;
}

}  // namespace kiln::testing
