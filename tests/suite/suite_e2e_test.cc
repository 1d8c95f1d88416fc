// `kiln test-suite` end to end: planted regressions (KILN_FAULT, triage's fault decorator around
// the device) fail the run naming the model, case and output with the error figures; strict
// expectations; the ONNX backend-test folder layout without a manifest; ONNX Runtime references and
// their cache; manifest errors with JSON paths; one broken model not stopping the others; reports
// and JUnit;
// `.pb` tensors in `kiln run`. The bound-vs-dynamic and batch-invariance checks are planted
// through the library's test seam (a fault in the backend hits both builds alike).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kiln/suite/manifest.h"
#include "kiln/suite/suite_runner.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::kiln_binary;
using testing::make_temp_dir;
using testing::model_dir;
using testing::model_path;
using testing::run_kiln;

const std::string kSuiteDir = KILN_SUITE_SOURCE_DIR;
const std::string kNodeDir = "/usr/share/libonnx-testdata/data/node";

std::string shell_quote(const std::string& text) { return "'" + text + "'"; }

std::string kiln_models_args(const std::string& extra) {
  return "test-suite " + shell_quote(kSuiteDir + "/kiln_models.json") + " --model-dir " +
         shell_quote(model_dir()) + " --progress lines " + extra;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

bool xml_validates(const std::string& path) {
  std::string command = "xmllint --noout --schema " + shell_quote(kSuiteDir + "/junit.xsd") + " " +
                        shell_quote(path) + " >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

// Sets KILN_FAULT for the kiln processes this test starts.
class ScopedFault {
 public:
  explicit ScopedFault(const std::string& value) { setenv("KILN_FAULT", value.c_str(), 1); }
  ~ScopedFault() { unsetenv("KILN_FAULT"); }
};

#define EXPECT_CONTAINS(haystack, needle)                                                         \
  EXPECT_NE((haystack).find(needle), std::string::npos) << "missing \"" << (needle) << "\" in:\n" \
                                                        << (haystack)

TEST(SuiteFaults, TinyCnnPassesWithoutAFault) {
  auto r = run_kiln(kiln_models_args("--filter 'tiny_cnn/*'"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "4 cases");
  EXPECT_CONTAINS(r.output, "4 passed");
  // The count of models is the filter's, out of the manifest's.
  EXPECT_CONTAINS(r.output, "running 1 of the suite's ");
  EXPECT_CONTAINS(r.output, " model(s) (those --filter selects)");
}

TEST(SuiteFaults, ANanWrittenIntoOneDispatchFailsTheRun) {
  const std::string dir = make_temp_dir("junit");
  const std::string junit = dir + "/nan.xml";
  ScopedFault fault("dispatch:fc0:nan");
  auto r = run_kiln(kiln_models_args("--filter 'tiny_cnn/*' --junit " + shell_quote(junit)));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // The report names the case, the device and the model's ops.
  EXPECT_CONTAINS(r.output, "FAIL tiny_cnn/dynamic/N=1 on cpu (fail-compare) [");
  EXPECT_CONTAINS(r.output, "FAIL tiny_cnn/bound/N=3 on cpu (fail-compare)");
  EXPECT_CONTAINS(r.output, "output 'prob' vs file");
  EXPECT_CONTAINS(r.output, "10/10 mismatches");
  EXPECT_CONTAINS(r.output, "actual NaN 10/10");
  EXPECT_CONTAINS(r.output, "output 'prob' holds 30 NaN and 0 Inf");
  EXPECT_CONTAINS(r.output, "0 passed");
  // The JUnit file of a failing run is valid too, and carries the failure.
  EXPECT_TRUE(xml_validates(junit));
  std::ifstream in(junit);
  std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_CONTAINS(xml, "<failure type=\"fail-compare\" message=\"output &apos;prob&apos; vs file");
}

TEST(SuiteFaults, ASmallPerturbationOfOneDispatchFailsTheRun) {
  ScopedFault fault("dispatch:gap0:perturb=1e-4");
  auto r = run_kiln(kiln_models_args("--filter 'tiny_cnn/*'"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "FAIL tiny_cnn/dynamic/N=3 on cpu (fail-compare)");
  EXPECT_CONTAINS(r.output, "output 'prob' vs file");
  EXPECT_CONTAINS(r.output, "max abs err 2.");  // about 2.5e-05 > atol 2e-05 + rtol * |e|
  EXPECT_CONTAINS(r.output, "actual NaN 0/");
}

TEST(SuiteFaults, APlantedNanInAResNetIsCaught) {
  ScopedFault fault("dispatch:resnetv17_stage4_conv6_fwd:nan");
  auto r = run_kiln(kiln_models_args("--filter 'resnet50-v1-12/dynamic/N=1'"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "FAIL resnet50-v1-12/dynamic/N=1 on cpu (fail-compare)");
  EXPECT_CONTAINS(r.output, "output 'resnetv17_dense0_fwd' vs file");
  EXPECT_CONTAINS(r.output, "1 failed");
}

class SuiteManifests : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("suite"); }
  std::string write_manifest(const std::string& text) {
    const std::string path = dir_ + "/suite.json";
    write_text(path, text);
    return path;
  }
  std::string tiny() const { return model_path("small/tiny_cnn.onnx"); }
  std::string dir_;
};

TEST_F(SuiteManifests, AnExpectedFailureThatPassesFailsTheRun) {
  auto path = write_manifest(R"({"models": [{"path": ")" + tiny() +
                             R"(", "reference": "kiln-reference",
      "expect": {"cpu": {"outcome": "fail-compare", "reason": "a bug that has since been fixed"}}}]})");
  auto r = run_kiln("test-suite " + shell_quote(path) + " --progress lines");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "XPASS tiny_cnn/dynamic/N=1");
  EXPECT_CONTAINS(r.output,
                  "unexpected pass: expected fail-compare (a bug that has since been fixed)");
  EXPECT_CONTAINS(r.output, "4 unexpected passes");
  // Another backend's expectation does not apply to this one.
  auto other = run_kiln("test-suite " + shell_quote(path) +
                        " --backend cpu --progress none --filter static");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_CONTAINS(other.output, "selects no case");
}

