// What kiln's commands do with their output paths (docs/bad-input.md rows 68-72): a symlink's
// target is written, a FIFO and a character device are written in place and stay what they are,
// `-o -` streams the module to stdout, an output that cannot be written is refused before any
// work, and a compile interrupted by SIGINT, SIGTERM or SIGKILL leaves the previous file and no
// temporary one. Every path is inside the test's own temporary folder.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/files.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using ::kiln::testing::make_temp_dir;
using ::kiln::testing::model_path;
using ::kiln::testing::read_plain_file;
using ::kiln::testing::run_command;
using ::kiln::testing::run_kiln;
using ::kiln::testing::TempDir;
using ::kiln::testing::write_plain_file;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char* const kTinyModel = "small/tiny_cnn.onnx";

mode_t file_type(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & S_IFMT;
}

std::string compile_args(const std::string& model, const std::string& output) {
  return "compile " + model_path(model) + " -o " + output;
}

bool is_module(const std::string& path) {
  return run_kiln("info " + path + " >/dev/null 2>&1").exit_code == 0;
}

TEST(KilnCliOutputFiles, ASymlinkedOutputWritesItsTarget) {
  const std::string dir = make_temp_dir("output_symlink");
  ::mkdir((dir + "/modules").c_str(), 0755);
  write_plain_file(dir + "/modules/tiny.kmod", "previous");
  ASSERT_EQ(::symlink("modules/tiny.kmod", (dir + "/current.kmod").c_str()), 0);
  auto compiled = run_kiln(compile_args(kTinyModel, dir + "/current.kmod"));
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  EXPECT_EQ(file_type(dir + "/current.kmod"), S_IFLNK) << "the link is kept";
  EXPECT_TRUE(is_module(dir + "/modules/tiny.kmod")) << "its target was written";
  EXPECT_THAT(TempDir::entries_of(dir + "/modules"), ElementsAre("tiny.kmod"));
}

TEST(KilnCliOutputFiles, AFifoOutputIsReadByItsReader) {
  const std::string dir = make_temp_dir("output_fifo");
  ASSERT_EQ(::mkfifo((dir + "/pipe").c_str(), 0644), 0);
  // The reader copies what comes through the FIFO to a file, as `kiln compile -o >(...)` would.
  auto compiled =
      run_command("cat " + dir + "/pipe > " + dir + "/copy.kmod & " + testing::kiln_binary() + " " +
                  compile_args(kTinyModel, dir + "/pipe") + " && wait");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  EXPECT_EQ(file_type(dir + "/pipe"), S_IFIFO) << "the FIFO is still a FIFO";
  EXPECT_TRUE(is_module(dir + "/copy.kmod")) << "the reader got the whole module";
}

