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

// Sets the writers' temporary files to be named (as on file systems without O_TMPFILE) for the
// scope.
class NamedTempFiles {
 public:
  explicit NamedTempFiles(bool named) { set_named_temp_files_for_testing(named); }
  ~NamedTempFiles() { set_named_temp_files_for_testing(false); }
};

TEST_F(FileUtilTest, AtomicFileWriterStreamsAndCommits) {
  for (bool named : {false, true}) {
    SCOPED_TRACE(named ? "named temporary file" : "anonymous temporary file");
    NamedTempFiles mode(named);
    auto writer = AtomicFileWriter::open(path("big"));
    ASSERT_TRUE(writer.ok()) << writer.status().to_string();
    EXPECT_FALSE(writer->streaming());
    if (named) {
      EXPECT_THAT(writer->temp_path(), HasSubstr(path("big") + ".tmp."));
    } else {
      EXPECT_EQ(writer->temp_path(), "");
    }
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(writer->append(std::string(1000, 'a' + i % 26)).ok());
    }
    EXPECT_EQ(writer->bytes_written(), 100000u);
    EXPECT_FALSE(read_file(path("big"), 1 << 20).ok()) << "visible before commit";
    EXPECT_EQ(list_dir().size(), named ? 1u : 0u);
    ASSERT_TRUE(writer->commit().ok());
    EXPECT_TRUE(writer->temp_path().empty());
    auto got = read_file(path("big"), 1 << 20);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->size(), 100000u);
    EXPECT_EQ((*got)[99999], 'a' + 99 % 26);
    EXPECT_FALSE(writer->append("more").ok());
    EXPECT_FALSE(writer->commit().ok());
    EXPECT_THAT(list_dir(), ::testing::ElementsAre("big"));
    ::unlink(path("big").c_str());
  }
}

TEST_F(FileUtilTest, AtomicFileWriterOverwritesOnlyWhatItAppended) {
  auto writer = AtomicFileWriter::open(path("out"));
  ASSERT_TRUE(writer.ok()) << writer.status().to_string();
  ASSERT_TRUE(writer->append("0000 then the body").ok());
  ASSERT_TRUE(writer->overwrite(0, "HEAD").ok());
  Status past = writer->overwrite(10, std::string(9, 'x'));
  EXPECT_EQ(past.code(), StatusCode::kOutOfRange) << past.to_string();
  EXPECT_THAT(past.message(), HasSubstr("only 18 were written"));
  EXPECT_EQ(writer->overwrite(19, "").code(), StatusCode::kOutOfRange);
  ASSERT_TRUE(writer->overwrite(18, "").ok()) << "an empty range at the end";
  ASSERT_TRUE(writer->commit().ok());
  EXPECT_EQ(*read_file(path("out"), 100), "HEAD then the body");
  EXPECT_EQ(writer->overwrite(0, "x").code(), StatusCode::kFailedPrecondition);

  // A stream cannot go back.
  auto stream = AtomicFileWriter::open("/dev/null");
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  ASSERT_TRUE(stream->streaming());
  ASSERT_TRUE(stream->append("0000").ok());
  Status streamed = stream->overwrite(0, "HEAD");
  EXPECT_EQ(streamed.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(streamed.message(), HasSubstr("it is a stream"));
}

TEST_F(FileUtilTest, AtomicFileWriterWithoutCommitLeavesNothing) {
  for (bool named : {false, true}) {
    SCOPED_TRACE(named ? "named temporary file" : "anonymous temporary file");
    NamedTempFiles mode(named);
    ASSERT_TRUE(write_file_atomically(path("out"), "previous").ok());
    {
      auto writer = AtomicFileWriter::open(path("out"));
      ASSERT_TRUE(writer.ok());
      ASSERT_TRUE(writer->append("half of the ne").ok());
      AtomicFileWriter moved = std::move(writer).value();
      EXPECT_EQ(list_dir().size(), named ? 2u : 1u);
    }
    EXPECT_EQ(*read_file(path("out"), 100), "previous");
    EXPECT_THAT(list_dir(), ::testing::ElementsAre("out"));
  }
}

}  // namespace
}  // namespace kiln
