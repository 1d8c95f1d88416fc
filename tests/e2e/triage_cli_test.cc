// kiln triage, kiln compile --dump-dispatches and kiln run --trace as a user drives them: exit
// codes, the JSON and HTML reports, the repro (its .onnx passes ONNX's checker, its command shows
// the same divergence under the same fault and passes without it), a dynamic build compared with
// a static one layer by layer, and bad input refused before any work.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/tooling/comparator.h"
#include "kiln/tooling/npy.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::make_temp_dir;
using testing::model_path;
using testing::run_kiln;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in, nullptr, false);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs a shell command line (the repro's) and captures its output.
testing::CommandResult run_shell(const std::string& command) {
  testing::CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string resnet_input(int batch) {
  return "--input=" + std::to_string(batch) + "x3x224x224xf32=@" +
         model_path("input_b" + std::to_string(batch) + ".bin");
}

TEST(TriageCli, CleanModelExitsZeroWithEveryLayerWithinTolerance) {
  const std::string dir = make_temp_dir("out");
  auto result = run_kiln("triage " + model_path("resnet50-v1-12.onnx") + " " + resnet_input(1) +
                         " -o " + dir + " --json " + dir + "/triage.json");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("CLEAN"), std::string::npos) << result.output;
  nlohmann::json report = read_json(dir + "/triage.json");
  EXPECT_EQ(report["verdict"], "clean");
  EXPECT_TRUE(report["first_divergence"].is_null());
  ASSERT_EQ(report["layers"].size(), 57u);
  for (const auto& layer : report["layers"]) {
    EXPECT_TRUE(layer["compared"].get<bool>()) << layer["name"];
    EXPECT_TRUE(layer["passed"].get<bool>()) << layer["name"];
    EXPECT_EQ(layer["nan"], 0);
  }
  const std::string html = read_text(dir + "/report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("resnetv17_stage4_conv9_fwd"), std::string::npos);
  EXPECT_NE(html.find("<div class=\"verdict clean\"><strong>CLEAN"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/repro"));
}

// A NaN fault in a conv with a fused residual Add, selected by one of its ONNX nodes.
TEST(TriageCli, FaultIsPinnedAndTheReproShowsIt) {
  const std::string dir = make_temp_dir("out");
  const std::string fault = "KILN_FAULT=dispatch:resnetv17_stage3__plus2:nan ";
  auto result =
      run_shell(fault + testing::kiln_binary() + " triage " + model_path("resnet50-v1-12.onnx") +
                " " + resnet_input(1) + " -o " + dir + " --json " + dir + "/triage.json");
  ASSERT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("DIVERGED"), std::string::npos) << result.output;
  nlohmann::json report = read_json(dir + "/triage.json");
  EXPECT_EQ(report["verdict"], "diverged");
  const auto& first = report["first_divergence"];
  EXPECT_EQ(first["nodes"],
            (nlohmann::json{"resnetv17_stage3_conv9_fwd", "resnetv17_stage3_batchnorm9_fwd",
                            "resnetv17_stage3__plus2", "resnetv17_stage3_activation2"}))
      << first.dump();
  EXPECT_TRUE(first["at_fault"].get<bool>());
  EXPECT_EQ(first["nonfinite"], 1024 * 14 * 14);
  const int dispatch = first["dispatch"];
  // Every layer before it matched; the chart's table has the layers after it too.
  for (const auto& layer : report["layers"]) {
    if (layer["dispatch"].get<int>() < dispatch) {
      EXPECT_TRUE(layer["passed"].get<bool>()) << layer["name"];
    }
  }
  EXPECT_EQ(report["layers"].size(), 57u);

  // The HTML page puts the verdict first, above the chart, whose axes are labelled and which has
  // a legend for each series.
  const std::string html = read_text(dir + "/report.html");
  const size_t verdict = html.find("<div class=\"verdict diverged\"><strong>DIVERGED at dispatch " +
                                   std::to_string(dispatch));
  ASSERT_NE(verdict, std::string::npos) << html.substr(0, 2000);
  EXPECT_LT(verdict, html.find("<svg"));
  for (const char* label :
       {"dispatch (run order)", "max abs error (log scale)", "max abs error of the layer's output",
        "tolerance: atol + rtol", "outside tolerance"}) {
    EXPECT_NE(html.find(label), std::string::npos) << label;
  }

  const std::string onnx_path = first["repro"]["onnx"];
  auto checked = run_shell(
      "/usr/bin/python3 -c 'import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]))' " +
      onnx_path);
  EXPECT_EQ(checked.exit_code, 0) << checked.output;

  // The command carries the fault, rewritten to select the dispatch by its first ONNX node.
  const std::string command = first["repro"]["command"];
  EXPECT_EQ(command.rfind("KILN_FAULT=dispatch:resnetv17_stage3_conv9_fwd:nan ", 0), 0u) << command;
  auto diverges = run_shell(command);
  EXPECT_EQ(diverges.exit_code, 1) << diverges.output;
  EXPECT_NE(diverges.output.find("NaN: 200704/200704"), std::string::npos) << diverges.output;
  auto clean = run_shell("env -u KILN_FAULT " + command.substr(command.find(' ') + 1));
  EXPECT_EQ(clean.exit_code, 0) << clean.output;
  EXPECT_NE(read_text(dir + "/repro/repro.sh").find(" compile "), std::string::npos);
}

TEST(TriageCli, PerturbationInTheGlobalPool) {
  const std::string dir = make_temp_dir("out");
  auto result = run_shell("KILN_FAULT=dispatch:resnetv24_pool1_fwd:perturb=0.01 " +
                          testing::kiln_binary() + " triage " + model_path("resnet50-v2-7.onnx") +
                          " " + resnet_input(1) + " -o " + dir + " --json " + dir + "/triage.json");
  ASSERT_EQ(result.exit_code, 1) << result.output;
  nlohmann::json report = read_json(dir + "/triage.json");
  const auto& first = report["first_divergence"];
  EXPECT_EQ(first["nodes"], (nlohmann::json{"resnetv24_pool1_fwd"}));
  EXPECT_TRUE(first["at_fault"].get<bool>());
  EXPECT_EQ(first["nonfinite"], 0);
  EXPECT_NEAR(first["max_abs_err"].get<double>(), 0.01, 1e-4);
  EXPECT_EQ(report["bindings"]["N"], 1);
}

TEST(TriageCli, DynamicBuildAgainstStaticBuildLayerByLayer) {
  const std::string dir = make_temp_dir("out");
  const std::string static_module = dir + "/static.kmod";
  auto compiled =
      run_kiln("compile " + model_path("resnet50-v1-12-static.onnx") + " -o " + static_module);
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  auto result = run_kiln("triage " + model_path("resnet50-v1-12.onnx") + " " + resnet_input(1) +
                         " --against=" + static_module + " -o " + dir + "/out --json " + dir +
                         "/triage.json");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  nlohmann::json report = read_json(dir + "/triage.json");
  EXPECT_NE(report["reference"].get<std::string>().find("static.kmod"), std::string::npos);
  ASSERT_EQ(report["layers"].size(), 57u);
  // Invariant 1: the dynamic module at batch 1 equals the static one, layer by layer.
  for (const auto& layer : report["layers"]) {
    EXPECT_TRUE(layer["compared"].get<bool>()) << layer["name"];
    EXPECT_EQ(layer["max_abs_err"].get<double>(), 0.0) << layer["name"];
    EXPECT_EQ(layer["mismatches"], 0) << layer["name"];
  }
}

TEST(TriageCli, AgainstOnnxRuntimeIsClean) {
  const char* source = std::getenv("KILN_SOURCE_DIR");
  if (source == nullptr ||
      !fs::exists(std::string(source) + "/tools/ort/node_modules/onnxruntime-node")) {
    GTEST_SKIP() << "onnxruntime-node is not installed: run scripts/setup.sh";
  }
  const std::string dir = make_temp_dir("out");
  auto result = run_kiln("triage " + model_path("resnet50-v1-12.onnx") + " " + resnet_input(1) +
                         " --against=onnxruntime -o " + dir + " --json " + dir + "/triage.json");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  nlohmann::json report = read_json(dir + "/triage.json");
  EXPECT_EQ(report["verdict"], "clean");
  int compared = 0;
  for (const auto& layer : report["layers"]) compared += layer["compared"].get<bool>();
  EXPECT_EQ(compared, 57);
  EXPECT_FALSE(fs::exists(dir + "/onnxruntime")) << "the model copy was left behind";
}

// `--input=NAME=SPEC` as for `kiln run`: the name picks the model's input; an unknown name is a
// usage error listing the inputs.
TEST(TriageCli, NamedInputsPickTheModelsInputs) {
  const std::string dir = make_temp_dir("out");
  const std::string spec = "1x3x8x8xf32=@" + model_path("small/tiny_input_b1.bin");
  auto named = run_kiln("triage " + model_path("small/tiny_cnn.onnx") + " --input=data=" + spec +
                        " -o " + dir);
  EXPECT_EQ(named.exit_code, 0) << named.output;
  EXPECT_NE(named.output.find("CLEAN"), std::string::npos) << named.output;
  auto unknown = run_kiln("triage " + model_path("small/tiny_cnn.onnx") + " --input=image=" + spec +
                          " -o " + dir);
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("no input 'image'; its inputs are: data"), std::string::npos)
      << unknown.output;
}

TEST(TriageCli, BadInputIsRefusedBeforeAnyWork) {
  const std::string dir = make_temp_dir("out");
  const std::string other = dir + "/v2.kmod";
  ASSERT_EQ(run_kiln("compile " + model_path("resnet50-v2-7.onnx") + " -o " + other).exit_code, 0);
  const std::string model = model_path("resnet50-v1-12.onnx");

  auto wrong_model = run_kiln("triage " + model + " " + resnet_input(1) + " --against=" + other +
                              " -o " + dir + "/a");
  EXPECT_EQ(wrong_model.exit_code, 2) << wrong_model.output;
  EXPECT_NE(wrong_model.output.find("was not built from this model"), std::string::npos)
      << wrong_model.output;
  EXPECT_NE(wrong_model.output.find("resnetv24_dense0_fwd"), std::string::npos)
      << wrong_model.output;
  EXPECT_FALSE(fs::exists(dir + "/a"));

  auto small = Tensor::create(DType::kF32, {1, 3, 100, 100}).value();
  auto bytes = serialize_npy(small).value();
  std::ofstream(dir + "/small.npy", std::ios::binary) << bytes;
  auto wrong_shape =
      run_kiln("triage " + model + " --input=@" + dir + "/small.npy -o " + dir + "/b");
  EXPECT_EQ(wrong_shape.exit_code, 2) << wrong_shape.output;
  EXPECT_NE(wrong_shape.output.find("input 0 'data' dim 2: expected 224"), std::string::npos)
      << wrong_shape.output;
  EXPECT_FALSE(fs::exists(dir + "/b"));

  auto two_inputs = run_kiln("triage " + model + " " + resnet_input(1) + " " + resnet_input(1) +
                             " -o " + dir + "/c");
  EXPECT_EQ(two_inputs.exit_code, 2) << two_inputs.output;
  EXPECT_NE(two_inputs.output.find("takes 1 input"), std::string::npos) << two_inputs.output;

  auto unknown = run_kiln("triage " + model + " " + resnet_input(1) + " --against=tensorflow -o " +
                          dir + "/d");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("--against='tensorflow'"), std::string::npos) << unknown.output;

  auto bad_fault = run_shell("KILN_FAULT=dispatch:3:melt " + testing::kiln_binary() + " triage " +
                             model + " " + resnet_input(1) + " -o " + dir + "/e");
  EXPECT_EQ(bad_fault.exit_code, 2) << bad_fault.output;
  EXPECT_NE(bad_fault.output.find("KILN_FAULT='dispatch:3:melt'"), std::string::npos)
      << bad_fault.output;
}

// Without -o the reports go to a new kiln-triage-XXXXXX folder in $TMPDIR, never the current
// directory; the last line names it.
TEST(TriageCli, DefaultOutputGoesToATemporaryFolder) {
  const std::string cwd = make_temp_dir("cwd"), tmp = make_temp_dir("tmp");
  auto result = run_shell("cd " + cwd + " && TMPDIR=" + tmp + " " + testing::kiln_binary() +
                          " triage " + model_path("small/tiny_cnn.onnx") +
                          " --input=3x3x8x8xf32=@" + model_path("small/tiny_input_b3.bin"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(fs::is_empty(cwd)) << result.output;
  std::vector<fs::path> made;
  for (const auto& entry : fs::directory_iterator(tmp)) made.push_back(entry.path());
  ASSERT_EQ(made.size(), 1u) << result.output;
  EXPECT_EQ(made[0].filename().string().rfind("kiln-triage-", 0), 0u) << made[0];
  EXPECT_TRUE(fs::exists(made[0] / "report.html"));
  EXPECT_NE(result.output.find("report: " + (made[0] / "report.html").string()), std::string::npos)
      << result.output;
}

class DispatchFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("files");
    module_ = dir_ + "/tiny.kmod";
  }
  std::string input() { return "--input=3x3x8x8xf32=@" + model_path("small/tiny_input_b3.bin"); }
  std::string dir_, module_;
};

TEST_F(DispatchFiles, CompileDumpsOneFilePerDispatchWithOriginsAndFusedOps) {
  auto compiled = run_kiln("compile " + model_path("small/tiny_cnn.onnx") + " -o " + module_ +
                           " --dump-dispatches=" + dir_ + "/dump");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  nlohmann::json index = read_json(dir_ + "/dump/index.json");
  ASSERT_EQ(index["dispatches"].size(), 8u);
  EXPECT_EQ(index["symbols"], (nlohmann::json{"N"}));
  for (const auto& entry : index["dispatches"])
    EXPECT_TRUE(fs::exists(dir_ + "/dump/" + entry["file"].get<std::string>()));
  nlohmann::json conv = read_json(dir_ + "/dump/d000_conv0.json");
  EXPECT_EQ(conv["op_type"], "Conv");
  ASSERT_EQ(conv["origins"].size(), 3u);
  EXPECT_EQ(conv["origins"][1]["op_type"], "BatchNormalization");
  ASSERT_EQ(conv["fused"].size(), 2u);
  EXPECT_NE(conv["fused"][0].get<std::string>().find("folded into the weights"), std::string::npos);
  EXPECT_EQ(conv["outputs"][0]["shape"], "[N,8,8,8]");
  EXPECT_TRUE(conv["kernels"].is_string());  // chosen at run time
  EXPECT_NE(read_text(dir_ + "/dump/index.txt").find("<- conv2, add0, relu2"), std::string::npos);

  auto stopped = run_kiln("compile " + model_path("small/tiny_cnn.onnx") + " -o " + dir_ +
                          "/x.kir --stop-after=fuse" + " --dump-dispatches=" + dir_ + "/dump2");
  EXPECT_EQ(stopped.exit_code, 2) << stopped.output;
}

TEST_F(DispatchFiles, RunTraceWritesEveryDispatchsTensorsKernelsAndSummary) {
  ASSERT_EQ(run_kiln("compile " + model_path("small/tiny_cnn.onnx") + " -o " + module_).exit_code,
            0);
  const std::string trace = dir_ + "/trace";
  auto ran = run_kiln("run --module=" + module_ + " " + input() + " --output=@" + dir_ +
                      "/out.npy --trace=" + trace);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find("d3_conv2 (Conv)"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("NaN 0/384"), std::string::npos) << ran.output;
  // The last dispatch's output is the module's output; its input is the previous one's output.
  auto last = read_npy_file(trace + "/d007_softmax0.out0.npy");
  auto out = read_npy_file(dir_ + "/out.npy");
  ASSERT_TRUE(last.ok() && out.ok());
  EXPECT_TRUE(bitwise_equal(*last, *out));
  auto fc_in = read_npy_file(trace + "/d007_softmax0.in0.npy");
  auto fc_out = read_npy_file(trace + "/d006_fc0.out0.npy");
  ASSERT_TRUE(fc_in.ok() && fc_out.ok());
  EXPECT_TRUE(bitwise_equal(*fc_in, *fc_out));
  EXPECT_FALSE(fs::exists(trace + "/d000_conv0.in1.npy"));  // weights only for a single dispatch
  nlohmann::json conv = read_json(trace + "/d003_conv2.json");
  ASSERT_TRUE(conv["kernels"].is_array());
  EXPECT_FALSE(conv["kernels"].empty());
  EXPECT_EQ(conv["outputs"][0]["concrete"], (nlohmann::json{3, 8, 4, 4}));
  EXPECT_EQ(conv["bindings"]["N"], 3);
  EXPECT_EQ(conv["output_stats"][0]["nan"], 0);
  EXPECT_NE(read_text(trace + "/summary.txt").find("d7_softmax0"), std::string::npos);

  const std::string one = dir_ + "/one";
  auto single = run_kiln("run --module=" + module_ + " " + input() + " --trace=" + one +
                         " --trace-dispatch=add0");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_TRUE(fs::exists(one + "/d003_conv2.in0.npy"));
  EXPECT_TRUE(fs::exists(one + "/d003_conv2.in1.npy"));  // the weights too
  EXPECT_TRUE(fs::exists(one + "/d003_conv2.in3.npy"));  // the residual
  EXPECT_TRUE(fs::exists(one + "/d003_conv2.out0.npy"));
  EXPECT_FALSE(fs::exists(one + "/d002_conv1.out0.npy"));

  auto unknown = run_kiln("run --module=" + module_ + " " + input() + " --trace=" + dir_ +
                          "/u --trace-dispatch=nope");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("'nope'"), std::string::npos) << unknown.output;
  auto alone = run_kiln("run --module=" + module_ + " " + input() + " --trace-dispatch=3");
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_NE(alone.output.find("--trace-dispatch needs --trace"), std::string::npos) << alone.output;
}

}  // namespace
}  // namespace kiln
