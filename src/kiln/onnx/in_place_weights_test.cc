// Big initializers of an .onnx file are read from the file straight into kiln's tensors
// (in_place_weights.h): the graph must be the one a plain protobuf parse gives, bit for bit.
#include "kiln/onnx/in_place_weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "kiln/onnx/importer.h"
#include "tests/support/onnx/test_models.h"

namespace kiln::onnx_import {
namespace {

using ::testing::AllOf;
using testing::attr_ints;
using ::testing::HasSubstr;
using testing::ModelBuilder;
namespace fs = std::filesystem;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

std::vector<float> random_values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// x[N,64] -> MatMul(w[64,32], 8 KiB) -> Add(b[32], 128 bytes) -> y, at `opset`; with a Squeeze of
// a [1,32] weight whose axes are an attribute before opset 13 and an input from it on, so that the
// opset converter has to rewrite a node next to the big weights.
ModelBuilder matmul_model(int64_t opset) {
  ModelBuilder b(opset, "matmul");
  b.input("x", kFloat, {std::string("N"), int64_t{64}});
  b.initializer("w", {64, 32}, random_values(64 * 32, 1));
  b.initializer("b", {1, 32}, random_values(32, 2));
  if (opset < 13) {
    attr_ints(b.node("Squeeze", {"b"}, {"b1"}, "squeeze"), "axes", {0});
  } else {
    b.graph().add_initializer()->CopyFrom([] {
      onnx::TensorProto axes;
      axes.set_name("axes");
      axes.set_data_type(onnx::TensorProto::INT64);
      axes.add_dims(1);
      axes.add_int64_data(0);
      return axes;
    }());
    b.node("Squeeze", {"b", "axes"}, {"b1"}, "squeeze");
  }
  b.node("MatMul", {"x", "w"}, {"m"}, "matmul");
  b.node("Add", {"m", "b1"}, {"y"}, "add");
  b.output("y");
  return b;
}

class InPlaceWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln_in_place_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  fs::path dir_;
};

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

void expect_same_constant(const ir::Graph& a, const ir::Graph& b, const std::string& name) {
  const auto ia = a.find_value(name), ib = b.find_value(name);
  ASSERT_TRUE(ia && ib) << name;
  const Tensor& ta = *a.value(*ia).constant;
  const Tensor& tb = *b.value(*ib).constant;
  ASSERT_EQ(ta.shape(), tb.shape()) << name;
  ASSERT_EQ(ta.byte_size(), tb.byte_size()) << name;
  EXPECT_EQ(std::memcmp(ta.data(), tb.data(), ta.byte_size()), 0) << name;
}

TEST_F(InPlaceWeights, OnlyBigInitializersBecomeReferencesToTheFile) {
  const std::string bytes = matmul_model(17).bytes();
  auto rewritten = refer_to_weights_in_place(as_bytes(bytes), "model.onnx", 4096);
  ASSERT_TRUE(rewritten.has_value());
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(*rewritten));
  for (const onnx::TensorProto& t : model.graph().initializer()) {
    if (t.name() != "w") {
      EXPECT_NE(t.data_location(), onnx::TensorProto::EXTERNAL) << t.name();
      continue;
    }
    EXPECT_EQ(t.data_location(), onnx::TensorProto::EXTERNAL);
    EXPECT_FALSE(t.has_raw_data());
    std::map<std::string, std::string> entries;
    for (const auto& e : t.external_data()) entries[e.key()] = e.value();
    EXPECT_EQ(entries["location"], "model.onnx");
    ASSERT_EQ(entries["length"], std::to_string(64 * 32 * sizeof(float)));
    // The offset points at w's bytes in the original file.
    const size_t offset = std::stoul(entries["offset"]);
    onnx::ModelProto original;
    ASSERT_TRUE(original.ParseFromString(bytes));
    EXPECT_EQ(bytes.substr(offset, 64 * 32 * sizeof(float)),
              original.graph().initializer(0).raw_data());
  }
  // Nothing above the threshold: nothing to rewrite.
  EXPECT_FALSE(refer_to_weights_in_place(as_bytes(bytes), "model.onnx", 1 << 20).has_value());
}

