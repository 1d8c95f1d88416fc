#include "kiln/tooling/tensor_spec.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "kiln/tooling/comparator.h"
#include "kiln/tooling/npy.h"
#include "tests/support/files.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using ::kiln::testing::f32;
using ::kiln::testing::make_tensor;
using ::kiln::testing::TempDir;
using ::kiln::testing::write_plain_file;

Tensor parse_ok(std::string_view spec) {
  auto t = parse_tensor_spec(spec);
  EXPECT_TRUE(t.ok()) << spec << ": " << t.status().to_string();
  return t.ok() ? *t : Tensor();
}

// The error for `spec`, checked to have `code` and to contain `needle` and the quoted spec.
std::string spec_error(std::string_view spec, StatusCode code, std::string_view needle) {
  auto t = parse_tensor_spec(spec);
  EXPECT_FALSE(t.ok()) << spec;
  if (t.ok()) return "";
  std::string text = t.status().to_string();
  EXPECT_EQ(t.status().code(), code) << text;
  EXPECT_NE(text.find(needle), std::string::npos) << "missing '" << needle << "' in " << text;
  EXPECT_NE(text.find(spec.substr(0, 40)), std::string::npos) << "spec not quoted in " << text;
  return text;
}

TEST(TensorType, ParsesShapesAndDtypes) {
  auto t = parse_tensor_type("1x3x224x224xf32");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, (TensorType{DType::kF32, {1, 3, 224, 224}}));
  EXPECT_EQ(*parse_tensor_type("f64"), (TensorType{DType::kF64, {}}));
  EXPECT_EQ(*parse_tensor_type("0x3xu8"), (TensorType{DType::kU8, {0, 3}}));
  EXPECT_EQ(*parse_tensor_type("2xbool"), (TensorType{DType::kBool, {2}}));
  EXPECT_EQ(*parse_tensor_type("7xi64"), (TensorType{DType::kI64, {7}}));
  EXPECT_EQ(format_tensor_type(DType::kF32, {1, 3, 224, 224}), "1x3x224x224xf32");
  EXPECT_EQ(format_tensor_type(DType::kI8, {}), "i8");
}

TEST(TensorType, RejectsBadTypes) {
  struct Case {
    std::string_view text;
    StatusCode code;
    std::string_view needle;
  };
  for (const Case& c : std::vector<Case>{
           {"", StatusCode::kInvalidArgument, "is empty"},
           {"2x3", StatusCode::kInvalidArgument, "has no dtype"},
           {"2x3xf33", StatusCode::kInvalidArgument, "unknown dtype 'f33' (known: f32,"},
           {"2x3xF32", StatusCode::kInvalidArgument, "unknown dtype 'F32'"},
           {"2x-1xf32", StatusCode::kInvalidArgument, "negative dim '-1'"},
           {"2xabcxf32", StatusCode::kInvalidArgument, "dim 'abc' is not a non-negative integer"},
           {"2x1.5xf32", StatusCode::kInvalidArgument, "dim '1.5'"},
           {"+2xf32", StatusCode::kInvalidArgument, "dim '+2'"},
           {" 2xf32", StatusCode::kInvalidArgument, "dim ' 2'"},
           {"2xxf32", StatusCode::kInvalidArgument, "empty dim at position 1"},
           {"99999999999999999999xf32", StatusCode::kOutOfRange, "is too large"},
           {"4294967296x4294967296xf32", StatusCode::kOutOfRange, "overflows"},
           {"1152921504606846976x8xf64", StatusCode::kOutOfRange, "overflows"},
       }) {
    auto t = parse_tensor_type(c.text);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().code(), c.code) << t.status().to_string();
    EXPECT_NE(t.status().message().find(c.needle), std::string::npos) << t.status().to_string();
    EXPECT_NE(t.status().message().find(fmt::format("'{}'", c.text)), std::string::npos)
        << t.status().to_string();
  }
}

