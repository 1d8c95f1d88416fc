#include "kiln/onnx/tensor_proto_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

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
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI64, DType::kI32, DType::kI8, DType::kU8, DType::kBool}) {
    Tensor tensor = Tensor::create(dtype, {2, 3}).value();
    for (size_t i = 0; i < tensor.byte_size(); ++i) tensor.mutable_data()[i] = std::byte(dtype == DType::kBool ? i % 2 : i * 7);
    const std::string path = dir + "/t_" + std::string(dtype_name(dtype)) + ".pb";
    ASSERT_TRUE(write_tensor_proto_file(path, tensor, "x").ok());
    auto read = read_tensor_proto_file(path);
    ASSERT_TRUE(read.ok()) << read.status().to_string();
    EXPECT_EQ(read->name, "x");
    EXPECT_EQ(read->tensor.dtype(), dtype);
    EXPECT_EQ(read->tensor.shape(), (ConcreteShape{2, 3}));
    EXPECT_EQ(std::memcmp(read->tensor.data(), tensor.data(), tensor.byte_size()), 0) << dtype_name(dtype);
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
  EXPECT_EQ(parse_tensor_proto(strings.SerializeAsString(), "s.pb", "").status().code(), StatusCode::kUnimplemented);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::onnx_import
