#include "kiln/tooling/npy.h"

#include <cmath>
#include <cstring>
#include <utility>

#include <gtest/gtest.h>

#include "tests/support/files.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using ::kiln::testing::from_hex;
using ::kiln::testing::make_tensor;
using ::kiln::testing::TempDir;

// Written by numpy 1.24 (np.save, or np.lib.format.write_array for versions 2.0 and 3.0).
// 144 bytes
const std::string kNumpyF32 = from_hex(
    "934e554d5059010076007b276465736372273a20273c6634272c2027666f727472616e5f6f72646572273a20"
    "46616c73652c20277368617065273a2028322c2032292c207d20202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020200a0000c03f"
    "000000c00000c07f0000807f");
// 176 bytes
const std::string kNumpyF64 = from_hex(
    "934e554d5059010076007b276465736372273a20273c6638272c2027666f727472616e5f6f72646572273a20"
    "46616c73652c20277368617065273a2028322c2033292c207d20202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020200a9a999999"
    "9999b93f9c7500883ce437fe01000000000000000000000000000080000000000000f0ff0000000000000440");
// 136 bytes
const std::string kNumpyI64Scalar = from_hex(
    "934e554d5059010076007b276465736372273a20273c6938272c2027666f727472616e5f6f72646572273a20"
    "46616c73652c20277368617065273a2028292c207d2020202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020200affffffff"
    "ffffdfff");
// 144 bytes
const std::string kNumpyI32 = from_hex(
    "934e554d5059010076007b276465736372273a20273c6934272c2027666f727472616e5f6f72646572273a20"
    "46616c73652c20277368617065273a2028342c292c207d202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020200a01000000"
    "feffffffffffff7f00000080");
// 130 bytes
const std::string kNumpyI8 = from_hex(
    "934e554d5059010076007b276465736372273a20277c6931272c2027666f727472616e5f6f72646572273a20"
    "46616c73652c20277368617065273a2028322c292c207d202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020200a807f");
// 128 bytes
const std::string kNumpyU8Empty = from_hex(
    "934e554d5059010076007b276465736372273a20277c7531272c2027666f727472616e5f6f72646572273a20"
    "46616c73652c20277368617065273a2028302c2033292c207d20202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020200a");
// 131 bytes
const std::string kNumpyBool = from_hex(
    "934e554d5059010076007b276465736372273a20277c6231272c2027666f727472616e5f6f72646572273a20"
    "46616c73652c20277368617065273a2028332c292c207d202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020200a010001");
// 140 bytes
const std::string kNumpyV2 = from_hex(
    "934e554d50590200740000007b276465736372273a20273c6634272c2027666f727472616e5f6f7264657227"
    "3a2046616c73652c20277368617065273a2028332c292c207d20202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020200a0000803f"
    "0000004000004040");
// 140 bytes
const std::string kNumpyV3 = from_hex(
    "934e554d50590300740000007b276465736372273a20273c6634272c2027666f727472616e5f6f7264657227"
    "3a2046616c73652c20277368617065273a2028332c292c207d20202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020200a0000803f"
    "0000004000004040");
// 136 bytes
const std::string kNumpyBigEndian = from_hex(
    "934e554d5059010076007b276465736372273a20273e6634272c2027666f727472616e5f6f72646572273a20"
    "46616c73652c20277368617065273a2028322c292c207d202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020200a3f800000"
    "40000000");
// 152 bytes
const std::string kNumpyFortran = from_hex(
    "934e554d5059010076007b276465736372273a20273c6634272c2027666f727472616e5f6f72646572273a20"
    "547275652c20277368617065273a2028322c2033292c207d2020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020200a00000000"
    "000040400000803f00008040000000400000a040");

// A .npy file with a hand-written header dict (padded like numpy's) followed by `data`.
std::string make_npy(std::string_view dict, std::string_view data, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header(dict);
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (size_t i = 0; i < prefix - 8; ++i) {
    out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  }
  return out + header + std::string(data);
}

Status parse_status(std::string_view bytes) { return parse_npy(bytes, "t.npy").status(); }