TEST(TensorSpec, InlineValues) {
  Tensor t = parse_ok("2x2xf32=1 2 3 4");
  EXPECT_TRUE(bitwise_equal(t, f32({2, 2}, {1, 2, 3, 4})));
  EXPECT_TRUE(bitwise_equal(parse_ok("2x2xf32=1,2,3,4"), t));
  EXPECT_TRUE(bitwise_equal(parse_ok("2x2xf32=  1, 2,\t3\n 4 "), t));
  EXPECT_TRUE(bitwise_equal(parse_ok("4xf32=+1 2.0 3e0 0.4e1"), f32({4}, {1, 2, 3, 4})));
  EXPECT_TRUE(bitwise_equal(parse_ok("f32=5"), f32({}, {5})));
  EXPECT_TRUE(bitwise_equal(parse_ok("0x3xf32="), f32({0, 3}, {})));
  EXPECT_TRUE(bitwise_equal(parse_ok("3x0xi64=  "), make_tensor<int64_t>(DType::kI64, {3, 0}, {})));
}

TEST(TensorSpec, NonFiniteFloats) {
  Tensor t = parse_ok("4xf32=nan inf -inf -0");
  auto v = t.values<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], INFINITY);
  EXPECT_EQ(v[2], -INFINITY);
  EXPECT_TRUE(std::signbit(v[3]));
  Tensor d = parse_ok("2xf64=NaN -Infinity");
  EXPECT_TRUE(std::isnan(d.values<double>()[0]));
  EXPECT_EQ(d.values<double>()[1], -INFINITY);
}

TEST(TensorSpec, FloatRangeAndPrecision) {
  // Overflow is an error, not a silent inf.
  spec_error("f32=1e39", StatusCode::kInvalidArgument, "value 1 of 1 ('1e39') is not a valid f32");
  spec_error("f64=1e999", StatusCode::kInvalidArgument, "not a valid f64");
  EXPECT_EQ(parse_ok("f64=1e39").values<double>()[0], 1e39);
  // Underflow rounds toward zero like strtod.
  EXPECT_EQ(parse_ok("f32=1e-50").values<float>()[0], 0.0f);
  EXPECT_EQ(parse_ok("f32=1e-45").values<float>()[0], std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(parse_ok("f64=0.1").values<double>()[0], 0.1);
  EXPECT_EQ(parse_ok("f32=0.1").values<float>()[0], 0.1f);
  EXPECT_EQ(parse_ok("f32=16777217").values<float>()[0], 16777216.0f);
}

TEST(TensorSpec, IntegersAndBool) {
  EXPECT_TRUE(bitwise_equal(parse_ok("2xi64=-9223372036854775808 9223372036854775807"),
                            make_tensor<int64_t>(DType::kI64, {2}, {INT64_MIN, INT64_MAX})));
  EXPECT_TRUE(bitwise_equal(parse_ok("2xi32=-2147483648 +7"),
                            make_tensor<int32_t>(DType::kI32, {2}, {INT32_MIN, 7})));
  EXPECT_TRUE(
      bitwise_equal(parse_ok("2xi8=-128 127"), make_tensor<int8_t>(DType::kI8, {2}, {-128, 127})));
  EXPECT_TRUE(
      bitwise_equal(parse_ok("2xu8=0 255"), make_tensor<uint8_t>(DType::kU8, {2}, {0, 255})));
  EXPECT_TRUE(bitwise_equal(parse_ok("4xbool=1 0 true false"),
                            make_tensor<uint8_t>(DType::kBool, {4}, {1, 0, 1, 0})));
  spec_error("xi8=128", StatusCode::kInvalidArgument, "empty dim at position 0");
  spec_error("i8=128", StatusCode::kInvalidArgument, "('128') is not a valid i8");
  spec_error("u8=-1", StatusCode::kInvalidArgument, "('-1') is not a valid u8");
  spec_error("i64=9223372036854775808", StatusCode::kInvalidArgument, "not a valid i64");
  spec_error("i32=1.5", StatusCode::kInvalidArgument, "('1.5') is not a valid i32");
  spec_error("i32=1e3", StatusCode::kInvalidArgument, "not a valid i32");
  spec_error("i32=0x10", StatusCode::kInvalidArgument, "not a valid i32");
  spec_error("bool=2", StatusCode::kInvalidArgument, "not a valid bool (0, 1, true or false)");
}

TEST(TensorSpec, InlineErrors) {
  spec_error("2x2xf32=1 2 3", StatusCode::kInvalidArgument, "2x2xf32 needs 4 values, got 3");
  spec_error("2x2xf32=1 2 3 4 5", StatusCode::kInvalidArgument, "needs 4 values, got 5");
  spec_error("f32=", StatusCode::kInvalidArgument, "f32 needs 1 value, got 0");
  spec_error("2x2xf32=1 2 x 4", StatusCode::kInvalidArgument,
             "value 3 of 4 ('x') is not a valid f32");
  spec_error("2xf32=1 2abc", StatusCode::kInvalidArgument, "('2abc')");
  spec_error("2xf32=0x1p3 1", StatusCode::kInvalidArgument, "('0x1p3')");
  spec_error("2xf32=+-1 1", StatusCode::kInvalidArgument, "('+-1')");
  spec_error("2xf32=1,,2", StatusCode::kInvalidArgument, "empty value around a ','");
  spec_error("2xf32=,1 2", StatusCode::kInvalidArgument, "empty value around a ','");
  spec_error("2xf32=1 2,", StatusCode::kInvalidArgument, "empty value around a ','");
  // A huge shape with few values fails on the count, without allocating.
  spec_error("100000x100000x100000xf32=1 2", StatusCode::kInvalidArgument,
             "needs 1000000000000000 values, got 2");
}

// One value fills the whole tensor (IREE's splat); its size is bounded like a file's.
TEST(TensorSpec, OneValueFillsEveryElement) {
  Tensor t = parse_ok("2x3x5xf32=1.5");
  ASSERT_EQ(t.shape(), (ConcreteShape{2, 3, 5}));
  for (float v : t.values<float>()) EXPECT_EQ(v, 1.5f);
  Tensor i = parse_ok("7xi64=-3");
  for (int64_t v : i.values<int64_t>()) EXPECT_EQ(v, -3);
  Tensor b = parse_ok("3x3xbool=true");
  for (uint8_t v : b.values<uint8_t>()) EXPECT_EQ(v, 1);
  spec_error("2x2xf32=x", StatusCode::kInvalidArgument, "the value 'x' is not a valid f32");
  spec_error("100000x100000x100000xf32=1", StatusCode::kOutOfRange, "over the limit of");
}

TEST(TensorSpec, LongSpecsAreShortenedInErrors) {
  std::string spec = "1000xf32=";
  for (int i = 0; i < 999; ++i) spec += "1 ";
  auto t = parse_tensor_spec(spec);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("...' (2007 chars)"), std::string::npos)
      << t.status().to_string();
  EXPECT_LT(t.status().message().size(), 300u);
}