// Expectations per case: the failures happen where the manifest says (XFAIL), the other cases
// must pass, and an entry whose cases pass is an unexpected pass.
TEST_F(SuiteManifests, ExpectationsApplyToTheCasesTheyName) {
  ScopedFault fault("dispatch:fc0:nan");
  auto path =
      write_manifest(R"({"models": [{"path": ")" + tiny() + R"(", "reference": "kiln-reference",
      "expect": {"cpu": [{"outcome": "fail-compare", "reason": "planted NaN", "cases": "*/N=3"},
                         {"outcome": "fail-compare", "reason": "planted NaN at N=1", "cases": "dynamic/N=1"},
                         {"outcome": "fail-run", "reason": "wrong stage", "cases": "bound/N=1"}]}}]})");
  auto r = run_kiln("test-suite " + shell_quote(path) + " --progress lines");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "XFAIL tiny_cnn/dynamic/N=3");
  EXPECT_CONTAINS(r.output, "XFAIL tiny_cnn/bound/N=3");
  EXPECT_CONTAINS(r.output, "XFAIL tiny_cnn/dynamic/N=1");
  EXPECT_CONTAINS(r.output, "expected fail-run (wrong stage), got fail-compare");
  // Without the fault, every case that an entry names passes unexpectedly.
  unsetenv("KILN_FAULT");
  auto fixed = run_kiln("test-suite " + shell_quote(path) + " --progress lines");
  EXPECT_EQ(fixed.exit_code, 1) << fixed.output;
  EXPECT_CONTAINS(fixed.output, "XPASS tiny_cnn/dynamic/N=3");
  EXPECT_CONTAINS(fixed.output, "unexpected pass: expected fail-compare (planted NaN at N=1)");
  EXPECT_CONTAINS(fixed.output, "4 unexpected passes");
}

