#include "kiln/tooling/tensor_io.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <limits>

#include <gtest/gtest.h>

#include "kiln/tooling/comparator.h"
#include "kiln/tooling/npy.h"
#include "kiln/tooling/tensor_spec.h"
#include "tests/support/files.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using ::kiln::testing::f32;
using ::kiln::testing::make_tensor;
using ::kiln::testing::read_plain_file;
using ::kiln::testing::TempDir;
using ::kiln::testing::write_plain_file;

TEST(TensorIo, FileFormatFromExtension) {
  EXPECT_EQ(*tensor_file_format("a/b.npy"), TensorFileFormat::kNpy);
  EXPECT_EQ(*tensor_file_format("B.NPY"), TensorFileFormat::kNpy);
  EXPECT_EQ(*tensor_file_format("x.bin"), TensorFileFormat::kRaw);
  for (std::string_view bad : {"x.txt", "x", "npy", "x.npy.tmp", ""}) {
    auto f = tensor_file_format(bad);
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_NE(f.status().message().find(fmt::format("'{}'", bad)), std::string::npos);
  }
}

TEST(TensorIo, WritesAndReadsBinAndNpy) {
  TempDir dir;
  Tensor tensor = make_tensor<double>(DType::kF64, {2, 2}, {0.1, -0.0, NAN, -INFINITY});
  ASSERT_TRUE(write_tensor_file(dir.file("t.bin"), tensor).ok());
  EXPECT_EQ(read_plain_file(dir.file("t.bin")).size(), 32u);
  auto raw = read_raw_tensor_file(dir.file("t.bin"), DType::kF64, {2, 2});
  ASSERT_TRUE(raw.ok()) << raw.status().to_string();
  EXPECT_TRUE(bitwise_equal(*raw, tensor));

  ASSERT_TRUE(write_tensor_file(dir.file("t.npy"), tensor).ok());
  auto npy = read_npy_file(dir.file("t.npy"));
  ASSERT_TRUE(npy.ok()) << npy.status().to_string();
  EXPECT_TRUE(bitwise_equal(*npy, tensor));
  EXPECT_EQ(read_plain_file(dir.file("t.npy")), *serialize_npy(tensor));

  // The explicit format wins over the extension.
  ASSERT_TRUE(write_tensor_file(dir.file("t.dat"), tensor, TensorFileFormat::kNpy).ok());
  EXPECT_TRUE(read_npy_file(dir.file("t.dat")).ok());
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"t.bin", "t.dat", "t.npy"}));
}

TEST(TensorIo, WritesEmptyAndScalarTensors) {
  TempDir dir;
  for (const Tensor& t : {f32({0, 4}, {}), f32({}, {3.5f})}) {
    ASSERT_TRUE(write_tensor_file(dir.file("t.npy"), t).ok());
    auto back = read_npy_file(dir.file("t.npy"));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_TRUE(bitwise_equal(*back, t));
    ASSERT_TRUE(write_tensor_file(dir.file("t.bin"), t).ok());
    EXPECT_EQ(read_plain_file(dir.file("t.bin")).size(), t.byte_size());
  }
}

TEST(TensorIo, UnknownExtensionWritesNothing) {
  TempDir dir;
  Status s = write_tensor_file(dir.file("t.txt"), f32({1}, {1}));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("t.txt"), std::string::npos) << s.to_string();
  EXPECT_TRUE(dir.entries().empty());
}

TEST(TensorIo, FailedWriteOfABadTensorKeepsTheOldFile) {
  TempDir dir;
  const std::string path = dir.file("out.npy");
  write_plain_file(path, "old contents");
  auto bf16 = Tensor::create(DType::kBF16, {2});  // numpy has no bfloat16
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(write_tensor_file(path, *bf16).code(), StatusCode::kUnimplemented);
  Status invalid = write_tensor_file(path, Tensor());  // claims a scalar, has no storage
  EXPECT_EQ(invalid.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(invalid.message().find("no valid storage"), std::string::npos) << invalid.to_string();
  EXPECT_EQ(read_plain_file(path), "old contents");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"out.npy"}));
}