TEST(Npy, ReadsFilesWrittenByNumpy) {
  auto f = parse_npy(kNumpyF32, "f.npy");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->dtype(), DType::kF32);
  EXPECT_EQ(f->shape(), (ConcreteShape{2, 2}));
  EXPECT_EQ(f->values<float>()[0], 1.5f);
  EXPECT_EQ(f->values<float>()[1], -2.0f);
  EXPECT_TRUE(std::isnan(f->values<float>()[2]));
  EXPECT_EQ(f->values<float>()[3], INFINITY);

  auto d = parse_npy(kNumpyF64, "d.npy");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->shape(), (ConcreteShape{2, 3}));
  EXPECT_EQ(d->values<double>()[0], 0.1);
  EXPECT_EQ(d->values<double>()[1], -1e300);
  EXPECT_EQ(d->values<double>()[2], 5e-324);
  EXPECT_TRUE(std::signbit(d->values<double>()[3]));
  EXPECT_EQ(d->values<double>()[4], -INFINITY);

  auto i64 = parse_npy(kNumpyI64Scalar, "s.npy");
  ASSERT_TRUE(i64.ok()) << i64.status().to_string();
  EXPECT_EQ(i64->dtype(), DType::kI64);
  EXPECT_EQ(i64->rank(), 0);
  EXPECT_EQ(i64->values<int64_t>()[0], -9007199254740993);

  auto i32 = parse_npy(kNumpyI32, "i.npy");
  ASSERT_TRUE(i32.ok()) << i32.status().to_string();
  EXPECT_EQ(std::vector<int32_t>(i32->values<int32_t>().begin(), i32->values<int32_t>().end()),
            (std::vector<int32_t>{1, -2, 2147483647, -2147483647 - 1}));

  auto i8 = parse_npy(kNumpyI8, "b.npy");
  ASSERT_TRUE(i8.ok()) << i8.status().to_string();
  EXPECT_EQ(i8->dtype(), DType::kI8);
  EXPECT_EQ(i8->values<int8_t>()[0], -128);
  EXPECT_EQ(i8->values<int8_t>()[1], 127);

  auto u8 = parse_npy(kNumpyU8Empty, "e.npy");
  ASSERT_TRUE(u8.ok()) << u8.status().to_string();
  EXPECT_EQ(u8->dtype(), DType::kU8);
  EXPECT_EQ(u8->shape(), (ConcreteShape{0, 3}));
  EXPECT_EQ(u8->element_count(), 0);

  auto b = parse_npy(kNumpyBool, "b.npy");
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->dtype(), DType::kBool);
  EXPECT_EQ(b->shape(), (ConcreteShape{3}));
  EXPECT_EQ(b->values<uint8_t>()[0], 1);
  EXPECT_EQ(b->values<uint8_t>()[1], 0);
}

TEST(Npy, ReadsVersions2And3) {
  for (const std::string* bytes : {&kNumpyV2, &kNumpyV3}) {
    auto t = parse_npy(*bytes, "v.npy");
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(t->shape(), (ConcreteShape{3}));
    EXPECT_EQ(t->values<float>()[2], 3.0f);
  }
}

TEST(Npy, WritesExactlyWhatNumpyWrites) {
  for (const std::string* fixture : {&kNumpyF32, &kNumpyF64, &kNumpyI64Scalar, &kNumpyI32,
                                     &kNumpyI8, &kNumpyU8Empty, &kNumpyBool}) {
    auto t = parse_npy(*fixture, "fixture.npy");
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    auto bytes = serialize_npy(*t);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    EXPECT_EQ(*bytes, *fixture);
  }
}

template <typename T>
void expect_round_trip(DType dtype, ConcreteShape shape, std::vector<T> values) {
  Tensor t = make_tensor<T>(dtype, shape, values);
  auto bytes = serialize_npy(t);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto header = serialize_npy_header(t);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->size() % 64, 0u);
  EXPECT_EQ(bytes->size(), header->size() + t.byte_size());
  auto back = parse_npy(*bytes, "rt.npy");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->dtype(), dtype);
  EXPECT_EQ(back->shape(), shape);
  ASSERT_EQ(back->byte_size(), t.byte_size());
  EXPECT_EQ(std::memcmp(back->data(), t.data(), t.byte_size()), 0) << dtype_name(dtype);
}