TEST_F(SuiteManifests, FailingAtADifferentStageThanExpectedFailsTheRun) {
  auto path = write_manifest(
      R"({"models": [{"path": ")" + model_path("small/unsupported.onnx") +
      R"(", "expect": {"cpu": {"outcome": "fail-compile", "reason": "wrong stage"}}}]})");
  auto r = run_kiln("test-suite " + shell_quote(path) + " --progress none");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "FAIL unsupported on cpu (fail-import)");
  EXPECT_CONTAINS(r.output, "expected fail-compile (wrong stage), got fail-import");
  EXPECT_CONTAINS(r.output, "Bernoulli");
}

TEST_F(SuiteManifests, OneBrokenModelDoesNotStopTheRest) {
  write_text(dir_ + "/broken.onnx", "this is not a protobuf");
  write_text(dir_ + "/short_b2.bin", "12345678");
  auto path = write_manifest(R"({"models": [
      {"path": "broken.onnx"},
      {"name": "bad_input", "path": ")" +
                             tiny() + R"(", "dims": {"N": [2]},
       "inputs": {"data": {"file": "short_b{N}.bin"}}},
      {"path": ")" + tiny() + R"(", "dims": {"N": [2]}, "reference": "kiln-reference"}]})");
  auto r = run_kiln("test-suite " + shell_quote(path) + " --progress lines");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "FAIL broken on cpu (fail-import)");
  EXPECT_CONTAINS(r.output, "not a valid ONNX model");
  EXPECT_CONTAINS(r.output, "FAIL bad_input/dynamic/N=2 on cpu (error)");
  EXPECT_CONTAINS(r.output, "short_b2.bin");
  EXPECT_CONTAINS(r.output, "PASS  tiny_cnn/dynamic/N=2");
  EXPECT_CONTAINS(r.output, "PASS  tiny_cnn/bound/N=2");
}

TEST_F(SuiteManifests, MalformedManifestsAreErrorsWithTheirJsonPath) {
  struct Case {
    std::string model_entry;
    std::string expected;
  } cases[] = {
      {R"({"path": "TINY", "tolerence": {"atol": 1}})", "$.models[0].tolerence: unknown key"},
      {R"({"path": "TINY", "dims": {"N": "3"}})",
       "$.models[0].dims.N: expected an array, got string"},
      {R"({"path": "TINY", "inputs": {"data": {"file": "nowhere_b{N}.bin"}}})",
       "$.models[0].inputs.data.file: '" + dir_ + "/nowhere_b1.bin' does not exist"},
      {R"({"path": "TINY", "outputs": {"prob": {"tolerance": {"rtol": 2}}}})",
       "$.models[0].outputs.prob.tolerance.rtol: 2 is out of range"},
      {R"({"path": "TINY", "tolerance": {"atol": -1}})",
       "$.models[0].tolerance.atol: -1 is out of range"},
  };
  for (const Case& c : cases) {
    std::string entry = c.model_entry;
    entry.replace(entry.find("TINY"), 4, tiny());
    auto path = write_manifest(R"({"models": [)" + entry + "]}");
    auto r = run_kiln("test-suite " + shell_quote(path));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_CONTAINS(r.output, c.expected);
    EXPECT_CONTAINS(r.output, "in manifest '" + path + "'");
  }
  // An input the model does not have is found once the model is imported, and named.
  auto path = write_manifest(R"({"models": [{"path": ")" + tiny() +
                             R"(", "inputs": {"image": {"generate": {}}}}]})");
  auto r = run_kiln("test-suite " + shell_quote(path) + " --progress none");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output,
                  "$.models[0].inputs.image: the model has no input 'image' (its inputs: data)");
}