TEST(TensorSpec, InlineValuesOfNarrowAndUnsignedDtypes) {
  EXPECT_TRUE(
      bitwise_equal(parse_ok("2xu16=1,2"), make_tensor<uint16_t>(DType::kU16, {2}, {1, 2})));
  EXPECT_TRUE(bitwise_equal(parse_ok("2xu16=0 65535"),
                            make_tensor<uint16_t>(DType::kU16, {2}, {0, 65535})));
  EXPECT_TRUE(bitwise_equal(parse_ok("2xi16=-32768 32767"),
                            make_tensor<int16_t>(DType::kI16, {2}, {-32768, 32767})));
  EXPECT_TRUE(bitwise_equal(parse_ok("u32=4294967295"),
                            make_tensor<uint32_t>(DType::kU32, {}, {4294967295u})));
  EXPECT_TRUE(bitwise_equal(parse_ok("u64=18446744073709551615"),
                            make_tensor<uint64_t>(DType::kU64, {}, {UINT64_MAX})));
  // f16: 1, -2, 65504 (max), inf, the smallest subnormal; 1 + 2^-11 ties to even (1).
  EXPECT_TRUE(bitwise_equal(
      parse_ok("6xf16=1 -2 65504 inf 5.9604645e-8 1.00048828125"),
      make_tensor<uint16_t>(DType::kF16, {6}, {0x3c00, 0xc000, 0x7bff, 0x7c00, 0x0001, 0x3c00})));
  EXPECT_TRUE(bitwise_equal(parse_ok("3xbf16=1 -2 3e38"),
                            make_tensor<uint16_t>(DType::kBF16, {3}, {0x3f80, 0xc000, 0x7f62})));
  spec_error("2xu16=1 65536", StatusCode::kInvalidArgument, "('65536') is not a valid u16");
  spec_error("2xu16=1 -1", StatusCode::kInvalidArgument, "('-1') is not a valid u16");
  spec_error("u64=-1", StatusCode::kInvalidArgument, "is not a valid u64");
  spec_error("i16=32768", StatusCode::kInvalidArgument, "is not a valid i16");
  spec_error("f16=65520", StatusCode::kInvalidArgument, "('65520') is not a valid f16");
  spec_error("bf16=3.4e38", StatusCode::kInvalidArgument, "is not a valid bf16");
}

