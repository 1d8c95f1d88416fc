#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "kiln/onnx/importer.h"
#include "kiln/onnx/tensor_proto.h"
#include "tests/support/onnx/test_models.h"

namespace kiln::onnx_import {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::ModelBuilder;
namespace fs = std::filesystem;

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string float_bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// root/model/      the model directory, with weights.bin (24 bytes of data at offset 64)
// root/outside/    a directory the model must not read from
// Each test runs twice: external data read in at import, and left in its file
// (ImportOptions::weights_by_reference) with every check and error the same.
class ExternalData : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kiln_external_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    model_dir_ = root_ / "model";
    fs::create_directories(model_dir_ / "sub");
    fs::create_directories(root_ / "outside");
    write_bytes(model_dir_ / "weights.bin", std::string(64, 'x') + float_bytes(kValues));
    write_bytes(model_dir_ / "sub" / "w.bin", float_bytes(kValues));
    write_bytes(root_ / "outside" / "secret.bin", float_bytes(kValues));
  }
  void TearDown() override { fs::remove_all(root_); }

  // x[2,3] + w[2,3] where w lives in external data.
  ModelBuilder model(const std::string& location, const std::string& offset = "",
                     const std::string& length = "") {
    ModelBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {int64_t{2}, int64_t{3}});
    onnx::TensorProto* w = b.graph().add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(2);
    w->add_dims(3);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* key, const std::string& value) {
      auto* entry = w->add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    };
    add("location", location);
    if (!offset.empty()) add("offset", offset);
    if (!length.empty()) add("length", length);
    b.node("Add", {"x", "w"}, {"y"});
    b.output("y");
    return b;
  }

  StatusOr<ir::Graph> import_model(const ModelBuilder& b) {
    std::string path = (model_dir_ / "model.onnx").string();
    write_bytes(path, b.bytes());
    ImportOptions options;
    options.weights_by_reference = by_reference();
    return import_file(path, options);
  }

  static bool by_reference() { return GetParam(); }

  // Rewrites `path` in place with one byte changed, later than the file system's timestamp tick
  // (a clock tick of a few milliseconds).
  static void rewrite_in_place(const fs::path& path) {
    wait_past_timestamp_tick();
    flip_a_byte(path);
  }
  static void wait_past_timestamp_tick() {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  static void flip_a_byte(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bytes[bytes.size() / 2] ^= 0x55;
    std::ofstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  static void expect_error(const StatusOr<ir::Graph>& g, StatusCode code,
                           const std::string& detail) {
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), code) << g.status().to_string();
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'w'"), HasSubstr(detail)));
  }

  const std::vector<float> kValues{1, 2, 3, 4, 5, 6};
  fs::path root_;
  fs::path model_dir_;
};

TEST_P(ExternalData, ReadsOffsetAndLength) {
  auto g = import_model(model("weights.bin", "64", "24"));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto w = g->find_value("w");
  ASSERT_TRUE(w && g->is_constant(*w));
  auto values = g->value(*w).constant->values<float>();
  EXPECT_EQ(std::vector<float>(values.begin(), values.end()), kValues);
}

TEST_P(ExternalData, ReadsWholeFileInSubdirectory) {
  auto g = import_model(model("sub/w.bin"));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->value(*g->find_value("w")).constant->values<float>()[5], 6.0f);
}

TEST_P(ExternalData, SymlinkInsideModelDirIsAllowed) {
  fs::create_symlink("sub/w.bin", model_dir_ / "alias.bin");
  auto g = import_model(model("alias.bin"));
  EXPECT_TRUE(g.ok()) << g.status().to_string();
}

TEST_P(ExternalData, RefusesAbsolutePath) {
  std::string secret = (root_ / "outside" / "secret.bin").string();
  expect_error(import_model(model(secret)), StatusCode::kInvalidArgument, "absolute");
}

TEST_P(ExternalData, RefusesDotDot) {
  expect_error(import_model(model("../outside/secret.bin")), StatusCode::kInvalidArgument, "'..'");
  expect_error(import_model(model("sub/../../outside/secret.bin")), StatusCode::kInvalidArgument,
               "'..'");
}

TEST_P(ExternalData, RefusesSymlinkEscapingModelDir) {
  fs::create_symlink(root_ / "outside" / "secret.bin", model_dir_ / "link.bin");
  expect_error(import_model(model("link.bin")), StatusCode::kInvalidArgument, "outside");
  fs::create_directory_symlink(root_ / "outside", model_dir_ / "linkdir");
  expect_error(import_model(model("linkdir/secret.bin")), StatusCode::kInvalidArgument, "outside");
}

TEST_P(ExternalData, RefusesRangesBeyondTheFile) {
  expect_error(import_model(model("weights.bin", "1000")), StatusCode::kOutOfRange, "weights.bin");
  expect_error(import_model(model("weights.bin", "64", "4000")), StatusCode::kOutOfRange,
               "beyond the end");
  expect_error(import_model(model("weights.bin", "18446744073709551615", "24")),
               StatusCode::kOutOfRange, "beyond the end");
}

