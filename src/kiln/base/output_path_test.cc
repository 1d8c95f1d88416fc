// Where kiln's writers put their bytes (output_path.h, file_util.h): symlinks are followed,
// devices and FIFOs are written in place, never replaced, what cannot be written is refused
// before anything is, and an interrupted writer leaves no temporary file.
#include "kiln/base/output_path.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/base/file_util.h"
#include "kiln/base/temp_file_cleanup.h"
#include "tests/support/files.h"

namespace kiln {
namespace {

using ::kiln::testing::read_plain_file;
using ::kiln::testing::TempDir;
using ::kiln::testing::write_plain_file;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

mode_t file_type(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & S_IFMT;
}

TEST(OutputPath, ASymlinkIsFollowedAndItsTargetWritten) {
  TempDir dir;
  ::mkdir(dir.file("real").c_str(), 0755);
  write_plain_file(dir.file("real/model.kmod"), "old");
  // link -> hop -> real/model.kmod, the first link relative.
  ASSERT_EQ(::symlink("real/model.kmod", dir.file("hop").c_str()), 0);
  ASSERT_EQ(::symlink(dir.file("hop").c_str(), dir.file("link").c_str()), 0);
  auto target = resolve_output_path(dir.file("link"));
  ASSERT_TRUE(target.ok()) << target.status().to_string();
  EXPECT_EQ(target->kind, OutputKind::kReplaceFile);
  EXPECT_EQ(target->path, dir.file("real/model.kmod"));

  ASSERT_TRUE(write_file_atomically(dir.file("link"), "new bytes").ok());
  EXPECT_EQ(file_type(dir.file("link")), S_IFLNK) << "the link itself is kept";
  EXPECT_EQ(file_type(dir.file("hop")), S_IFLNK);
  EXPECT_EQ(read_plain_file(dir.file("real/model.kmod")), "new bytes");
  // The temporary file was made in the target's directory and is gone.
  EXPECT_THAT(TempDir::entries_of(dir.file("real")), ElementsAre("model.kmod"));

  // A dangling link creates its target.
  ASSERT_EQ(::symlink("real/fresh.bin", dir.file("dangling").c_str()), 0);
  ASSERT_TRUE(write_file_atomically(dir.file("dangling"), "fresh").ok());
  EXPECT_EQ(file_type(dir.file("dangling")), S_IFLNK);
  EXPECT_EQ(read_plain_file(dir.file("real/fresh.bin")), "fresh");

  // A loop is refused.
  ASSERT_EQ(::symlink("loop_b", dir.file("loop_a").c_str()), 0);
  ASSERT_EQ(::symlink("loop_a", dir.file("loop_b").c_str()), 0);
  Status looped = write_file_atomically(dir.file("loop_a"), "x");
  ASSERT_FALSE(looped.ok());
  EXPECT_THAT(looped.message(), HasSubstr("symlinks"));
}

TEST(OutputPath, AFifoIsStreamedToItsReader) {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto reader = std::async(std::launch::async, [&] { return read_plain_file(fifo); });
  const std::string bytes(300000, 'q');  // more than a pipe holds: the reader must drain it
  Status written = write_file_atomically(fifo, bytes);
  ASSERT_TRUE(written.ok()) << written.to_string();
  EXPECT_EQ(reader.get(), bytes);
  EXPECT_EQ(file_type(fifo), S_IFIFO) << "the FIFO is still a FIFO";
  EXPECT_THAT(dir.entries(), ElementsAre("pipe"));
}

// Device nodes made in the test's own directory: 1,3 is /dev/null's device, 1,7 /dev/full's.
TEST(OutputPath, ACharacterDeviceIsWrittenInPlaceNeverReplaced) {
  TempDir dir;
  const std::string null_device = dir.file("null"), full_device = dir.file("full");
  if (::mknod(null_device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0 ||
      ::mknod(full_device.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
    GTEST_SKIP() << "mknod needs CAP_MKNOD (root): " << std::strerror(errno);
  }
  auto target = resolve_output_path(null_device);
  ASSERT_TRUE(target.ok()) << target.status().to_string();
  EXPECT_EQ(target->kind, OutputKind::kStream);
  ASSERT_TRUE(write_file_atomically(null_device, "discarded").ok());
  EXPECT_EQ(file_type(null_device), S_IFCHR);

  Status full = write_file_atomically(full_device, std::string(10000, 'x'));
  ASSERT_FALSE(full.ok());
  EXPECT_THAT(full.message(), HasSubstr(full_device));
  EXPECT_THAT(full.message(), HasSubstr("No space left"));
  EXPECT_EQ(file_type(full_device), S_IFCHR) << "the device node is still a device";
  EXPECT_THAT(dir.entries(), ElementsAre("full", "null"));
}

TEST(OutputPath, WhatCannotBeWrittenIsRefusedNamingThePath) {
  TempDir dir;
  ::mkdir(dir.file("sub").c_str(), 0755);
  write_plain_file(dir.file("plain"), "x");
  const std::string socket_path = dir.file("sock");
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);

  struct Case {
    std::string path;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {dir.file("sub"), "is a directory"},
           {socket_path, "is a socket"},
           {dir.file("missing/out.kmod"), "does not exist"},
           {dir.file("plain/out.kmod"), "is not a directory"},
           {"", "empty path"},
       }) {
    Status checked = check_output_path(c.path);
    ASSERT_FALSE(checked.ok()) << c.path;
    EXPECT_THAT(checked.message(), HasSubstr(c.says)) << c.path;
    if (!c.path.empty()) {
      EXPECT_THAT(checked.message(), HasSubstr(c.path));
    }
    EXPECT_FALSE(write_file_atomically(c.path, "x").ok()) << c.path;
  }
  EXPECT_EQ(file_type(socket_path), S_IFSOCK) << "the socket is left alone";
  ::close(sock);
  EXPECT_THAT(dir.entries(), ElementsAre("plain", "sock", "sub"));
}

// A directory the user cannot write into is refused by the check, before any work. Root may
// write anywhere, so as root the check runs in a child that became the unprivileged 'nobody'.
TEST(OutputPath, AnUnwritableDirectoryIsRefused) {
  TempDir dir;
  ::mkdir(dir.file("locked").c_str(), 0555);
  ::chmod(dir.path().c_str(), 0755);
  const std::string out = dir.file("locked/out.kmod");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    Status checked = check_output_path(out);
    if (checked.ok()) ::_exit(1);
    const bool named = checked.message().find("not writable") != std::string::npos &&
                       checked.message().find(out) != std::string::npos;
    ::_exit(named ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: accepted, 2: the message lacks the path or reason";
}

// A writer in a child process that installed kiln's cleanup is interrupted mid-write: the old
// file is intact and no temporary file is left. SIGINT and SIGTERM with a named temporary file
// (removed by the handler); SIGKILL with an anonymous one (nothing to remove).
TEST(OutputPath, AnInterruptedWriterLeavesNoTemporaryFile) {
  struct Case {
    int signal;
    bool named;
  };
  for (const Case& c : {Case{SIGINT, true}, Case{SIGTERM, true}, Case{SIGKILL, false}}) {
    SCOPED_TRACE(strsignal(c.signal));
    TempDir dir;
    write_plain_file(dir.file("model.kmod"), "previous");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      install_temp_file_cleanup();
      set_named_temp_files_for_testing(c.named);
      auto writer = AtomicFileWriter::open(dir.file("model.kmod"));
      if (!writer.ok() || !writer->append(std::string(1 << 20, 'n')).ok()) ::_exit(3);
      if (c.named != !writer->temp_path().empty()) ::_exit(4);
      ::raise(c.signal);
      ::_exit(5);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), c.signal) << "dies of the signal it got";
    EXPECT_EQ(read_plain_file(dir.file("model.kmod")), "previous");
    EXPECT_THAT(dir.entries(), ElementsAre("model.kmod"));
  }
}

}  // namespace
}  // namespace kiln
