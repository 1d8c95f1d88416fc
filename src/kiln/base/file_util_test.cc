#include "kiln/base/file_util.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/base/tensor.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "kiln_file_util_XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    ASSERT_NE(::mkdtemp(buffer.data()), nullptr) << std::strerror(errno);
    dir_ = buffer.data();
  }
  void TearDown() override {
    for (const std::string& name : list_dir()) ::unlink((dir_ + "/" + name).c_str());
    ::rmdir((dir_ + "/subdir").c_str());
    ::rmdir(dir_.c_str());
  }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::vector<std::string> list_dir() const {
    std::vector<std::string> names;
    DIR* dir = ::opendir(dir_.c_str());
    if (dir == nullptr) return names;
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name != "." && name != ".." && name != "subdir") names.push_back(name);
    }
    ::closedir(dir);
    return names;
  }

  void write_plain(const std::string& name, const std::string& bytes) {
    std::ofstream out(path(name), std::ios::binary);
    out << bytes;
  }

  std::string dir_;
};

TEST_F(FileUtilTest, ReadFileReturnsContents) {
  std::string bytes("hello\0world", 11);
  write_plain("a.bin", bytes);
  auto got = read_file(path("a.bin"), 100);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, bytes);
}

TEST_F(FileUtilTest, ReadFileAcceptsEmptyFileAndExactLimit) {
  write_plain("empty", "");
  auto empty = read_file(path("empty"), 0);
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_EQ(*empty, "");
  write_plain("five", "12345");
  auto five = read_file(path("five"), 5);
  ASSERT_TRUE(five.ok()) << five.status().to_string();
  EXPECT_EQ(*five, "12345");
}

TEST_F(FileUtilTest, ReadFileErrorsNameThePath) {
  auto missing = read_file(path("missing"), 100);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(path("missing")));

  auto dir = read_file(dir_, 100);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(dir.status().message(), HasSubstr("is a directory"));
  EXPECT_THAT(dir.status().message(), HasSubstr(dir_));

  write_plain("big", std::string(101, 'x'));
  auto big = read_file(path("big"), 100);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfRange);
  EXPECT_THAT(big.status().message(), HasSubstr(path("big")));
  EXPECT_THAT(big.status().message(), HasSubstr("101 bytes"));
}

TEST_F(FileUtilTest, WriteFileAtomicallyCreatesAndReplaces) {
  ASSERT_TRUE(write_file_atomically(path("out"), "first").ok());
  EXPECT_EQ(*read_file(path("out"), 100), "first");
  ASSERT_TRUE(write_file_atomically(path("out"), std::string("sec\0nd", 6)).ok());
  EXPECT_EQ(*read_file(path("out"), 100), std::string("sec\0nd", 6));
  EXPECT_THAT(list_dir(), ::testing::ElementsAre("out"));
}

TEST_F(FileUtilTest, WriteFileAtomicallyIntoMissingDirectoryFails) {
  Status s = write_file_atomically(path("nope/out"), "x");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(path("nope/out")));
  EXPECT_TRUE(list_dir().empty());
}

TEST_F(FileUtilTest, WriteFileAtomicallyOverDirectoryFailsAndCleansUp) {
  ASSERT_EQ(::mkdir(path("subdir").c_str(), 0755), 0);
  Status s = write_file_atomically(path("subdir"), "x");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(path("subdir")));
  EXPECT_TRUE(list_dir().empty()) << "temporary file left behind";
}

TEST_F(FileUtilTest, WriteErrorKeepsPreviousFileAndRemovesTemp) {
  ASSERT_TRUE(write_file_atomically(path("out"), "previous").ok());
  // A file size limit makes write() fail with EFBIG part-way through.
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small = old_limit;
  small.rlim_cur = 1000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  Status s = write_file_atomically(path("out"), std::string(5000, 'z'));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);

  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(path("out")));
  EXPECT_EQ(*read_file(path("out"), 100), "previous");
  EXPECT_THAT(list_dir(), ::testing::ElementsAre("out"));
}

