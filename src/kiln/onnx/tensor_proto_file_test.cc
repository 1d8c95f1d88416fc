#include "kiln/onnx/tensor_proto_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "onnx/onnx-data_pb.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_import {
namespace {

namespace fs = std::filesystem;

std::string temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("kiln_pb_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir.string();
}

TEST(TensorProtoFile, RoundTripsEveryDtype) {
  const std::string dir = temp_dir();
  for (int code = 1; code <= kLastDTypeCode; ++code) {
    const auto dtype = static_cast<DType>(code);
    Tensor tensor = Tensor::create(dtype, {2, 3}).value();
    for (size_t i = 0; i < tensor.byte_size(); ++i)
      tensor.mutable_data()[i] = std::byte(dtype == DType::kBool ? i % 2 : i * 7);
    const std::string path = dir + "/t_" + std::string(dtype_name(dtype)) + ".pb";
    ASSERT_TRUE(write_tensor_proto_file(path, tensor, "x").ok());
    auto read = read_tensor_proto_file(path);
    ASSERT_TRUE(read.ok()) << read.status().to_string();
    EXPECT_EQ(read->name, "x");
    EXPECT_EQ(read->tensor.dtype(), dtype);
    EXPECT_EQ(read->tensor.shape(), (ConcreteShape{2, 3}));
    EXPECT_EQ(std::memcmp(read->tensor.data(), tensor.data(), tensor.byte_size()), 0)
        << dtype_name(dtype);
  }
  fs::remove_all(dir);
}

TEST(TensorProtoFile, ReadsTypedFieldsLikeTheBackendTestData) {
  onnx::TensorProto proto;
  proto.set_data_type(onnx::TensorProto::FLOAT);
  proto.add_dims(3);
  for (float v : {1.5f, -2.0f, 0.25f}) proto.add_float_data(v);
  auto parsed = parse_tensor_proto(proto.SerializeAsString(), "typed.pb", "");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->tensor.values<float>()[1], -2.0f);
}