TEST_F(SuiteManifests, OnnxRuntimeReferencesAreCached) {
  if (!fs::exists(kSuiteDir + "/../../tools/ort/node_modules/onnxruntime-node")) {
    GTEST_SKIP() << "onnxruntime-node is not installed: run scripts/setup.sh";
  }
  const std::string manifest = R"({"models": [{"path": ")" + tiny() + R"(", "dims": {"N": [1, 2]},
      "reference": "onnxruntime", "inputs": {"data": {"generate": {"seed": SEED, "low": 0, "high": 1}}}}]})";
  std::string text = manifest;
  text.replace(text.find("SEED"), 4, "5");
  auto path = write_manifest(text);
  const std::string cache = dir_ + "/cache";
  auto first = run_kiln("test-suite " + shell_quote(path) + " --cache-dir " + shell_quote(cache) +
                        " --progress none");
  EXPECT_EQ(first.exit_code, 0) << first.output;
  EXPECT_CONTAINS(first.output, "4 passed");
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(cache)) entries += entry.is_directory() ? 1 : 0;
  EXPECT_EQ(entries, 2);  // one per input set (N=1, N=2); nothing temporary left behind

  // The second run needs no ONNX Runtime at all.
  auto second = run_kiln("test-suite " + shell_quote(path) + " --cache-dir " + shell_quote(cache) +
                         " --ort-runner /nonexistent/run_ort.js --progress none");
  EXPECT_EQ(second.exit_code, 0) << second.output;
  EXPECT_CONTAINS(second.output, "4 passed");

  // New inputs are not in the cache: without a runner the cases are errors that say why.
  text = manifest;
  text.replace(text.find("SEED"), 4, "6");
  write_manifest(text);
  auto third = run_kiln("test-suite " + shell_quote(path) + " --cache-dir " + shell_quote(cache) +
                        " --ort-runner /nonexistent/run_ort.js --progress none");
  EXPECT_EQ(third.exit_code, 1) << third.output;
  EXPECT_CONTAINS(third.output, "FAIL tiny_cnn/dynamic/N=1 on cpu (error)");
  EXPECT_CONTAINS(third.output, "onnxruntime-node is not available");
}

TEST_F(SuiteManifests, ReportsAndParallelJobs) {
  auto path = write_manifest(R"({"defaults": {"reference": "kiln-reference", "dims": {"N": [1, 2]}},
      "models": [{"path": ")" +
                             tiny() + R"("}, {"name": "again", "path": ")" + tiny() + R"("}]})");
  const std::string md = dir_ + "/r.md", html = dir_ + "/r.html", junit = dir_ + "/j.xml";
  auto r =
      run_kiln("test-suite " + shell_quote(path) + " -j 2 --threads 2 --progress lines --report " +
               shell_quote(md) + " --junit " + shell_quote(junit));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "2 model(s), 2 at a time, 1 thread(s) each");
  EXPECT_CONTAINS(r.output, "8 cases");
  EXPECT_TRUE(xml_validates(junit));
  auto html_run = run_kiln("test-suite " + shell_quote(path) + " --progress none --report " +
                           shell_quote(html));
  EXPECT_EQ(html_run.exit_code, 0) << html_run.output;
  std::ifstream md_in(md), html_in(html);
  std::string md_text((std::istreambuf_iterator<char>(md_in)), std::istreambuf_iterator<char>());
  std::string html_text((std::istreambuf_iterator<char>(html_in)),
                        std::istreambuf_iterator<char>());
  EXPECT_CONTAINS(md_text, "### PASS again/bound/N=2");
  EXPECT_CONTAINS(md_text, "bound vs dynamic at N=2: bit for bit equal");
  EXPECT_CONTAINS(md_text, "batch invariance: every sample of N=2 equals the sample run alone");
  EXPECT_CONTAINS(html_text, "<h3>PASS tiny_cnn/dynamic/N=1</h3>");
  auto bad =
      run_kiln("test-suite " + shell_quote(path) + " --report " + shell_quote(dir_ + "/r.txt"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_CONTAINS(bad.output, "must be .md or .html");
}

TEST(SuiteDevices, AnUnknownBackendIsAnErrorListingTheDevices) {
  auto r = run_kiln(kiln_models_args("--backend bogus"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "unknown backend 'bogus'");
  EXPECT_CONTAINS(r.output, "cpu, null");
}

// The null device computes placeholders: a case passes when it compiles and runs cleanly, and
// its outputs are not compared (they are zeros, which would fail every comparison).
TEST(SuiteDevices, TheNullDeviceRunsEveryCaseWithoutComparingOutputs) {
  const std::string dir = make_temp_dir("null_report");
  auto r = run_kiln(kiln_models_args("--backend null --filter 'tiny_cnn/*' --report " +
                                     shell_quote(dir + "/report.md")));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "on null: 4 cases");
  EXPECT_CONTAINS(r.output, "4 passed");
  std::ifstream in(dir + "/report.md");
  std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_CONTAINS(report, "outputs not compared: device 'null' computes placeholders");
}

TEST(SuiteFolders, OnnxBackendLayoutRunsWithoutAManifest) {
  if (!fs::exists(kNodeDir + "/test_relu")) GTEST_SKIP() << "libonnx-testdata is not installed";
  const std::string dir = make_temp_dir("node");
  for (const char* name : {"test_relu", "test_conv_with_strides_padding",
                           "test_gemm_default_no_bias", "test_bernoulli"}) {
    fs::create_directory_symlink(kNodeDir + "/" + name, dir + "/" + name);
  }
  auto r = run_kiln("test-suite " + shell_quote(dir) + " --progress lines");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "PASS  test_relu/static");
  EXPECT_CONTAINS(r.output, "PASS  test_conv_with_strides_padding/static");
  EXPECT_CONTAINS(r.output, "PASS  test_gemm_default_no_bias/static");
  EXPECT_CONTAINS(r.output, "FAIL test_bernoulli on cpu (fail-import)");
  EXPECT_CONTAINS(r.output, "unsupported ops: Bernoulli");
  EXPECT_CONTAINS(r.output, "3 passed");

  auto one = run_kiln("test-suite " + shell_quote(kNodeDir + "/test_relu") + " --progress none");
  EXPECT_EQ(one.exit_code, 0) << one.output;
  auto empty = run_kiln("test-suite " + shell_quote(make_temp_dir("empty")));
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_CONTAINS(empty.output, "neither model.onnx");
}