// Makes writes past `bytes` fail with EFBIG (instead of killing the process with SIGXFSZ) for the
// scope's lifetime: a disk that fills up half way through a write, even for root.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &old_limit_);
    rlimit limit = old_limit_;
    limit.rlim_cur = bytes;
    ok_ = setrlimit(RLIMIT_FSIZE, &limit) == 0;
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_limit_);
    std::signal(SIGXFSZ, old_handler_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit old_limit_{};
  void (*old_handler_)(int) = nullptr;
  bool ok_ = false;
};

TEST(TensorIo, WriteFailingHalfWayKeepsTheOldFile) {
  TempDir dir;
  Tensor big = f32({256, 1024}, std::vector<float>(256 * 1024, 1.0f));  // 1 MiB
  for (std::string name : {"out.npy", "out.bin"}) {
    const std::string path = dir.file(name);
    write_plain_file(path, "old contents");
    Status s;
    {
      FileSizeLimit limit(64 * 1024);
      ASSERT_TRUE(limit.ok());
      s = write_tensor_file(path, big);
    }
    EXPECT_FALSE(s.ok()) << name;
    EXPECT_NE(s.to_string().find(name), std::string::npos) << s.to_string();
    EXPECT_EQ(read_plain_file(path), "old contents") << name;
  }
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"out.bin", "out.npy"}));
}

TEST(TensorIo, UnwritableDirectoryKeepsTheOldFile) {
  TempDir dir;
  const std::string path = dir.file("out.npy");
  write_plain_file(path, "old contents");
  Status missing_dir = write_tensor_file(dir.file("no/such/dir/out.npy"), f32({1}, {1}));
  EXPECT_FALSE(missing_dir.ok());
  EXPECT_NE(missing_dir.to_string().find("no/such/dir/out.npy"), std::string::npos)
      << missing_dir.to_string();

  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  ASSERT_EQ(chmod(dir.file("").c_str(), 0555), 0);
  Status s = write_tensor_file(path, f32({1}, {1}));
  chmod(dir.file("").c_str(), 0755);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(read_plain_file(path), "old contents");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"out.npy"}));
}

TEST(TensorIo, RawReadChecksSizeBeforeAllocating) {
  TempDir dir;
  write_plain_file(dir.file("small.bin"), "abcd");
  // 4e15 bytes would never fit in memory; the size check must fail first.
  auto t = read_raw_tensor_file(dir.file("small.bin"), DType::kF32, {1000, 1000, 1000});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(t.status().message().find(
                "holds 4 bytes, but 1000x1000x1000xf32 needs exactly 4000000000 bytes"),
            std::string::npos)
      << t.status().to_string();
  auto huge = read_raw_tensor_file(dir.file("small.bin"), DType::kF32, {1 << 30, 1 << 30});
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfRange) << huge.status().to_string();
}

TEST(FormatTensor, SmallTensors) {
  EXPECT_EQ(format_tensor(f32({2, 3}, {1, 2, 3, 4, 5, 6})),
            "2x3xf32\n[0,0]: 1 2 3\n[1,0]: 4 5 6\n");
  EXPECT_EQ(format_tensor(f32({}, {0.1f})), "f32\n0.1\n");
  EXPECT_EQ(format_tensor(f32({0, 3}, {})), "0x3xf32\n");
  EXPECT_EQ(format_tensor(f32({4}, {NAN, INFINITY, -INFINITY, -0.0f})),
            "4xf32\n[0]: nan inf -inf -0\n");
  EXPECT_EQ(format_tensor(make_tensor<uint8_t>(DType::kBool, {3}, {1, 0, 1})),
            "3xbool\n[0]: 1 0 1\n");
  EXPECT_EQ(format_tensor(make_tensor<int64_t>(DType::kI64, {2}, {INT64_MIN, 7})),
            "2xi64\n[0]: -9223372036854775808 7\n");
  EXPECT_EQ(format_tensor(make_tensor<uint8_t>(DType::kU8, {1}, {255})), "1xu8\n[0]: 255\n");
  EXPECT_EQ(format_tensor(make_tensor<int8_t>(DType::kI8, {1}, {-128})), "1xi8\n[0]: -128\n");
  EXPECT_EQ(format_tensor(make_tensor<uint16_t>(DType::kF16, {3}, {0x3c00, 0xc000, 0x7c00})),
            "3xf16\n[0]: 1 -2 inf\n");
  EXPECT_EQ(format_tensor(make_tensor<uint16_t>(DType::kBF16, {3}, {0x3f80, 0xbfc0, 0x7fc0})),
            "3xbf16\n[0]: 1 -1.5 nan\n");
  EXPECT_EQ(format_tensor(make_tensor<uint64_t>(DType::kU64, {1}, {UINT64_MAX})),
            "1xu64\n[0]: 18446744073709551615\n");
  EXPECT_EQ(format_tensor(make_tensor<int16_t>(DType::kI16, {2}, {-32768, 5})),
            "2xi16\n[0]: -32768 5\n");
}