TEST_F(InPlaceWeights, FileImportEqualsBytesImportBitForBitAtEveryOpset) {
  for (int64_t opset : {11, 13, 17}) {
    SCOPED_TRACE(opset);
    const std::string bytes = matmul_model(opset).bytes();
    const std::string path = write("model.onnx", bytes);
    auto from_file = import_file(path);
    ASSERT_TRUE(from_file.ok()) << from_file.status().to_string();
    auto from_bytes = import_bytes(bytes.data(), bytes.size(), dir_.string());
    ASSERT_TRUE(from_bytes.ok()) << from_bytes.status().to_string();
    expect_same_constant(*from_file, *from_bytes, "w");
    expect_same_constant(*from_file, *from_bytes, "b");
    EXPECT_EQ(from_file->nodes().size(), from_bytes->nodes().size());
  }
}

// A model file reached through a symlink from another directory (a model cache linking to
// shared files) imports as a plain parse would: its references would point outside the link's
// directory, which external data may not.
TEST_F(InPlaceWeights, ModelReachedThroughASymlinkImports) {
  const std::string bytes = matmul_model(17).bytes();
  const std::string target = write("model.onnx", bytes);
  const fs::path elsewhere = dir_ / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_symlink(target, elsewhere / "linked.onnx");
  auto linked = import_file((elsewhere / "linked.onnx").string());
  ASSERT_TRUE(linked.ok()) << linked.status().to_string();
  auto from_bytes = import_bytes(bytes.data(), bytes.size(), dir_.string());
  ASSERT_TRUE(from_bytes.ok()) << from_bytes.status().to_string();
  expect_same_constant(*linked, *from_bytes, "w");
}

TEST_F(InPlaceWeights, MalformedBytesAreLeftToTheParser) {
  const std::string bytes = matmul_model(17).bytes();
  // Cut inside w's raw_data: the length no longer fits.
  const std::string truncated = bytes.substr(0, bytes.size() / 2);
  EXPECT_FALSE(refer_to_weights_in_place(as_bytes(truncated), "m.onnx", 4096).has_value());
  auto g = import_file(write("truncated.onnx", truncated));
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("not a valid ONNX model"));
  // A group wire type (not in onnx.proto) is not rewritten either.
  EXPECT_FALSE(refer_to_weights_in_place(as_bytes(std::string("\x0b\x0c", 2)), "m.onnx", 0));
  EXPECT_FALSE(refer_to_weights_in_place({}, "m.onnx", 0).has_value());
}

TEST_F(InPlaceWeights, BigInitializerOfTheWrongSizeNamesIt) {
  ModelBuilder b = matmul_model(17);
  b.graph().mutable_initializer(0)->set_raw_data(std::string(8000, '\0'));  // 8192 needed
  auto g = import_file(write("short.onnx", b.bytes()));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("'w'"), HasSubstr("8000 bytes"), HasSubstr("8192")));
}

TEST_F(InPlaceWeights, InitializerAlreadyExternalIsKeptAsItIs) {
  ModelBuilder b = matmul_model(17);
  onnx::TensorProto* w = b.graph().mutable_initializer(0);
  const std::string data = w->raw_data();
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* location = w->add_external_data();
  location->set_key("location");
  location->set_value("w.bin");
  write("w.bin", data);
  // b alone is too small: nothing to rewrite.
  EXPECT_FALSE(refer_to_weights_in_place(as_bytes(b.bytes()), "m.onnx", 4096).has_value());
  auto g = import_file(write("external.onnx", b.bytes()));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const Tensor& t = *g->value(*g->find_value("w")).constant;
  EXPECT_EQ(std::memcmp(t.data(), data.data(), data.size()), 0);
}

}  // namespace
}  // namespace kiln::onnx_import
