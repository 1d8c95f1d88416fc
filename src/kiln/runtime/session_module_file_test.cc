// A module file changed on disk while a Session holds it (truncated, rewritten in place) never
// crashes the session and never changes its outputs silently: the run during which it changed
// and every later one fail, naming the file. Replacing the file by rename is no change.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/base/file_util.h"
#include "kiln/hal/executable.h"
#include "kiln/module/module.h"
#include "kiln/runtime/session.h"
#include "kiln/tooling/comparator.h"
#include "tests/support/files.h"
#include "tests/support/runtime/test_modules.h"
#include "tests/support/tensors.h"

namespace kiln::runtime {
namespace {

using ::kiln::testing::compile_batch_conv_module;
using ::kiln::testing::random_tensor;
using ::kiln::testing::read_plain_file;
using ::kiln::testing::TempDir;
using ::testing::HasSubstr;

// Calls `action` once, after the first dispatch of the run it observes.
class AfterFirstDispatch : public hal::RunObserver {
 public:
  explicit AfterFirstDispatch(std::function<void()> action) : action_(std::move(action)) {}
  Status after_dispatch(int32_t, double, std::span<const Tensor>) override {
    if (action_) std::exchange(action_, nullptr)();
    return ok_status();
  }

 private:
  std::function<void()> action_;
};

// Writes `bytes` over the file in place (open with O_TRUNC, write), as `cp` does.
void rewrite_in_place(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

struct LoadedModule {
  TempDir dir;
  std::string path;
  std::unique_ptr<Session> session;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;  // of a run before any change
};

std::unique_ptr<LoadedModule> load_and_run_once(const std::string& device) {
  auto loaded = std::make_unique<LoadedModule>();
  loaded->path = loaded->dir.file("conv.kmod");
  Status written = module::write_module(*compile_batch_conv_module(), loaded->path);
  EXPECT_TRUE(written.ok()) << written.to_string();
  SessionOptions options;
  options.device = device;
  options.threads = 1;
  auto session = Session::open(loaded->path, options);
  EXPECT_TRUE(session.ok()) << session.status().to_string();
  if (!session.ok()) return nullptr;
  loaded->session = std::move(session).value();
  loaded->inputs = {random_tensor({2, 3, 32, 32}, 11)};
  auto outputs = loaded->session->run(loaded->inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status().to_string();
  if (outputs.ok()) loaded->outputs = std::move(outputs).value();
  // File systems stamp changes at a clock tick of a few milliseconds: the changes below come
  // later than that after the write, as they do outside a test.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return loaded;
}

void expect_module_changed_error(const Status& status, const std::string& path) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition) << status.to_string();
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("changed on disk while loaded"));
}

class SessionModuleFile : public ::testing::TestWithParam<std::string> {};

// `truncate -s 0` during a run, at a batch size the session has not prepared yet (so the
// prepare reads the constants from the truncated file): an error, never SIGBUS.
TEST_P(SessionModuleFile, TruncatedDuringARunFailsThatRunAndTheNext) {
  auto loaded = load_and_run_once(GetParam());
  ASSERT_NE(loaded, nullptr);
  AfterFirstDispatch truncate([&] { ASSERT_EQ(::truncate(loaded->path.c_str(), 0), 0); });
  const std::vector<Tensor> other_batch = {random_tensor({3, 3, 32, 32}, 12)};
  auto during = loaded->session->run(other_batch, &truncate);
  expect_module_changed_error(during.status(), loaded->path);
  EXPECT_THAT(during.status().message(), HasSubstr("0 bytes now"));
  auto after = loaded->session->run(loaded->inputs);
  expect_module_changed_error(after.status(), loaded->path);
  std::vector<Tensor> into;
  for (const Tensor& output : loaded->outputs) into.push_back(output.clone());
  expect_module_changed_error(loaded->session->run_into(loaded->inputs, into), loaded->path);
}

// Another module's bytes copied over the loaded one during a run: the run fails (or, never
// silently, gives the outputs of the file as loaded); later runs fail.
TEST_P(SessionModuleFile, OverwrittenDuringARunNeverChangesOutputsSilently) {
  auto loaded = load_and_run_once(GetParam());
  ASSERT_NE(loaded, nullptr);
  std::string other = read_plain_file(loaded->path);
  // The constants segment ends the file: change the last weights.
  for (size_t i = other.size() - 512; i < other.size(); ++i) other[i] ^= 0x5a;
  AfterFirstDispatch overwrite([&] { rewrite_in_place(loaded->path, other); });
  auto during = loaded->session->run(loaded->inputs, &overwrite);
  if (during.ok()) {
    ASSERT_EQ(during->size(), loaded->outputs.size());
    for (size_t i = 0; i < during->size(); ++i) {
      EXPECT_TRUE(bitwise_equal((*during)[i], loaded->outputs[i])) << "output " << i;
    }
  } else {
    expect_module_changed_error(during.status(), loaded->path);
  }
  const std::vector<Tensor> other_batch = {random_tensor({3, 3, 32, 32}, 13)};
  auto after = loaded->session->run(other_batch);
  expect_module_changed_error(after.status(), loaded->path);
}

// `kiln compile -o` over a loaded module renames a new file into place: the session keeps the
// file it loaded and its outputs.
TEST_P(SessionModuleFile, ReplacedByRenameKeepsRunning) {
  auto loaded = load_and_run_once(GetParam());
  ASSERT_NE(loaded, nullptr);
  std::string other = read_plain_file(loaded->path);
  for (size_t i = other.size() - 512; i < other.size(); ++i) other[i] ^= 0x5a;
  ASSERT_TRUE(write_file_atomically(loaded->path, other).ok());
  auto again = loaded->session->run(loaded->inputs);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  for (size_t i = 0; i < again->size(); ++i) {
    EXPECT_TRUE(bitwise_equal((*again)[i], loaded->outputs[i])) << "output " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, SessionModuleFile, ::testing::Values("cpu", "null"));

}  // namespace
}  // namespace kiln::runtime