// NonMaxSuppression's row count depends on the data: the reference file (.pb here; .npy alike)
// carries its shape, which the output's symbolic shape cannot give, and a reference of another
// length fails the case.
TEST(SuiteReferences, ADataDependentOutputTakesItsShapeFromThePbFile) {
  const std::string nms = kNodeDir + "/test_nonmaxsuppression_suppress_by_IOU";
  if (!fs::exists(nms)) GTEST_SKIP() << "libonnx-testdata is not installed";
  const std::string dir = make_temp_dir("data_dependent");
  auto manifest = [&](const std::string& reference) {
    std::string inputs;
    const char* names[] = {"boxes", "scores", "max_output_boxes_per_class", "iou_threshold",
                           "score_threshold"};
    for (int i = 0; i < 5; ++i) {
      inputs += std::string(i ? ", " : "") + "\"" + names[i] + "\": {\"file\": \"" + nms +
                "/test_data_set_0/input_" + std::to_string(i) + ".pb\"}";
    }
    const std::string path = dir + "/suite.json";
    write_text(path, R"({"models": [{"path": ")" + nms + R"(/model.onnx", "inputs": {)" + inputs +
                         R"(}, "outputs": {"selected_indices": {"file": ")" + reference +
                         R"("}}}]})");
    return path;
  };
  auto r = run_kiln("test-suite " + shell_quote(manifest(nms + "/test_data_set_0/output_0.pb")) +
                    " --progress lines");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "1 passed");
  // The reference of the case with a score threshold holds 2 rows where kiln selects 3.
  auto other =
      run_kiln("test-suite " +
               shell_quote(manifest(
                   kNodeDir + "/test_nonmaxsuppression_suppress_by_IOU_and_scores/test_data_set_0/"
                              "output_0.pb")) +
               " --progress lines");
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_CONTAINS(other.output, "1 failed");
}