TEST(TensorSpec, SyntaxErrorsQuoteTheSpec) {
  spec_error("", StatusCode::kInvalidArgument, "empty tensor spec");
  spec_error("2x2xf32", StatusCode::kInvalidArgument, "missing '='");
  spec_error("input.npy", StatusCode::kInvalidArgument, "did you mean '@input.npy'?");
  spec_error("2x2xf33=1 2 3 4", StatusCode::kInvalidArgument, "unknown dtype 'f33'");
  spec_error("2x-2xf32=1 2 3 4", StatusCode::kInvalidArgument, "negative dim '-2'");
  spec_error("axbxf32=1", StatusCode::kInvalidArgument, "dim 'a' is not a non-negative integer");
  spec_error("4294967296x4294967296xf32=1", StatusCode::kOutOfRange, "overflows");
  spec_error("=1 2", StatusCode::kInvalidArgument, "tensor type '' is empty");
}

TEST(TensorSpec, RawFiles) {
  TempDir dir;
  Tensor expected = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  write_plain_file(dir.file("in.bin"),
                   std::string_view(reinterpret_cast<const char*>(expected.data()), 24));
  EXPECT_TRUE(bitwise_equal(parse_ok("2x3xf32=@" + dir.file("in.bin")), expected));
  // Any extension but .npy and .pb is raw.
  write_plain_file(dir.file("in.raw"), std::string(6, '\x01'));
  EXPECT_TRUE(bitwise_equal(parse_ok("6xbool=@" + dir.file("in.raw")),
                            make_tensor<uint8_t>(DType::kBool, {6}, {1, 1, 1, 1, 1, 1})));

  std::string text = spec_error("2x2xf32=@" + dir.file("in.bin"), StatusCode::kDataLoss,
                                "holds 24 bytes, but 2x2xf32 needs exactly 16 bytes");
  EXPECT_NE(text.find(dir.file("in.bin")), std::string::npos) << text;
  spec_error("2x4xf32=@" + dir.file("in.bin"), StatusCode::kDataLoss,
             "holds 24 bytes, but 2x4xf32 needs exactly 32 bytes");
  spec_error("2x3xf64=@" + dir.file("in.bin"), StatusCode::kDataLoss, "needs exactly 48 bytes");
  spec_error("0xf32=@" + dir.file("in.bin"), StatusCode::kDataLoss,
             "holds 24 bytes, but 0xf32 needs exactly 0 bytes");

  write_plain_file(dir.file("bad_bool.bin"), "\x01\x05");
  spec_error("2xbool=@" + dir.file("bad_bool.bin"), StatusCode::kInvalidArgument,
             "bool element 1 has byte value 5");
}

TEST(TensorSpec, FileErrors) {
  TempDir dir;
  std::string text =
      spec_error("2xf32=@" + dir.file("missing.bin"), StatusCode::kNotFound, "missing.bin");
  EXPECT_NE(text.find("in tensor spec"), std::string::npos) << text;
  spec_error("@" + dir.file("missing.npy"), StatusCode::kNotFound, "missing.npy");
  spec_error("2xf32=@", StatusCode::kInvalidArgument, "missing file name after '@'");
  spec_error("@", StatusCode::kInvalidArgument, "missing file name after '@'");
  spec_error("@" + dir.file("in.bin"), StatusCode::kInvalidArgument,
             "a raw file holds no shape or dtype");
  spec_error("2xf32=@" + dir.file("in.pb"), StatusCode::kUnimplemented, "TensorProto");
  spec_error("2xf32=@" + dir.file(""), StatusCode::kInvalidArgument, "");  // a directory
}