TEST(KilnCliOutputFiles, ACharacterDeviceIsWrittenNeverReplaced) {
  TempDir dir;
  if (::mknod(dir.file("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0 ||
      ::mknod(dir.file("full").c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
    GTEST_SKIP() << "mknod needs CAP_MKNOD (root): " << std::strerror(errno);
  }
  auto to_null = run_kiln(compile_args(kTinyModel, dir.file("null")));
  EXPECT_EQ(to_null.exit_code, 0) << to_null.output;
  auto to_full = run_kiln(compile_args(kTinyModel, dir.file("full")));
  EXPECT_EQ(to_full.exit_code, 2) << to_full.output;
  EXPECT_THAT(to_full.output, HasSubstr("No space left"));
  EXPECT_EQ(file_type(dir.file("null")), S_IFCHR);
  EXPECT_EQ(file_type(dir.file("full")), S_IFCHR) << "the device node is still a device";
  EXPECT_THAT(dir.entries(), ElementsAre("full", "null"));
}

TEST(KilnCliOutputFiles, DashStreamsTheModuleToStdoutAndTheSummaryToStderr) {
  const std::string dir = make_temp_dir("output_dash");
  // In a subshell: run_command sends the command's own stderr to its captured output.
  auto compiled = run_command("(" + testing::kiln_binary() + " " + compile_args(kTinyModel, "-") +
                              " > " + dir + "/stdout.kmod 2> " + dir + "/stderr.txt)");
  ASSERT_EQ(compiled.exit_code, 0) << read_plain_file(dir + "/stderr.txt");
  EXPECT_TRUE(is_module(dir + "/stdout.kmod"));
  EXPECT_THAT(read_plain_file(dir + "/stderr.txt"), HasSubstr("compiled 'tiny_cnn'"));
}

// Each command refuses an output it cannot write before it works: the missing model or module
// named first would otherwise be the error.
TEST(KilnCliOutputFiles, AnOutputThatCannotBeWrittenIsRefusedBeforeAnyWork) {
  const std::string dir = make_temp_dir("output_refused");
  write_plain_file(dir + "/plain", "x");
  const std::string missing = dir + "/no_such.onnx";
  struct Case {
    std::string args;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"compile " + missing + " -o " + dir + "/missing_dir/m.kmod", "does not exist"},
           {"compile " + missing + " -o " + dir, "is a directory"},
           {"import " + missing + " -o " + dir + "/plain/m.kir", "is not a directory"},
           {"run --module=" + dir + "/no.kmod --input=1x3x8x8xf32=0 --output=@" + dir +
                "/missing_dir/out.npy",
            "does not exist"},
           {"run --module=" + dir + "/no.kmod --input=1x3x8x8xf32=0 --profile=" + dir +
                "/missing_dir/trace.json",
            "does not exist"},
           {"bench --module=" + dir + "/no.kmod --input=1x3x8x8xf32=0 --json=" + dir +
                "/missing_dir/b.json",
            "does not exist"},
       }) {
    auto result = run_kiln(c.args);
    EXPECT_EQ(result.exit_code, 2) << c.args << "\n" << result.output;
    EXPECT_THAT(result.output, HasSubstr(c.says)) << c.args;
    EXPECT_THAT(result.output, HasSubstr(dir)) << c.args;
    EXPECT_THAT(result.output, ::testing::Not(HasSubstr("no_such.onnx'"))) << c.args;
    EXPECT_THAT(result.output, ::testing::Not(HasSubstr("no.kmod'"))) << c.args;
  }
}

// As root every directory is writable, so the unwritable one is tried as the user 'nobody'.
TEST(KilnCliOutputFiles, AnUnwritableDirectoryIsRefusedBeforeAnyWork) {
  const std::string dir = make_temp_dir("output_unwritable");
  ::chmod(dir.c_str(), 0755);
  ::mkdir((dir + "/locked").c_str(), 0555);
  const std::string as_user =
      ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  auto result = run_command(as_user + testing::kiln_binary() + " compile " + dir +
                            "/no_such.onnx -o " + dir + "/locked/m.kmod");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("is not writable"));
  EXPECT_THAT(result.output, HasSubstr(dir + "/locked"));
}

// SIGINT, SIGTERM and SIGKILL at several moments of a ResNet-50 compile: the output is the
// previous file or a whole new module, never anything else, and no temporary file is left.
TEST(KilnCliOutputFiles, AnInterruptedCompileLeavesThePreviousFileAndNoTemporaryFile) {
  const std::string dir = make_temp_dir("output_interrupted");
  const std::string module = dir + "/resnet.kmod";
  for (const char* signal : {"INT", "TERM", "KILL"}) {
    for (const char* delay : {"0.3", "1", "2"}) {
      SCOPED_TRACE(std::string("SIG") + signal + " after " + delay + " s");
      write_plain_file(module, "previous");
      auto result =
          run_command(testing::kiln_binary() + " " + compile_args("resnet50-v1-12.onnx", module) +
                      " >/dev/null 2>&1 & pid=$!; sleep " + delay + "; kill -" + signal +
                      " $pid 2>/dev/null; wait $pid; true");
      ASSERT_EQ(result.exit_code, 0) << result.output;
      const std::string contents = read_plain_file(module);
      if (contents != "previous") {
        EXPECT_TRUE(is_module(module)) << "a partial module";
      }
      EXPECT_THAT(TempDir::entries_of(dir), ElementsAre("resnet.kmod"));
    }
  }
}

}  // namespace
}  // namespace kiln