TEST(FormatTensor, WrapsLongRows) {
  std::vector<float> values(25);
  for (int i = 0; i < 25; ++i) values[i] = static_cast<float>(i);
  EXPECT_EQ(format_tensor(f32({25}, values), 30),
            "25xf32\n"
            "[0]: 0 1 2 3 4 5 6 7 8 9 10 11\n"
            "[12]: 12 13 14 15 16 17 18 19\n"
            "[20]: 20 21 22 23 24\n");
  // A value wider than the line still gets a line of its own.
  EXPECT_EQ(format_tensor(f32({2}, {123456, 7}), 5), "2xf32\n[0]: 123456\n[1]: 7\n");
}

TEST(FormatTensor, ValuesReadBackExactly) {
  // Every printed value, pasted into an --input spec, gives the same bits back.
  std::vector<float> values = {0.1f,        1.0f / 3, -1e-45f, 3.4028235e38f,
                               16777217.0f, -0.0f,    NAN,     INFINITY};
  Tensor t = f32({2, 4}, values);
  std::string text = format_tensor(t);
  std::string spec = "2x4xf32=";
  for (size_t line_start = text.find('\n') + 1; line_start < text.size();) {
    size_t line_end = text.find('\n', line_start);
    size_t colon = text.find(':', line_start);
    spec += text.substr(colon + 1, line_end - colon - 1) + " ";
    line_start = line_end + 1;
  }
  auto back = parse_tensor_spec(spec);
  ASSERT_TRUE(back.ok()) << spec << ": " << back.status().to_string();
  EXPECT_TRUE(bitwise_equal(*back, t)) << text;

  Tensor d = make_tensor<double>(DType::kF64, {}, {0.1 + 0.2});
  EXPECT_EQ(format_tensor(d), "f64\n0.30000000000000004\n");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Over 1000 values, --output=- shows the first and last 3 along each dim, as numpy does.
TEST(FormatTensorSummary, ShowsTheEndsOfEachDimOverAThousandValues) {
  std::vector<float> values(8 * 200);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 200);
  const Tensor t = testing::f32({8, 200}, values);
  EXPECT_EQ(format_tensor_summary(t),
            "8x200xf32\n"
            "[0,0]: 0 1 2 ... 197 198 199\n"
            "[1,0]: 0 1 2 ... 197 198 199\n"
            "[2,0]: 0 1 2 ... 197 198 199\n"
            "...\n"
            "[5,0]: 0 1 2 ... 197 198 199\n"
            "[6,0]: 0 1 2 ... 197 198 199\n"
            "[7,0]: 0 1 2 ... 197 198 199\n"
            "(1600 values; the first and last 3 along each dim shown, --print-all shows all)\n");
  // Up to 1000 values: every one, as format_tensor.
  const Tensor small = testing::f32({10, 100}, std::vector<float>(1000, 1.0f));
  EXPECT_EQ(format_tensor_summary(small), format_tensor(small));
}

}  // namespace
}  // namespace kiln