TEST_F(FileUtilTest, AtomicFileWriterStreamsAndCommits) {
  auto writer = AtomicFileWriter::open(path("big"));
  ASSERT_TRUE(writer.ok()) << writer.status().to_string();
  std::string temp = writer->temp_path();
  EXPECT_THAT(temp, HasSubstr(path("big") + ".tmp."));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(writer->append(std::string(1000, 'a' + i % 26)).ok());
  EXPECT_EQ(writer->bytes_written(), 100000u);
  EXPECT_FALSE(read_file(path("big"), 1 << 20).ok()) << "visible before commit";
  ASSERT_TRUE(writer->commit().ok());
  EXPECT_TRUE(writer->temp_path().empty());
  auto got = read_file(path("big"), 1 << 20);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 100000u);
  EXPECT_EQ((*got)[99999], 'a' + 99 % 26);
  EXPECT_FALSE(writer->append("more").ok());
  EXPECT_FALSE(writer->commit().ok());
  EXPECT_THAT(list_dir(), ::testing::ElementsAre("big"));
}

TEST_F(FileUtilTest, AtomicFileWriterWithoutCommitLeavesNothing) {
  ASSERT_TRUE(write_file_atomically(path("out"), "previous").ok());
  {
    auto writer = AtomicFileWriter::open(path("out"));
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->append("half of the ne").ok());
    AtomicFileWriter moved = std::move(writer).value();
    EXPECT_EQ(list_dir().size(), 2u);
  }
  EXPECT_EQ(*read_file(path("out"), 100), "previous");
  EXPECT_THAT(list_dir(), ::testing::ElementsAre("out"));
}

TEST_F(FileUtilTest, MappedFileMapsContents) {
  write_plain("m.bin", "mapped bytes");
  auto mapped = MappedFile::open(path("m.bin"));
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  ASSERT_EQ(mapped->size(), 12u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size()),
            "mapped bytes");
  EXPECT_EQ(mapped->path(), path("m.bin"));

  MappedFile moved = std::move(mapped).value();
  EXPECT_EQ(moved.size(), 12u);
  MappedFile assigned;
  assigned = std::move(moved);
  EXPECT_EQ(moved.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(std::memcmp(assigned.data(), "mapped", 6), 0);
}

TEST_F(FileUtilTest, ReleasedMappedPagesReadBackUnchanged) {
  // Several pages of distinct bytes; release all of them, then a range starting mid-page.
  std::string bytes(5 * 4096 + 123, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + i / 4096);
  write_plain("pages.bin", bytes);
  auto mapped = MappedFile::open(path("pages.bin"));
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  auto contents = [&] {
    return std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size());
  };
  ASSERT_EQ(contents(), bytes);
  release_mapped_pages(mapped->data(), mapped->size());
  EXPECT_EQ(contents(), bytes);
  release_mapped_pages(mapped->data() + 100, 3 * 4096);
  release_mapped_pages(mapped->data() + 5, 10);  // no whole page inside: nothing to do
  release_mapped_pages(nullptr, 4096);
  EXPECT_EQ(contents(), bytes);

  Tensor t = Tensor::borrow_mapped(DType::kU8, {static_cast<int64_t>(bytes.size())}, mapped->data(),
                                   nullptr);
  t.release_resident();
  EXPECT_EQ(std::memcmp(t.data(), bytes.data(), bytes.size()), 0);
  // A tensor in ordinary memory keeps its bytes resident (release is a no-op there).
  Tensor heap = t.clone();
  heap.release_resident();
  EXPECT_EQ(std::memcmp(heap.data(), bytes.data(), bytes.size()), 0);
}

TEST_F(FileUtilTest, MappedFileAcceptsEmptyFile) {
  write_plain("empty", "");
  auto mapped = MappedFile::open(path("empty"));
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  EXPECT_EQ(mapped->size(), 0u);
}

TEST_F(FileUtilTest, MappedFileErrorsNameThePath) {
  auto missing = MappedFile::open(path("missing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(path("missing")));

  auto dir = MappedFile::open(dir_);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(dir.status().message(), HasSubstr(dir_));

  auto device = MappedFile::open("/dev/null");
  ASSERT_FALSE(device.ok());
  EXPECT_THAT(device.status().message(), HasSubstr("/dev/null"));
}

}  // namespace
}  // namespace kiln