TEST(Npy, RoundTripsEveryDtype) {
  expect_round_trip<float>(DType::kF32, {2, 3}, {0.1f, -0.0f, NAN, INFINITY, -INFINITY, 1e-45f});
  expect_round_trip<double>(DType::kF64, {3}, {0.1, -1e308, NAN});
  expect_round_trip<int64_t>(DType::kI64, {2, 1}, {INT64_MIN, INT64_MAX});
  expect_round_trip<int32_t>(DType::kI32, {1, 1, 2}, {INT32_MIN, 7});
  expect_round_trip<int8_t>(DType::kI8, {3}, {-128, 0, 127});
  expect_round_trip<uint8_t>(DType::kU8, {2}, {0, 255});
  expect_round_trip<uint8_t>(DType::kBool, {2, 2}, {0, 1, 1, 0});
  expect_round_trip<int16_t>(DType::kI16, {3}, {INT16_MIN, -1, INT16_MAX});
  expect_round_trip<uint16_t>(DType::kU16, {2}, {0, UINT16_MAX});
  expect_round_trip<uint32_t>(DType::kU32, {2}, {1, UINT32_MAX});
  expect_round_trip<uint64_t>(DType::kU64, {1, 2}, {0, UINT64_MAX});
  // f16 bit patterns: 1, -2, +inf, a NaN, the smallest subnormal, 65504.
  expect_round_trip<uint16_t>(DType::kF16, {2, 3},
                              {0x3c00, 0xc000, 0x7c00, 0x7e01, 0x0001, 0x7bff});
  expect_round_trip<float>(DType::kF32, {}, {42.0f});
  expect_round_trip<float>(DType::kF32, {0}, {});
  expect_round_trip<int64_t>(DType::kI64, {4, 0, 2}, {});
}

TEST(Npy, WritesVersion2WhenTheHeaderIsHuge) {
  // 25000 dims of 1 make a header past 65535 bytes.
  auto t = Tensor::create(DType::kF32, ConcreteShape(25000, 1));
  ASSERT_TRUE(t.ok());
  auto bytes = serialize_npy(*t);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ((*bytes)[6], '\x02');
  auto back = parse_npy(*bytes, "big.npy");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->rank(), 25000);
}

TEST(Npy, WritesNumpyDescrForNarrowAndUnsignedTypes) {
  const std::pair<DType, std::string_view> cases[] = {{DType::kF16, "'<f2'"},
                                                      {DType::kI16, "'<i2'"},
                                                      {DType::kU16, "'<u2'"},
                                                      {DType::kU32, "'<u4'"},
                                                      {DType::kU64, "'<u8'"}};
  for (const auto& [dtype, descr] : cases) {
    auto header = serialize_npy_header(Tensor::create(dtype, {1}).value());
    ASSERT_TRUE(header.ok()) << header.status().to_string();
    EXPECT_NE(header->find(descr), std::string::npos) << dtype_name(dtype) << ": " << *header;
  }
  // Half-precision data as numpy writes it: 0.5 and -inf.
  auto h = parse_npy(make_npy("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",
                              std::string_view("\x00\x38\x00\xfc", 4)),
                     "h.npy");
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->dtype(), DType::kF16);
  EXPECT_EQ(element_as_double(*h, 0), 0.5);
  EXPECT_EQ(element_as_double(*h, 1), -INFINITY);
}

TEST(Npy, RefusesBf16NamingTheDtype) {
  auto t = Tensor::create(DType::kBF16, {2});
  ASSERT_TRUE(t.ok());
  Status s = serialize_npy(*t).status();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("bf16"), std::string::npos) << s.to_string();
}

TEST(Npy, RefusesBigEndian) {
  Status s = parse_npy(kNumpyBigEndian, "be.npy").status();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("big-endian"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("be.npy"), std::string::npos) << s.to_string();
}

TEST(Npy, RefusesFortranOrder) {
  Status s = parse_npy(kNumpyFortran, "f.npy").status();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("fortran_order True"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("f.npy"), std::string::npos) << s.to_string();
}

TEST(Npy, RefusesEveryTruncation) {
  for (size_t size = 0; size < kNumpyF32.size(); ++size) {
    Status s = parse_npy(std::string_view(kNumpyF32).substr(0, size), "cut.npy").status();
    EXPECT_FALSE(s.ok()) << size;
    EXPECT_NE(s.message().find("cut.npy"), std::string::npos) << size << ": " << s.to_string();
  }
  Status s =
      parse_npy(std::string_view(kNumpyF32).substr(0, kNumpyF32.size() - 1), "cut.npy").status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("needs 16 data bytes, file has 15"), std::string::npos)
      << s.to_string();
}

TEST(Npy, RefusesTrailingBytes) {
  Status s = parse_status(kNumpyF32 + "x");
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("trailing"), std::string::npos) << s.to_string();
}

TEST(Npy, AcceptsHeaderVariantsNumpyAccepts) {
  const std::string data(8, '\0');
  for (std::string_view dict : {
           "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,)}",
           "{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}",
           "{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 2 , ) , }",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }",
       }) {
    auto t = parse_npy(make_npy(dict, data), "ok.npy");
    ASSERT_TRUE(t.ok()) << dict << ": " << t.status().to_string();
    EXPECT_EQ(t->element_count(), 2) << dict;
  }
  auto u8 = parse_npy(make_npy("{'descr': '<u1', 'fortran_order': False, 'shape': (1,), }", "\x07"),
                      "u.npy");
  ASSERT_TRUE(u8.ok()) << u8.status().to_string();
  EXPECT_EQ(u8->values<uint8_t>()[0], 7);
}

