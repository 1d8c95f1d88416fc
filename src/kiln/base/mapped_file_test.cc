// MappedFile: maps a file read-only, releases pages that read back unchanged, and survives the
// file being truncated or rewritten in place under it (zeros instead of SIGBUS, and
// check_unchanged() reporting the change), while a SIGBUS outside kiln's mappings still kills.
#include "kiln/base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/base/tensor.h"
#include "tests/support/files.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILN_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KILN_TEST_SANITIZED 1
#endif
#endif
#ifndef KILN_TEST_SANITIZED
#define KILN_TEST_SANITIZED 0
#endif

namespace kiln {
namespace {

using ::kiln::testing::TempDir;
using ::kiln::testing::write_plain_file;
using ::testing::HasSubstr;

std::string contents_of(const MappedFile& mapped) {
  return std::string(reinterpret_cast<const char*>(mapped.data()), mapped.size());
}

// Bytes that differ from page to page, so a page read from the wrong place shows.
std::string distinct_bytes(size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + i / 4096 + 1);
  return bytes;
}

// File systems stamp changes at a clock tick of a few milliseconds: a rewrite must come later
// than that after the write the mapping saw, as it does outside a test.
void wait_past_timestamp_granularity() {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

TEST(MappedFile, MapsContents) {
  TempDir dir;
  write_plain_file(dir.file("m.bin"), "mapped bytes");
  auto mapped = MappedFile::open(dir.file("m.bin"));
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  ASSERT_EQ(mapped->size(), 12u);
  EXPECT_EQ(contents_of(*mapped), "mapped bytes");
  EXPECT_EQ(mapped->path(), dir.file("m.bin"));
  EXPECT_TRUE(mapped->check_unchanged().ok());

  MappedFile moved = std::move(mapped).value();
  EXPECT_EQ(moved.size(), 12u);
  MappedFile assigned;
  assigned = std::move(moved);
  EXPECT_EQ(moved.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(std::memcmp(assigned.data(), "mapped", 6), 0);
  EXPECT_TRUE(assigned.check_unchanged().ok());
}

TEST(MappedFile, ReleasedPagesReadBackUnchanged) {
  TempDir dir;
  // Several pages of distinct bytes; release all of them, then a range starting mid-page.
  const std::string bytes = distinct_bytes(5 * 4096 + 123);
  write_plain_file(dir.file("pages.bin"), bytes);
  auto mapped = MappedFile::open(dir.file("pages.bin"));
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  ASSERT_EQ(contents_of(*mapped), bytes);
  release_mapped_pages(mapped->data(), mapped->size());
  EXPECT_EQ(contents_of(*mapped), bytes);
  release_mapped_pages(mapped->data() + 100, 3 * 4096);
  release_mapped_pages(mapped->data() + 5, 10);  // no whole page inside: nothing to do
  release_mapped_pages(nullptr, 4096);
  EXPECT_EQ(contents_of(*mapped), bytes);

  Tensor t = Tensor::borrow_mapped(DType::kU8, {static_cast<int64_t>(bytes.size())}, mapped->data(),
                                   nullptr);
  t.release_resident();
  EXPECT_EQ(std::memcmp(t.data(), bytes.data(), bytes.size()), 0);
  // A tensor in ordinary memory keeps its bytes resident (release is a no-op there).
  Tensor heap = t.clone();
  heap.release_resident();
  EXPECT_EQ(std::memcmp(heap.data(), bytes.data(), bytes.size()), 0);
}

TEST(MappedFile, AcceptsAnEmptyFile) {
  TempDir dir;
  write_plain_file(dir.file("empty"), "");
  auto mapped = MappedFile::open(dir.file("empty"));
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  EXPECT_EQ(mapped->size(), 0u);
  EXPECT_TRUE(mapped->check_unchanged().ok());
}

TEST(MappedFile, ErrorsNameThePath) {
  TempDir dir;
  auto missing = MappedFile::open(dir.file("missing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir.file("missing")));

  ::mkdir(dir.file("sub").c_str(), 0755);
  auto directory = MappedFile::open(dir.file("sub"));
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(directory.status().message(), HasSubstr(dir.file("sub")));

  auto device = MappedFile::open("/dev/null");
  ASSERT_FALSE(device.ok());
  EXPECT_THAT(device.status().message(), HasSubstr("/dev/null"));
}

// `truncate -s 0` under a loaded module: the released pages read back as zeros, not SIGBUS, and
// the change is reported.
TEST(MappedFile, TruncatedUnderTheMappingReadsZerosAndReportsTheChange) {
  TempDir dir;
  const std::string bytes = distinct_bytes(6 * 4096);
  write_plain_file(dir.file("module.kmod"), bytes);
  auto mapped = MappedFile::open(dir.file("module.kmod"));
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  release_mapped_pages(mapped->data(), mapped->size());
  ASSERT_EQ(::truncate(dir.file("module.kmod").c_str(), 4096), 0);

  const std::string after = contents_of(*mapped);  // touches every page: past the end, SIGBUS
  EXPECT_EQ(after.substr(0, 4096), bytes.substr(0, 4096));
  EXPECT_EQ(after.substr(4096), std::string(5 * 4096, '\0'));
  Status changed = mapped->check_unchanged();
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(changed.message(), HasSubstr(dir.file("module.kmod")));
  EXPECT_THAT(changed.message(), HasSubstr("24576 bytes"));
  EXPECT_THAT(changed.message(), HasSubstr("4096 bytes now"));
}

// A truncation followed by new bytes of the same size (`cp other.kmod loaded.kmod`): no
// fault, but the change is reported.
TEST(MappedFile, RewrittenInPlaceIsReported) {
  TempDir dir;
  const std::string bytes = distinct_bytes(3 * 4096);
  write_plain_file(dir.file("module.kmod"), bytes);
  auto mapped = MappedFile::open(dir.file("module.kmod"));
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  wait_past_timestamp_granularity();
  std::string other = bytes;
  other[5000] ^= 0x55;
  write_plain_file(dir.file("module.kmod"), other);
  Status changed = mapped->check_unchanged();
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(changed.message(), HasSubstr("changed on disk while loaded"));
  EXPECT_THAT(changed.message(), HasSubstr(dir.file("module.kmod")));
}

// Renaming a new file over the path (how kiln writes modules) leaves the mapping on the old
// file: not a change.
TEST(MappedFile, ReplacedByRenameIsNoChange) {
  TempDir dir;
  const std::string bytes = distinct_bytes(2 * 4096);
  write_plain_file(dir.file("module.kmod"), bytes);
  auto mapped = MappedFile::open(dir.file("module.kmod"));
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  release_mapped_pages(mapped->data(), mapped->size());
  wait_past_timestamp_granularity();
  write_plain_file(dir.file("new.kmod"), "other");
  ASSERT_EQ(::rename(dir.file("new.kmod").c_str(), dir.file("module.kmod").c_str()), 0);
  EXPECT_EQ(contents_of(*mapped), bytes);
  EXPECT_TRUE(mapped->check_unchanged().ok());
}

// The guard handles faults in kiln's mappings only: a SIGBUS anywhere else still ends the
// process as it would without kiln.
TEST(MappedFile, OtherBusErrorsStillKill) {
  TempDir dir;
  write_plain_file(dir.file("kiln.bin"), distinct_bytes(4096));
  write_plain_file(dir.file("other.bin"), distinct_bytes(2 * 4096));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto guarded = MappedFile::open(dir.file("kiln.bin"));  // installs the guard
    if (!guarded.ok()) ::_exit(3);
    const int fd = ::open(dir.file("other.bin").c_str(), O_RDONLY);
    void* other = ::mmap(nullptr, 2 * 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    if (other == MAP_FAILED) ::_exit(4);
    if (::truncate(dir.file("other.bin").c_str(), 0) != 0) ::_exit(5);
    volatile char touched = static_cast<const char*>(other)[4096];
    (void)touched;
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
#if KILN_TEST_SANITIZED
  // The sanitizer's handler, installed first, reports the fault and exits with an error.
  EXPECT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 1))
      << "exit status " << WEXITSTATUS(status);
#else
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGBUS);
#endif
}

}  // namespace
}  // namespace kiln
