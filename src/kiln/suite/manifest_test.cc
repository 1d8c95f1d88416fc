#include "kiln/suite/manifest.h"
#include "kiln/suite/path_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kiln/suite/backend_layout.h"
#include "tests/support/files.h"
#include "tests/support/tensors.h"

namespace kiln::suite {
namespace {

using kiln::testing::TempDir;

class ManifestTest : public ::testing::Test {
 protected:
  ManifestTest() {
    touch("m.onnx");
    touch("in_b1.bin");
    touch("in_b3.bin");
    touch("ref_b1.bin");
    touch("ref_b3.bin");
  }
  void touch(const std::string& name) { std::ofstream(dir_.file(name)) << "x"; }
  StatusOr<Manifest> parse(const std::string& text, ManifestOptions options = {}) {
    return parse_manifest(text, dir_.file("suite.json"), dir_.file(""), options);
  }
  // Parsing must fail with `code`, and the message must hold every fragment.
  void expect_error(const std::string& text, StatusCode code, std::vector<std::string> fragments) {
    auto manifest = parse(text);
    ASSERT_FALSE(manifest.ok()) << text;
    EXPECT_EQ(manifest.status().code(), code) << manifest.status().to_string();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(manifest.status().to_string().find(fragment), std::string::npos)
          << "missing '" << fragment << "' in: " << manifest.status().to_string();
    }
  }
  TempDir dir_;
};

TEST_F(ManifestTest, ReadsEveryField) {
  auto manifest = parse(R"({
    // comments are allowed
    "suite": "demo",
    "defaults": {"tolerance": {"atol": 1e-4}, "dims": {"N": [1, 2]}, "reference": "kiln-reference",
                 "expect": {"cpu": "pass"}},
    "models": [{
      "name": "m1", "path": "m.onnx", "dims": {"N": [1, 3]},
      "inputs": {"x": {"file": "in_b{N}.bin", "shape": ["N", 4]},
                 "y": {"generate": {"distribution": "normal", "seed": 7, "mean": 1, "std": 2}, "dtype": "f64"}},
      "outputs": {"out": {"file": "ref_b{N}.bin", "tolerance": {"rtol": 0.01, "nan": "match"}}, "aux": {}},
      "tolerance": {"rtol": 1e-3},
      "batch_dim": "N", "batch_invariance": "enforce",
      "expect": {"gpu": {"outcome": "fail-compile", "reason": "no kernels yet"}}
    }]
  })");
  ASSERT_TRUE(manifest.ok()) << manifest.status().to_string();
  EXPECT_EQ(manifest->name, "demo");
  ASSERT_EQ(manifest->models.size(), 1u);
  const ModelSpec& m = manifest->models[0];
  EXPECT_EQ(m.name, "m1");
  EXPECT_EQ(m.path, dir_.file("m.onnx"));
  EXPECT_EQ(m.sizes_of("N"), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(m.sizes_of("H"), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(m.reference, ReferenceSource::kKilnReference);
  EXPECT_EQ(m.batch_invariance, BatchInvariance::kEnforce);
  ASSERT_EQ(m.inputs.size(), 2u);
  EXPECT_EQ(m.inputs[0].file, dir_.file("in_b{N}.bin"));
  EXPECT_EQ(m.inputs[0].json_path, "$.models[0].inputs.x");
  ASSERT_TRUE(m.inputs[1].generate.has_value());
  EXPECT_EQ(m.inputs[1].generate->distribution, Generator::Distribution::kNormal);
  EXPECT_EQ(m.inputs[1].generate->seed, 7u);
  EXPECT_EQ(m.inputs[1].generate->stddev, 2);
  EXPECT_EQ(m.inputs[1].dtype, DType::kF64);
  // Output fields over model fields over defaults over built-in.
  Tolerance out = m.tolerance_for("out");
  EXPECT_EQ(out.atol, 1e-4);
  EXPECT_EQ(out.rtol, 0.01);
  EXPECT_TRUE(out.nan_equal);
  Tolerance aux = m.tolerance_for("aux");
  EXPECT_EQ(aux.atol, 1e-4);
  EXPECT_EQ(aux.rtol, 1e-3);
  EXPECT_FALSE(aux.nan_equal);
  EXPECT_EQ(m.expectation("cpu", "m1/dynamic/N=1").outcome, Outcome::kPass);
  EXPECT_EQ(m.expectation("gpu", "m1/dynamic/N=1").outcome, Outcome::kFailCompile);
  EXPECT_EQ(m.expectation("gpu", "m1/dynamic/N=1").reason, "no kernels yet");
  EXPECT_EQ(m.expectation("other", "m1/dynamic/N=1").outcome, Outcome::kPass);
}

// A list of expectations per backend, each for the cases its pattern matches (the --filter
// syntax); the first match applies, a case that none matches is expected to pass.
TEST_F(ManifestTest, ExpectationsPerCase) {
  auto manifest = parse(R"({
    "defaults": {"expect": {"cpu": {"outcome": "fail-run", "reason": "default", "cases": "/bound/"}}},
    "models": [
      {"name": "a", "path": "m.onnx", "dims": {"N": [1, 3]},
       "expect": {"cpu": [{"outcome": "fail-compile", "reason": "dynamic refused", "cases": "a/dynamic/*"},
                          {"outcome": "fail-compare", "reason": "odd sizes", "cases": "*/N=3"},
                          "pass"]}},
      {"name": "b", "path": "m.onnx"}
    ]
  })");
  ASSERT_TRUE(manifest.ok()) << manifest.status().to_string();
  const ModelSpec& a = manifest->models[0];
  EXPECT_EQ(a.expectation("cpu", "a/dynamic/N=3").outcome, Outcome::kFailCompile);
  EXPECT_EQ(a.expectation("cpu", "a/dynamic/N=3").reason, "dynamic refused");
  EXPECT_EQ(a.expectation("cpu", "a/bound/N=3").outcome, Outcome::kFailCompare);
  EXPECT_EQ(a.expectation("cpu", "a/bound/N=1").outcome, Outcome::kPass);
  EXPECT_EQ(a.expectation("cpu", "a").outcome, Outcome::kPass);  // a model-level case
  // The model's list replaces the defaults' entry for that backend; others inherit it.
  const ModelSpec& b = manifest->models[1];
  EXPECT_EQ(b.expectation("cpu", "b/bound/N=1").outcome, Outcome::kFailRun);
  EXPECT_EQ(b.expectation("cpu", "b/dynamic/N=1").outcome, Outcome::kPass);

  expect_error(R"({"models": [{"path": "m.onnx", "expect": {"cpu": []}}]})",
               StatusCode::kInvalidArgument, {"$.models[0].expect.cpu: an empty list"});
  expect_error(
      R"({"models": [{"path": "m.onnx", "expect": {"cpu": [{"outcome": "fail-run", "cases": "x"}]}}]})",
      StatusCode::kInvalidArgument,
      {"$.models[0].expect.cpu[0]: an expected failure needs a \"reason\""});
  expect_error(
      R"({"models": [{"path": "m.onnx", "expect": {"cpu": {"outcome": "pass", "cases": ""}}}]})",
      StatusCode::kInvalidArgument, {"$.models[0].expect.cpu.cases: an empty pattern"});
  expect_error(
      R"({"models": [{"path": "m.onnx", "expect": {"cpu": [{"outcome": "pass", "case": "x"}]}}]})",
      StatusCode::kInvalidArgument, {"$.models[0].expect.cpu[0].case: unknown key"});
}

TEST_F(ManifestTest, DefaultsWhenAlmostNothingIsGiven) {
  auto manifest = parse(R"({"models": [{"path": "m.onnx"}]})");
  ASSERT_TRUE(manifest.ok()) << manifest.status().to_string();
  const ModelSpec& m = manifest->models[0];
  EXPECT_EQ(m.name, "m");
  EXPECT_EQ(m.reference, ReferenceSource::kOnnxRuntime);
  EXPECT_EQ(m.batch_invariance, BatchInvariance::kReport);
  Tolerance t = m.tolerance_for("anything");
  EXPECT_EQ(t.atol, 1e-5);
  EXPECT_EQ(t.rtol, 1e-5);
  EXPECT_FALSE(t.nan_equal);
}

TEST_F(ManifestTest, UnknownKeysNameTheirJsonPath) {
  expect_error(R"({"models": [{"path": "m.onnx", "tolerence": {}}]})", StatusCode::kInvalidArgument,
               {"$.models[0].tolerence: unknown key", "\"tolerance\"", "suite.json"});
  expect_error(R"({"modles": []})", StatusCode::kInvalidArgument, {"$.modles: unknown key"});
  expect_error(R"({"models": [{"path": "m.onnx", "inputs": {"x": {"generate": {"sead": 1}}}}]})",
               StatusCode::kInvalidArgument, {"$.models[0].inputs.x.generate.sead: unknown key"});
  expect_error(R"({"models": [{"path": "m.onnx", "inputs": {"in:0": {"fiel": "a"}}}]})",
               StatusCode::kInvalidArgument, {"$.models[0].inputs[\"in:0\"].fiel: unknown key"});
}

TEST_F(ManifestTest, WrongTypesNameTheirJsonPath) {
  expect_error(R"({"models": {"path": "m.onnx"}})", StatusCode::kInvalidArgument,
               {"$.models: expected an array"});
  expect_error(R"({"models": [{"path": 3}]})", StatusCode::kInvalidArgument,
               {"$.models[0].path: expected a string, got number 3"});
  expect_error(R"({"models": [{"path": "m.onnx", "dims": {"N": [1, "3"]}}]})",
               StatusCode::kInvalidArgument, {"$.models[0].dims.N[1]: expected an integer"});
  expect_error(R"({"models": [{"path": "m.onnx", "dims": {"N": [1.5]}}]})",
               StatusCode::kInvalidArgument, {"$.models[0].dims.N[0]: expected an integer"});
  expect_error(R"({"models": [{"path": "m.onnx", "tolerance": {"atol": true}}]})",
               StatusCode::kInvalidArgument,
               {"$.models[0].tolerance.atol: expected a number, got boolean"});
  expect_error(R"({"models": [{"path": "m.onnx", "reference": "ort"}]})",
               StatusCode::kInvalidArgument,
               {"$.models[0].reference: \"ort\" is not one of", "\"onnxruntime\""});
  expect_error(
      R"({"models": [{"path": "m.onnx", "inputs": {"x": {"file": "in_b1.bin", "dtype": "float"}}}]})",
      StatusCode::kInvalidArgument, {"$.models[0].inputs.x.dtype: unknown dtype \"float\""});
}

TEST_F(ManifestTest, TolerancesOutOfRange) {
  expect_error(R"({"models": [{"path": "m.onnx", "tolerance": {"atol": -1e-5}}]})",
               StatusCode::kOutOfRange, {"$.models[0].tolerance.atol", "out of range"});
  expect_error(
      R"({"models": [{"path": "m.onnx", "outputs": {"y": {"tolerance": {"rtol": 1.5}}}}]})",
      StatusCode::kOutOfRange, {"$.models[0].outputs.y.tolerance.rtol", "[0, 1)"});
  expect_error(R"({"defaults": {"tolerance": {"nan": "ignore"}}, "models": [{"path": "m.onnx"}]})",
               StatusCode::kInvalidArgument, {"$.defaults.tolerance.nan"});
  expect_error(R"({"models": [{"path": "m.onnx", "dims": {"N": [0]}}]})", StatusCode::kOutOfRange,
               {"$.models[0].dims.N[0]: size 0 is out of range"});
  expect_error(
      R"({"models": [{"path": "m.onnx", "inputs": {"x": {"generate": {"low": 2, "high": 1}}}}]})",
      StatusCode::kOutOfRange, {"$.models[0].inputs.x.generate: low 2 must not exceed high 1"});
}

TEST_F(ManifestTest, MissingFilesNameTheirJsonPath) {
  expect_error(R"({"models": [{"path": "nope.onnx"}]})", StatusCode::kNotFound,
               {"$.models[0].path", "nope.onnx", "does not exist"});
  // Templates are checked at every size the symbol runs at: in_b2.bin is missing.
  expect_error(
      R"({"models": [{"path": "m.onnx", "dims": {"N": [1, 2]}, "inputs": {"x": {"file": "in_b{N}.bin"}}}]})",
      StatusCode::kNotFound, {"$.models[0].inputs.x.file", "in_b2.bin"});
  expect_error(R"({"models": [{"path": "m.onnx", "outputs": {"y": {"file": "ref_b{N.bin"}}}]})",
               StatusCode::kInvalidArgument, {"$.models[0].outputs.y.file", "unterminated"});
  expect_error(R"({"models": [{"test_dir": "no_such_dir"}]})", StatusCode::kNotFound,
               {"$.models[0].test_dir", "no_such_dir"});
}

TEST_F(ManifestTest, StructuralMistakes) {
  expect_error(R"({"models": []})", StatusCode::kInvalidArgument, {"$.models: must not be empty"});
  expect_error(R"({})", StatusCode::kInvalidArgument, {"missing \"models\""});
  expect_error(R"({"models": [{"path": "m.onnx"}, {"path": "m.onnx"}]})",
               StatusCode::kInvalidArgument, {"$.models[1]", "a second model named \"m\""});
  expect_error(R"({"models": [{"name": "x"}]})", StatusCode::kInvalidArgument,
               {"exactly one of \"path\""});
  expect_error(
      R"({"models": [{"path": "m.onnx", "inputs": {"x": {"file": "in_b1.bin", "generate": {}}}}]})",
      StatusCode::kInvalidArgument,
      {"$.models[0].inputs.x", "exactly one of \"file\" and \"generate\""});
  expect_error(R"({"models": [{"path": "m.onnx", "expect": {"cpu": "fail-run"}}]})",
               StatusCode::kInvalidArgument, {"$.models[0].expect.cpu", "needs a \"reason\""});
  expect_error(
      R"({"models": [{"path": "m.onnx", "expect": {"cpu": {"outcome": "crash", "reason": "r"}}}]})",
      StatusCode::kInvalidArgument,
      {"$.models[0].expect.cpu.outcome", "\"crash\" is not an outcome"});
  expect_error("{\"models\": [\n  {\"path\": \"m.onnx\",}\n]}", StatusCode::kInvalidArgument,
               {"not valid JSON", "line 2"});
}

TEST_F(ManifestTest, ModelDirRoot) {
  const std::string text = R"({"root": "model-dir", "models": [{"path": "m.onnx"}]})";
  expect_error(text, StatusCode::kInvalidArgument, {"$.root", "--model-dir", "KILN_MODEL_DIR"});
  std::filesystem::create_directories(dir_.file("models"));
  std::ofstream(dir_.file("models/m.onnx")) << "x";
  auto manifest = parse(text, {dir_.file("models")});
  ASSERT_TRUE(manifest.ok()) << manifest.status().to_string();
  EXPECT_EQ(manifest->models[0].path, dir_.file("models/m.onnx"));
}

TEST(ExpandPath, ReplacesSymbols) {
  EXPECT_EQ(*expand_path("a_b{N}_{H}.bin", {{"N", 3}, {"H", 7}}, "$.x"), "a_b3_7.bin");
  EXPECT_EQ(*expand_path("plain.bin", {}, "$.x"), "plain.bin");
  auto missing = expand_path("a{M}.bin", {{"N", 3}}, "$.x");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("{M}"), std::string::npos);
  EXPECT_FALSE(expand_path("a}b", {}, "$.x").ok());
}

TEST(BackendLayout, ReadsCaseFoldersAndReportsBrokenOnes) {
  TempDir dir;
  namespace fs = std::filesystem;
  auto make = [&](const std::string& rel) {
    fs::create_directories(fs::path(dir.file(rel)).parent_path());
    std::ofstream(dir.file(rel)) << "x";
  };
  make("good/model.onnx");
  make("good/test_data_set_0/input_0.pb");
  make("good/test_data_set_0/input_1.pb");
  make("good/test_data_set_0/output_0.pb");
  make("good/test_data_set_1/input_0.pb");
  make("good/test_data_set_1/input_1.pb");
  make("good/test_data_set_1/output_0.pb");
  make("gap/model.onnx");
  make("gap/test_data_set_0/input_0.pb");
  make("gap/test_data_set_0/input_2.pb");
  make("gap/test_data_set_0/output_0.pb");
  make("not_a_case/readme.txt");

  auto one = load_suite_folder(dir.file("good"));
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  ASSERT_EQ(one->models.size(), 1u);
  EXPECT_EQ(one->models[0].name, "good");
  ASSERT_EQ(one->models[0].data_sets.size(), 2u);
  EXPECT_EQ(one->models[0].data_sets[1].name, "test_data_set_1");
  EXPECT_EQ(one->models[0].data_sets[1].inputs.size(), 2u);
  EXPECT_EQ(one->models[0].tolerance_for("y").rtol, 1e-3);

  auto all = load_suite_folder(dir.file(""));
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  ASSERT_EQ(all->models.size(), 2u);
  EXPECT_EQ(all->models[0].name, "gap");
  EXPECT_NE(all->models[0].setup_error.find("input_2.pb but no input_1.pb"), std::string::npos)
      << all->models[0].setup_error;
  EXPECT_TRUE(all->models[1].setup_error.empty());

  auto none = load_suite_folder(dir.file("not_a_case"));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("neither model.onnx"), std::string::npos);
}

}  // namespace
}  // namespace kiln::suite