TEST(Npy, RefusesMalformedHeaders) {
  struct Case {
    std::string dict;
    StatusCode code;
    std::string_view message;
  };
  const std::string ok_tail = "'fortran_order': False, 'shape': (2,), }";
  const std::vector<Case> cases = {
      {"{'descr': '<f4', 'fortran_order': False, }", StatusCode::kInvalidArgument,
       "missing key 'shape'"},
      {"{'descr': '<f4', 'shape': (2,), }", StatusCode::kInvalidArgument,
       "missing key 'fortran_order'"},
      {"{'fortran_order': False, 'shape': (2,), }", StatusCode::kInvalidArgument,
       "missing key 'descr'"},
      {"{'descr': '<f4', 'descr': '<f4', " + ok_tail, StatusCode::kInvalidArgument,
       "duplicate key 'descr'"},
      {"{'descr': '<f4', 'extra': 1, " + ok_tail, StatusCode::kInvalidArgument,
       "unexpected key 'extra'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", StatusCode::kInvalidArgument,
       "not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", StatusCode::kInvalidArgument,
       "negative dim"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,), }", StatusCode::kInvalidArgument,
       "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", StatusCode::kInvalidArgument,
       "expected a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
       StatusCode::kOutOfRange, "too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
       StatusCode::kOutOfRange, "too large"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", StatusCode::kInvalidArgument,
       "True or False"},
      {"{'descr': '<f4', " + ok_tail + " junk", StatusCode::kInvalidArgument,
       "after the header dict"},
      {"{'descr': '<f4, " + ok_tail, StatusCode::kInvalidArgument, "'fortran_order'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,), }", StatusCode::kInvalidArgument,
       "expected ',' or '}'"},
      {"['descr', '<f4']", StatusCode::kInvalidArgument, "expected '{'"},
      {"{'descr': '<c8', " + ok_tail, StatusCode::kUnimplemented, "'<c8' is not supported"},
      {"{'descr': '<U3', " + ok_tail, StatusCode::kUnimplemented, "'<U3' is not supported"},
      {"{'descr': '|O', " + ok_tail, StatusCode::kInvalidArgument, "malformed 'descr'"},
      {"{'descr': '|f4', " + ok_tail, StatusCode::kUnimplemented, "byte order '|'"},
      {"{'descr': '>i8', " + ok_tail, StatusCode::kUnimplemented, "big-endian"},
      {"{'descr': '*f4', " + ok_tail, StatusCode::kInvalidArgument, "malformed 'descr'"},
      {"{'descr': [('a', '<f4')], " + ok_tail, StatusCode::kUnimplemented, "structured"},
  };
  for (const Case& c : cases) {
    Status s = parse_status(make_npy(c.dict, std::string(8, '\0')));
    EXPECT_EQ(s.code(), c.code) << c.dict << "\n" << s.to_string();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << c.dict << "\n" << s.to_string();
    EXPECT_NE(s.message().find("t.npy"), std::string::npos) << s.to_string();
  }
}

TEST(Npy, RefusesBadPrefixes) {
  EXPECT_EQ(parse_status("not a numpy file at all").code(), StatusCode::kInvalidArgument);
  std::string v4 = kNumpyF32;
  v4[6] = 4;
  Status s = parse_status(v4);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("version 4.0"), std::string::npos) << s.to_string();
  std::string long_header = kNumpyF32;
  long_header[8] = '\xff';
  long_header[9] = '\xff';
  EXPECT_EQ(parse_status(long_header).code(), StatusCode::kDataLoss);
}

TEST(Npy, RefusesBoolBytesOtherThanZeroAndOne) {
  Status s = parse_status(
      make_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", "\x01\x02"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bool element 1 has byte value 2"), std::string::npos)
      << s.to_string();
}

TEST(Npy, ReadsFilesAndNamesMissingOnes) {
  TempDir dir;
  testing::write_plain_file(dir.file("a.npy"), kNumpyF32);
  auto t = read_npy_file(dir.file("a.npy"));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->shape(), (ConcreteShape{2, 2}));

  Status missing = read_npy_file(dir.file("missing.npy")).status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.to_string().find("missing.npy"), std::string::npos) << missing.to_string();

  Status too_big = read_npy_file(dir.file("a.npy"), 100).status();
  EXPECT_EQ(too_big.code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace kiln