TEST(TensorSpec, NpyFiles) {
  TempDir dir;
  Tensor tensor = make_tensor<int32_t>(DType::kI32, {2, 2}, {1, -2, 3, -4});
  auto bytes = serialize_npy(tensor);
  ASSERT_TRUE(bytes.ok());
  write_plain_file(dir.file("a.npy"), *bytes);
  EXPECT_TRUE(bitwise_equal(parse_ok("@" + dir.file("a.npy")), tensor));
  EXPECT_TRUE(bitwise_equal(parse_ok("2x2xi32=@" + dir.file("a.npy")), tensor));
  write_plain_file(dir.file("UPPER.NPY"), *bytes);
  EXPECT_TRUE(bitwise_equal(parse_ok("@" + dir.file("UPPER.NPY")), tensor));

  std::string text = spec_error("4xi32=@" + dir.file("a.npy"), StatusCode::kInvalidArgument,
                                "the spec says 4xi32 but");
  EXPECT_NE(text.find("holds 2x2xi32"), std::string::npos) << text;
  spec_error("2x2xi64=@" + dir.file("a.npy"), StatusCode::kInvalidArgument, "holds 2x2xi32");

  write_plain_file(dir.file("cut.npy"), bytes->substr(0, bytes->size() - 1));
  spec_error("@" + dir.file("cut.npy"), StatusCode::kDataLoss, "cut.npy");
}

TEST(OutputSpec, Parses) {
  EXPECT_EQ(*parse_output_spec("-"), OutputSpec{});
  EXPECT_EQ(*parse_output_spec("@out.bin"),
            (OutputSpec{.to_stdout = false, .path = "out.bin", .format = TensorFileFormat::kRaw}));
  EXPECT_EQ(
      *parse_output_spec("@dir/out.NPY"),
      (OutputSpec{.to_stdout = false, .path = "dir/out.NPY", .format = TensorFileFormat::kNpy}));
}

TEST(OutputSpec, RejectsBadSpecs) {
  struct Case {
    std::string_view spec;
    std::string_view needle;
  };
  for (const Case& c : std::vector<Case>{
           {"", "expected '-' (stdout)"},
           {"out.npy", "did you mean '@out.npy'?"},
           {"@", "missing file name"},
           {"@out.txt", "unknown extension"},
           {"@out", "unknown extension"},
           {"--", "expected '-'"},
       }) {
    auto s = parse_output_spec(c.spec);
    ASSERT_FALSE(s.ok()) << c.spec;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.needle), std::string::npos) << s.status().to_string();
    EXPECT_NE(s.status().message().find(fmt::format("'{}'", c.spec)), std::string::npos)
        << s.status().to_string();
  }
}

TEST(OutputSpec, WritesToStdoutAndFiles) {
  TempDir dir;
  Tensor tensor = f32({2}, {0.5f, -1});
  std::FILE* stream = std::tmpfile();
  ASSERT_NE(stream, nullptr);
  ASSERT_TRUE(write_output(OutputSpec{}, tensor, stream).ok());
  std::rewind(stream);
  char buffer[64] = {};
  size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, stream);
  std::fclose(stream);
  EXPECT_EQ(std::string(buffer, n), "2xf32\n[0]: 0.5 -1\n");

  auto spec = parse_output_spec("@" + dir.file("o.npy"));
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(write_output(*spec, tensor, stdout).ok());
  EXPECT_TRUE(bitwise_equal(parse_ok("@" + dir.file("o.npy")), tensor));
  // The round trip the CLI relies on: an output written as .bin reads back as the same input.
  spec = parse_output_spec("@" + dir.file("o.bin"));
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(write_output(*spec, tensor, stdout).ok());
  EXPECT_TRUE(bitwise_equal(parse_ok("2xf32=@" + dir.file("o.bin")), tensor));
}

}  // namespace
}  // namespace kiln