TEST_P(ExternalData, RefusesLengthMismatch) {
  expect_error(import_model(model("weights.bin", "64", "20")), StatusCode::kInvalidArgument,
               "20 bytes");
  expect_error(import_model(model("weights.bin")), StatusCode::kInvalidArgument, "88 bytes");
}

TEST_P(ExternalData, RefusesBadKeysAndMissingFiles) {
  expect_error(import_model(model("weights.bin", "-5")), StatusCode::kInvalidArgument, "offset");
  expect_error(import_model(model("weights.bin", "12abc")), StatusCode::kInvalidArgument, "offset");
  expect_error(import_model(model("missing.bin")), StatusCode::kNotFound, "missing.bin");
  expect_error(import_model(model("sub")), StatusCode::kInvalidArgument, "not a regular file");
  expect_error(import_model(model("")), StatusCode::kInvalidArgument, "location");
}

TEST_P(ExternalData, RefusedWithoutModelDirectory) {
  std::string bytes = model("weights.bin", "64", "24").bytes();
  auto g = import_bytes(bytes.data(), bytes.size(), "");
  expect_error(g, StatusCode::kInvalidArgument, "without a model directory");
  auto with_dir = import_bytes(bytes.data(), bytes.size(), model_dir_.string());
  EXPECT_TRUE(with_dir.ok()) << with_dir.status().to_string();
}

// By reference, a constant holds its range of the file: a file rewritten after the import shows
// in source_unchanged(). Read in, the constant is its own copy.
TEST_P(ExternalData, ByReferenceAConstantStaysTiedToItsFile) {
  auto g = import_model(model("weights.bin", "64", "24"));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const Tensor w = *g->value(*g->find_value("w")).constant;
  EXPECT_TRUE(w.source_unchanged().ok());
  rewrite_in_place(model_dir_ / "weights.bin");
  Status unchanged = w.source_unchanged();
  EXPECT_EQ(unchanged.ok(), !by_reference()) << unchanged.to_string();
  if (by_reference()) {
    EXPECT_THAT(unchanged.message(), HasSubstr("weights.bin"));
  }
}

// A big raw_data in the model file itself is left there too (the importer refers to it in place),
// at whatever alignment protobuf put it; its values are the same either way.
TEST_P(ExternalData, ByReferenceBigRawDataStaysInTheModelFile) {
  std::vector<float> values(3000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25f - 7.0f;
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {int64_t{3000}});
  b.initializer("w", {3000}, values);
  b.node("Add", {"x", "w"}, {"y"});
  b.output("y");
  auto g = import_model(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const Tensor w = *g->value(*g->find_value("w")).constant;
  auto read = w.values<float>();
  EXPECT_EQ(std::vector<float>(read.begin(), read.end()), values);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data()) % 64, 0u);
  rewrite_in_place(model_dir_ / "model.onnx");
  EXPECT_EQ(w.source_unchanged().ok(), !by_reference());
}

// A model saved as one file per tensor: the first ExternalDataFiles::kMaxFiles files are mapped,
// the rest read in; every value is right either way.
TEST_P(ExternalData, ByReferenceMapsABoundedNumberOfFiles) {
  const size_t count = ExternalDataFiles::kMaxFiles + 6;
  ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {int64_t{2}, int64_t{3}});
  std::string sum = "x";
  for (size_t i = 0; i < count; ++i) {
    const std::string name = "w" + std::to_string(i);
    write_bytes(model_dir_ / (name + ".bin"), float_bytes({1, 2, 3, 4, 5, static_cast<float>(i)}));
    onnx::TensorProto* w = b.graph().add_initializer();
    w->set_name(name);
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(2);
    w->add_dims(3);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* location = w->add_external_data();
    location->set_key("location");
    location->set_value(name + ".bin");
    const std::string next = "s" + std::to_string(i);
    b.node("Add", {sum, name}, {next});
    sum = next;
  }
  b.output(sum);
  auto g = import_model(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::vector<Tensor> constants;
  for (size_t i = 0; i < count; ++i) {
    const Tensor w = *g->value(*g->find_value("w" + std::to_string(i))).constant;
    ASSERT_EQ(w.values<float>()[5], static_cast<float>(i));
    constants.push_back(w);
  }
  wait_past_timestamp_tick();
  for (size_t i = 0; i < count; ++i) flip_a_byte(model_dir_ / ("w" + std::to_string(i) + ".bin"));
  size_t tied = 0;
  for (const Tensor& w : constants) tied += w.source_unchanged().ok() ? 0 : 1;
  EXPECT_EQ(tied, by_reference() ? ExternalDataFiles::kMaxFiles : 0);
}

INSTANTIATE_TEST_SUITE_P(ReadInOrByReference, ExternalData, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "ByReference" : "ReadIn";
                         });

}  // namespace
}  // namespace kiln::onnx_import