TEST(KilnRun, TakesTensorProtoFiles) {
  if (!fs::exists(kNodeDir + "/test_relu")) GTEST_SKIP() << "libonnx-testdata is not installed";
  const std::string dir = make_temp_dir("pb");
  const std::string set = kNodeDir + "/test_relu/test_data_set_0";
  auto compiled =
      run_kiln("compile " + kNodeDir + "/test_relu/model.onnx -o " + dir + "/relu.kmod");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  auto r = run_kiln("run --module " + dir + "/relu.kmod --input @" + set +
                    "/input_0.pb --expected_output @" + set +
                    "/output_0.pb --atol 0 --rtol 0 --output @" + dir + "/out.pb");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "PASS: 0/60 mismatches");
  // What kiln wrote reads back as the same tensor.
  auto again = run_kiln("run --module " + dir + "/relu.kmod --input 3x4x5xf32=@" + set +
                        "/input_0.pb --expected_output @" + dir + "/out.pb --atol 0 --rtol 0");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  auto typed =
      run_kiln("run --module " + dir + "/relu.kmod --input 2x4x5xf32=@" + set + "/input_0.pb");
  EXPECT_EQ(typed.exit_code, 2) << typed.output;
  EXPECT_CONTAINS(typed.output, "holds 3x4x5xf32");
  write_text(dir + "/bad.pb", "\xff\xff\xff garbage");
  auto bad = run_kiln("run --module " + dir + "/relu.kmod --input @" + dir + "/bad.pb");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_CONTAINS(bad.output, "bad.pb' is not a valid TensorProto");
}

// The library's test seam plants a difference in one variant only.
class SuiteChecks : public ::testing::Test {
 protected:
  StatusOr<suite::SuiteResult> run(
      const std::string& batch_invariance,
      std::function<void(const std::string&, std::vector<Tensor>&)> tamper) {
    const std::string dir = make_temp_dir("lib");
    const std::string path = dir + "/suite.json";
    write_text(path, R"({"models": [{"path": ")" + model_path("small/tiny_cnn.onnx") +
                         R"(", "batch_invariance": ")" + batch_invariance + R"(",
        "inputs": {"data": {"file": ")" +
                         model_path("small") + R"(/tiny_input_b{N}.bin"}},
        "outputs": {"prob": {"file": ")" +
                         model_path("small") + R"(/tiny_cnn.ref_b{N}.bin",
                             "tolerance": {"atol": 2e-5, "rtol": 1e-5}}}}]})");
    auto manifest = suite::load_manifest(path);
    if (!manifest.ok()) return manifest.status();
    suite::SuiteOptions options;
    options.threads = 2;
    options.tamper = std::move(tamper);
    return suite::run_suite(*manifest, options);
  }
  static const suite::CaseResult* find(const suite::SuiteResult& result, const std::string& name) {
    for (const auto& c : result.cases) {
      if (c.name == name) return &c;
    }
    ADD_FAILURE() << "no case " << name;
    return nullptr;
  }
  // One ulp up in the first element: far inside the tolerance, but not bit for bit equal.
  static void nudge(std::vector<Tensor>& outputs, int64_t index = 0) {
    float& v = outputs[0].mutable_values<float>()[index];
    v = std::nextafter(v, 1.0f);
  }
};

TEST_F(SuiteChecks, ABoundBuildThatDiffersFromTheDynamicModuleFailsTheRun) {
  auto result = run("enforce", [](const std::string& name, std::vector<Tensor>& outputs) {
    if (name.find("/bound/") != std::string::npos) nudge(outputs);
  });
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->unexpected(), 2);
  for (const char* name : {"tiny_cnn/bound/N=1", "tiny_cnn/bound/N=3"}) {
    const auto* c = find(*result, name);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->outcome, suite::Outcome::kFailCompare);
    EXPECT_CONTAINS(c->reason, "output 'prob': the module bound to N=");
    EXPECT_CONTAINS(c->reason, "differs from the dynamic module");
    ASSERT_TRUE(c->bound_vs_dynamic.has_value());
    EXPECT_GT(*c->bound_vs_dynamic, 0);
    // Within tolerance of the reference: only the bitwise check sees it.
    ASSERT_EQ(c->outputs.size(), 1u);
    EXPECT_TRUE(c->outputs[0].passed);
  }
  EXPECT_EQ(find(*result, "tiny_cnn/dynamic/N=3")->verdict, suite::Verdict::kPass);
}