// f16 and bf16 sit in int32_data as their uint16 bit patterns; u32/u64 in uint64_data.
TEST(TensorProtoFile, ReadsNarrowAndUnsignedTypesFromRawDataAndTypedFields) {
  struct Case {
    onnx::TensorProto::DataType onnx_type;
    DType dtype;
    std::vector<uint64_t> values;
  };
  const std::vector<Case> cases = {
      {onnx::TensorProto::FLOAT16, DType::kF16, {0x3c00, 0xc000, 0x7c00}},    // 1, -2, inf
      {onnx::TensorProto::BFLOAT16, DType::kBF16, {0x3f80, 0xc000, 0x7fc0}},  // 1, -2, NaN
      {onnx::TensorProto::UINT16, DType::kU16, {0, 1, 65535}},
      {onnx::TensorProto::UINT32, DType::kU32, {0, 7, 4294967295u}},
      {onnx::TensorProto::UINT64, DType::kU64, {0, 9, 18446744073709551615u}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(dtype_name(c.dtype));
    const size_t size = dtype_size(c.dtype);
    onnx::TensorProto raw;
    raw.set_data_type(c.onnx_type);
    raw.add_dims(3);
    std::string bytes;
    for (uint64_t v : c.values) bytes.append(reinterpret_cast<const char*>(&v), size);  // LE host
    raw.set_raw_data(bytes);

    onnx::TensorProto typed;
    typed.set_data_type(c.onnx_type);
    typed.add_dims(3);
    for (uint64_t v : c.values) {
      if (size == 2) {
        typed.add_int32_data(static_cast<int32_t>(v));
      } else {
        typed.add_uint64_data(v);
      }
    }
    for (const onnx::TensorProto* proto : {&raw, &typed}) {
      auto parsed = parse_tensor_proto(proto->SerializeAsString(), "t.pb", "");
      ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
      ASSERT_EQ(parsed->tensor.dtype(), c.dtype);
      for (int i = 0; i < 3; ++i) {
        uint64_t got = 0;
        std::memcpy(&got, parsed->tensor.data() + i * size, size);
        EXPECT_EQ(got, c.values[i]) << "element " << i;
      }
    }
  }
  auto f16 = parse_tensor_proto(
      [] {
        onnx::TensorProto p;
        p.set_data_type(onnx::TensorProto::FLOAT16);
        p.add_dims(1);
        p.add_int32_data(0x3800);  // 0.5
        return p.SerializeAsString();
      }(),
      "h.pb", "");
  ASSERT_TRUE(f16.ok()) << f16.status().to_string();
  EXPECT_EQ(element_as_double(f16->tensor, 0), 0.5);
}

TEST(TensorProtoFile, TypedValueOutOfRangeIsAnError) {
  onnx::TensorProto proto;
  proto.set_data_type(onnx::TensorProto::UINT16);
  proto.add_dims(2);
  proto.add_int32_data(1);
  proto.add_int32_data(65536);
  auto parsed = parse_tensor_proto(proto.SerializeAsString(), "big.pb", "");
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("int32_data[1] = 65536 does not fit in u16"),
            std::string::npos)
      << parsed.status().message();

  onnx::TensorProto wide;
  wide.set_data_type(onnx::TensorProto::UINT32);
  wide.add_dims(1);
  wide.add_uint64_data(uint64_t{1} << 32);
  EXPECT_EQ(parse_tensor_proto(wide.SerializeAsString(), "wide.pb", "").status().code(),
            StatusCode::kInvalidArgument);

  onnx::TensorProto wrong_field;  // u64 values must be in uint64_data
  wrong_field.set_data_type(onnx::TensorProto::UINT64);
  wrong_field.add_dims(1);
  wrong_field.add_int64_data(1);
  EXPECT_EQ(parse_tensor_proto(wrong_field.SerializeAsString(), "wrong.pb", "").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(TensorProtoFile, BadFilesAreErrorsNamingTheFile) {
  const std::string dir = temp_dir();
  auto missing = read_tensor_proto_file(dir + "/missing.pb");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().to_string().find("missing.pb"), std::string::npos);

  std::ofstream(dir + "/garbage.pb") << "\xff\xff\xff\xff not a proto";
  auto garbage = read_tensor_proto_file(dir + "/garbage.pb");
  EXPECT_EQ(garbage.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(garbage.status().message().find("garbage.pb"), std::string::npos);

  onnx::TensorProto short_data;
  short_data.set_data_type(onnx::TensorProto::FLOAT);
  short_data.add_dims(4);
  short_data.set_raw_data(std::string(8, '\0'));
  auto mismatch = parse_tensor_proto(short_data.SerializeAsString(), "short.pb", "");
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("short.pb"), std::string::npos);

  onnx::TensorProto strings;
  strings.set_data_type(onnx::TensorProto::STRING);
  strings.add_string_data("a");
  auto string_status = parse_tensor_proto(strings.SerializeAsString(), "s.pb", "").status();
  EXPECT_EQ(string_status.code(), StatusCode::kUnimplemented);
  EXPECT_NE(string_status.message().find("STRING"), std::string::npos) << string_status.message();

  // A sequence given where a tensor is expected (kiln run --input @seq.pb) says so.
  onnx::SequenceProto sequence;
  sequence.set_elem_type(onnx::SequenceProto::TENSOR);
  for (int i = 0; i < 2; ++i) *sequence.add_tensor_values() = short_data;
  auto seq_status = parse_tensor_proto(sequence.SerializeAsString(), "seq.pb", "").status();
  EXPECT_EQ(seq_status.code(), StatusCode::kUnimplemented);
  EXPECT_NE(seq_status.message().find("'seq.pb' holds a sequence of 2 tensors"), std::string::npos)
      << seq_status.message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::onnx_import