TEST_F(SuiteChecks, BatchInvarianceIsReportedAndEnforcedWhenAsked) {
  auto tamper = [](const std::string& name, std::vector<Tensor>& outputs) {
    if (name == "tiny_cnn/dynamic/N=3") nudge(outputs, 10);  // sample 1
  };
  auto enforced = run("enforce", tamper);
  ASSERT_TRUE(enforced.ok()) << enforced.status().to_string();
  const auto* c = find(*enforced, "tiny_cnn/dynamic/N=3");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, suite::Verdict::kFail);
  EXPECT_CONTAINS(c->reason, "batch invariance: samples of N=3 differ from the samples run alone");
  EXPECT_CONTAINS(c->reason, "output 'prob', sample 1");

  auto reported = run("report", tamper);
  ASSERT_TRUE(reported.ok()) << reported.status().to_string();
  c = find(*reported, "tiny_cnn/dynamic/N=3");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, suite::Verdict::kPass);
  ASSERT_TRUE(c->batch_invariance.has_value());
  EXPECT_GT(*c->batch_invariance, 0);
}

// A model whose batch is not dim 0 everywhere: the LSTM state [2, N, 32] holds N at axis 1 and
// the sample rate is a scalar every sample shares. With `batch_dim` named, each port is split at
// its own axis; a difference planted in sample 1 of the state output `hn` is found there.
TEST(SuiteBatchInvariance, SplitsEachPortAtTheAxisHoldingTheBatch) {
  const std::string dir = make_temp_dir("vad");
  const std::string path = dir + "/suite.json";
  const std::string files = model_path("torch") + "/silero_style_vad.";
  std::string inputs, outputs;
  for (const char* name : {"input", "sr", "h", "c"}) {
    inputs += std::string(inputs.empty() ? "" : ", ") + '"' + name + R"(": {"file": ")" + files +
              name + R"(_n{N}_l{L}_sr16000.bin"})";
  }
  for (const char* name : {"prob", "hn", "cn"}) {
    outputs += std::string(outputs.empty() ? "" : ", ") + '"' + name + R"(": {"file": ")" + files +
               "ref_" + name + R"(_n{N}_l{L}_sr16000.bin"})";
  }
  write_text(path, R"({"models": [{"path": ")" + files + R"(onnx", "batch_dim": "N",
      "batch_invariance": "enforce", "dims": {"N": [2], "L": [512]},
      "inputs": {)" + inputs +
                       R"(}, "outputs": {)" + outputs + "}}]}");
  auto manifest = suite::load_manifest(path);
  ASSERT_TRUE(manifest.ok()) << manifest.status().to_string();
  suite::SuiteOptions options;
  options.threads = 2;
  auto clean = suite::run_suite(*manifest, options);
  ASSERT_TRUE(clean.ok()) << clean.status().to_string();
  ASSERT_EQ(clean->cases.size(), 2u);  // dynamic and bound at N=2, L=512
  for (const auto& c : clean->cases) {
    EXPECT_EQ(c.verdict, suite::Verdict::kPass) << c.name << ": " << c.reason;
    if (c.name.find("/dynamic/") == std::string::npos) continue;  // checked on the dynamic module
    ASSERT_TRUE(c.batch_invariance.has_value()) << c.name;
    EXPECT_EQ(*c.batch_invariance, 0) << c.name;
  }

  options.tamper = [](const std::string& name, std::vector<Tensor>& outputs) {
    // hn [2, N=2, 32]: element (layer 0, sample 1, 0) sits at 32.
    if (name.find("/dynamic/N=2") != std::string::npos) {
      float& v = outputs[1].mutable_values<float>()[32];
      v = std::nextafter(v, 1.0f);
    }
  };
  auto tampered = suite::run_suite(*manifest, options);
  ASSERT_TRUE(tampered.ok()) << tampered.status().to_string();
  bool found = false;
  for (const auto& c : tampered->cases) {
    if (c.name.find("/dynamic/") == std::string::npos) continue;
    found = true;
    EXPECT_EQ(c.verdict, suite::Verdict::kFail) << c.name;
    EXPECT_CONTAINS(c.reason, "output 'hn', sample 1");
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace kiln
