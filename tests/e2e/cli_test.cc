// The `kiln` command line as a user drives it: import, compile, run with expected outputs, and
// every kind of bad input the end-to-end issue names, each a clear error with a non-zero exit and
// no output file left behind.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::make_temp_dir;
using testing::model_path;
using testing::run_kiln;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string inline_values(const std::string& type, int count) {
  std::string spec = "'" + type + "=";
  for (int i = 0; i < count; ++i) spec += i ? " 0" : "0";
  return spec + "'";
}

class KilnCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("cli");
    module_ = dir_ + "/tiny.kmod";
    auto compiled =
        run_kiln("compile " + model_path("small/tiny_cnn.onnx") + " --target=cpu -o " + module_);
    ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  }

  // Expects a usage/input error whose message contains every fragment, and no file at `path`.
  void expect_error(const testing::CommandResult& result,
                    std::initializer_list<const char*> fragments,
                    const std::string& must_not_exist = "") {
    EXPECT_EQ(result.exit_code, 2) << result.output;
    for (const char* fragment : fragments) {
      EXPECT_NE(result.output.find(fragment), std::string::npos)
          << "missing '" << fragment << "' in:\n"
          << result.output;
    }
    if (!must_not_exist.empty()) {
      EXPECT_FALSE(fs::exists(must_not_exist)) << must_not_exist << " was written";
    }
  }

  // Each `kiln run` of the tiny model at batch 3 with one of `variants` appended to its flags
  // (`flag` + variant) writes the bytes the first one wrote.
  void expect_same_output(const std::string& flag, std::initializer_list<const char*> variants) {
    std::string first_bytes;
    size_t index = 0;
    for (const char* variant : variants) {
      const std::string out = dir_ + "/same_output_" + std::to_string(index++) + ".npy";
      auto result = run_kiln("run --module=" + module_ + " --input=" + tiny_input(3) + " " + flag +
                             variant + " --output=@" + out);
      ASSERT_EQ(result.exit_code, 0) << result.output;
      std::ifstream file(out, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(file)),
                              std::istreambuf_iterator<char>());
      ASSERT_FALSE(bytes.empty());
      if (first_bytes.empty()) first_bytes = bytes;
      EXPECT_EQ(bytes, first_bytes) << flag << variant;
    }
  }

  std::string tiny_input(int batch) {
    return std::to_string(batch) + "x3x8x8xf32=@" +
           model_path("small/tiny_input_b" + std::to_string(batch) + ".bin");
  }
  std::string tiny_ref(int batch) {
    return std::to_string(batch) + "x10xf32=@" +
           model_path("small/tiny_cnn.ref_b" + std::to_string(batch) + ".bin");
  }

  std::string dir_;
  std::string module_;
};

TEST_F(KilnCli, RunMatchesOnnxRuntimeAtTwoBatchSizesFromOneModule) {
  for (int batch : {1, 3}) {
    std::string out = dir_ + "/out" + std::to_string(batch) + ".npy";
    auto result = run_kiln("run --module=" + module_ +
                           " --device=cpu --input=" + tiny_input(batch) + " --output=@" + out +
                           " --expected_output=" + tiny_ref(batch) + " --atol=1e-6 --rtol=1e-5");
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("NaN: 0/" + std::to_string(batch * 10)), std::string::npos)
        << result.output;
    EXPECT_TRUE(fs::exists(out));
  }
}

// The null device (src/kiln/hal/null) runs the whole pipeline (load, plan, arena, bindings, a
// run, outputs written) and computes nothing: every output is zeros of the right shape, and a
// comparison with the real reference fails as a mismatch, not as an error.
TEST_F(KilnCli, RunOnTheNullDeviceWritesZeroOutputs) {
  const std::string out = dir_ + "/null.npy";
  auto result = run_kiln("run --module=" + module_ + " --device=null --input=" + tiny_input(3) +
                         " --output=@" + out + " --trace=" + dir_ + "/null_trace");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("output 0 'prob': 3x10xf32, NaN: 0/30"), std::string::npos)
      << result.output;
  const std::string traced = read_bytes(dir_ + "/null_trace/d000_conv0.json");
  EXPECT_NE(traced.find("null: Conv runs nothing"), std::string::npos) << traced;
  const std::string npy = read_bytes(out);
  ASSERT_GE(npy.size(), 120u);
  EXPECT_EQ(npy.substr(npy.size() - 120), std::string(120, '\0'));
  auto compared = run_kiln("run --module=" + module_ + " --device=null --input=" + tiny_input(3) +
                           " --expected_output=" + tiny_ref(3));
  EXPECT_EQ(compared.exit_code, 1) << compared.output;
}

TEST_F(KilnCli, AnUnknownDeviceListsTheAvailableOnes) {
  for (const char* command : {"run", "bench"}) {
    auto result = run_kiln(std::string(command) + " --module=" + module_ +
                           " --device=bogus --input=" + tiny_input(1));
    expect_error(result, {"unknown device 'bogus'", "available devices: cpu, null"});
  }
  auto help = run_kiln("run --help");
  EXPECT_NE(help.output.find("device to run on: cpu, null"), std::string::npos) << help.output;
}

// KILN_FAULT is read by the command and planted by triage's device decorator (docs/triage.md).
TEST_F(KilnCli, KilnFaultCorruptsTheSelectedDispatchAndAMalformedOneIsAUsageError) {
  setenv("KILN_FAULT", "dispatch:d7_softmax0:nan", 1);
  auto faulted = run_kiln("run --module=" + module_ + " --input=" + tiny_input(3));
  setenv("KILN_FAULT", "dispatch:0:melt", 1);
  auto malformed = run_kiln("run --module=" + module_ + " --input=" + tiny_input(3));
  unsetenv("KILN_FAULT");
  EXPECT_EQ(faulted.exit_code, 0) << faulted.output;
  EXPECT_NE(faulted.output.find("output 0 'prob': 3x10xf32, NaN: 30/30"), std::string::npos)
      << faulted.output;
  expect_error(malformed, {"KILN_FAULT='dispatch:0:melt'", "unknown kind 'melt'"});
}

TEST_F(KilnCli, BenchReportsFiguresAndPerDispatchTable) {
  std::string json = dir_ + "/bench.json";
  auto result = run_kiln("bench --module=" + module_ + " --input=" + tiny_input(3) +
                         " --threads=1 --warmup=1 --repeat=3 --per-dispatch --json=" + json);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* fragment :
       {"cold run", "median", "p90", "items/s", "peak RSS", "GFLOP/s", "Conv"}) {
    EXPECT_NE(result.output.find(fragment), std::string::npos) << fragment << " in:\n"
                                                               << result.output;
  }
  std::string report = read_bytes(json);
  for (const char* key :
       {"\"cold_ms\"", "\"min_ms\"", "\"median_ms\"", "\"p90_ms\"", "\"items_per_s\"",
        "\"peak_rss_mib\"", "\"module_mib\"", "\"gflop\"", "\"dispatches\"", "\"gflop_per_s\""}) {
    EXPECT_NE(report.find(key), std::string::npos) << key << " in:\n" << report;
  }
}

// --against times a second module in the same process, its runs alternating with --module's:
// here the dynamic module against the one compiled with N bound to 3.
TEST_F(KilnCli, BenchAgainstAPeerModuleReportsBothAndTheRatio) {
  const std::string bound = dir_ + "/tiny_n3.kmod";
  ASSERT_EQ(run_kiln("compile " + model_path("small/tiny_cnn.onnx") + " --bind N=3 -o " + bound)
                .exit_code,
            0);
  const std::string json = dir_ + "/against.json";
  auto result =
      run_kiln("bench --module=" + module_ + " --against=" + bound + " --input=" + tiny_input(3) +
               " --threads=1 --warmup=1 --repeat=5 --json=" + json);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("against " + bound + ": median"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("(median of 5 paired runs)"), std::string::npos) << result.output;
  const auto report = nlohmann::json::parse(read_bytes(json));
  ASSERT_TRUE(report.contains("against")) << report.dump(2);
  const auto& against = report["against"];
  EXPECT_EQ(against["module"], bound);
  ASSERT_EQ(against["times_ms"].size(), 5u);
  const double ratio = report["median_ms"].get<double>() / against["median_ms"].get<double>();
  EXPECT_DOUBLE_EQ(against["ratio_of_medians"].get<double>(), ratio);
  EXPECT_GT(against["median_of_pair_ratios"].get<double>(), 0.0);
}

// --against-threads: the peer session runs with its own thread count in the same process (kiln at
// 2 threads against itself at 1, as bench/under_load.py times it), and needs --against.
TEST_F(KilnCli, BenchAgainstThreadsGivesThePeerItsOwnTeam) {
  const std::string json = dir_ + "/against_threads.json";
  auto result =
      run_kiln("bench --module=" + module_ + " --against=" + module_ + " --input=" + tiny_input(3) +
               " --threads=2 --against-threads=1 --warmup=1 --repeat=3" + " --json=" + json);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto report = nlohmann::json::parse(read_bytes(json));
  EXPECT_NE(report["device"].get<std::string>().find(", 2 threads)"), std::string::npos)
      << report.dump(2);
  ASSERT_TRUE(report.contains("against")) << report.dump(2);
  EXPECT_NE(report["against"]["device"].get<std::string>().find(", 1 threads)"), std::string::npos)
      << report.dump(2);
  expect_error(run_kiln("bench --module=" + module_ + " --input=" + tiny_input(1) +
                        " --warmup=0 --repeat=1 --against-threads=1 --json=" + json + ".none"),
               {"--against-threads needs --against"}, json + ".none");
  expect_error(run_kiln("bench --module=" + module_ + " --against=" + module_ + " --input=" +
                        tiny_input(1) + " --warmup=0 --repeat=1 --against-threads=-1"),
               {"--against-threads"});
}

// --serve: after the warm-up, one JSON line saying it is ready, then each stdin line N answered
// by one JSON line of N run times, until `quit` or the end of input (bench/harness.py's servers).
TEST_F(KilnCli, BenchServeRunsAsStdinAsks) {
  auto serve = [&](const std::string& lines, const std::string& flags = "") {
    return testing::run_command("printf '" + lines + "' | " + testing::kiln_binary() +
                                " bench --module=" + module_ + " --input=" + tiny_input(3) +
                                " --threads=1 --warmup=1 --serve" + flags);
  };
  for (const char* ending : {"quit\\n", ""}) {  // `quit`, or the end of input
    auto result = serve(std::string("2\\n3\\n") + ending);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::istringstream lines(result.output);
    std::string line;
    ASSERT_TRUE(std::getline(lines, line)) << result.output;
    const auto ready = nlohmann::json::parse(line);
    EXPECT_EQ(ready["ready"], true) << line;
    for (const char* key : {"load_ms", "cold_ms", "gflop", "peak_rss_mib"}) {
      EXPECT_GT(ready[key].get<double>(), 0.0) << key << " in " << line;
    }
    for (size_t runs : {2u, 3u}) {
      ASSERT_TRUE(std::getline(lines, line)) << result.output;
      const auto times = nlohmann::json::parse(line)["times_ms"];
      ASSERT_EQ(times.size(), runs) << line;
      for (const auto& t : times) EXPECT_GT(t.get<double>(), 0.0) << line;
    }
    EXPECT_FALSE(std::getline(lines, line)) << "more than asked: " << line;
  }
  // A line that is not a run count: an error naming it, after the runs asked before it.
  for (const char* bad : {"abc", "0", "100001", "", "2x", "-1"}) {
    auto result = serve(std::string("1\\n") + bad + "\\n1\\n");
    expect_error(result, {"--serve: stdin line 2: expected a run count (1 to 100000) or 'quit', "});
    EXPECT_NE(result.output.find(std::string("got '") + bad + "'"), std::string::npos)
        << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 3) << result.output;
  }
  // It times --module alone and writes nothing else.
  const std::string json = dir_ + "/serve.json";
  for (const std::string& flags :
       {" --json=" + json, std::string(" --per-dispatch"), " --against=" + module_}) {
    expect_error(serve("1\\n", flags), {"--serve times only --module"}, json);
  }
}

// A peer module that is missing, or that does not take the inputs, is an error naming --against,
// and no JSON report is written.
TEST_F(KilnCli, BenchAgainstABadPeerIsAnErrorNamingIt) {
  const std::string json = dir_ + "/against.json";
  expect_error(run_kiln("bench --module=" + module_ + " --against=" + dir_ +
                        "/missing.kmod --input=" + tiny_input(1) + " --json=" + json),
               {"--against=", "missing.kmod"}, json);
  const std::string bound = dir_ + "/tiny_n3.kmod";
  ASSERT_EQ(run_kiln("compile " + model_path("small/tiny_cnn.onnx") + " --bind N=3 -o " + bound)
                .exit_code,
            0);
  expect_error(run_kiln("bench --module=" + module_ + " --against=" + bound +
                        " --input=" + tiny_input(1) + " --json=" + json),
               {"--against=", "tiny_n3.kmod"}, json);
}

TEST_F(KilnCli, RunProfileWritesAChromeTrace) {
  std::string trace = dir_ + "/trace.json";
  auto result = run_kiln("run --module=" + module_ + " --input=" + tiny_input(1) +
                         " --profile=" + trace + " --profile-runs=2");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::string text = read_bytes(trace);
  EXPECT_EQ(text.rfind("{\"displayTimeUnit\"", 0), 0u) << text.substr(0, 200);
  EXPECT_NE(text.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(text.find("\"ph\":\"X\""), std::string::npos);
  EXPECT_NE(text.find("\"run 1\""), std::string::npos);
  EXPECT_NE(text.find("\"cat\":\"Conv\""), std::string::npos);
}

TEST_F(KilnCli, ImportWritesIrThatCompiles) {
  std::string kir = dir_ + "/tiny.kir";
  auto imported =
      run_kiln("import " + model_path("small/tiny_cnn.onnx") + " --opset-version 17 -o " + kir);
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_EQ(read_bytes(kir).rfind("kiln-ir 1", 0), 0u);
  std::string module = dir_ + "/from_kir.kmod";
  auto compiled = run_kiln("compile " + kir + " --target=cpu -o " + module);
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  auto result = run_kiln("run --module=" + module + " --input=" + tiny_input(3) +
                         " --expected_output=" + tiny_ref(3) + " --atol=1e-6 --rtol=1e-5");
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// The ONNX backend test's TopK takes k as a graph input: its output size is bound from the data
// on each run, from a module compiled straight from ONNX or from `kiln import`'s IR.
TEST_F(KilnCli, DataDependentSizesAreBoundOnEachRun) {
  const std::string model = "/usr/share/libonnx-testdata/data/node/test_top_k/model.onnx";
  const std::string x = "'3x4xf32=0 1 2 3 4 5 6 7 11 10 9 8'";
  const std::string kir = dir_ + "/top_k.kir";
  ASSERT_EQ(run_kiln("import " + model + " -o " + kir).exit_code, 0);
  for (const std::string& source : {model, kir}) {
    const std::string module = dir_ + "/top_k.kmod";
    auto compiled = run_kiln("compile " + source + " -o " + module);
    ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
    EXPECT_NE(compiled.output.find("bound from data [TopK_0.size0]"), std::string::npos)
        << compiled.output;
    const std::string values = dir_ + "/values.npy";
    auto two = run_kiln("run --module=" + module + " --input=" + x + " --input=1xi64=2 --output=@" +
                        values + " --output=-");
    ASSERT_EQ(two.exit_code, 0) << two.output;
    EXPECT_NE(two.output.find("output 0 'values': 3x2xf32"), std::string::npos) << two.output;
    auto three = run_kiln("run --module=" + module + " --input=" + x +
                          " --input=1xi64=3 --output=-" + " --output=-");
    ASSERT_EQ(three.exit_code, 0) << three.output;
    EXPECT_NE(three.output.find("output 1 'indices': 3x3xi64\n"), std::string::npos)
        << three.output;
    EXPECT_EQ(three.output.find("3x3xi64, NaN"), std::string::npos) << three.output;
    fs::remove(values);
    expect_error(run_kiln("run --module=" + module + " --input=" + x +
                          " --input=1xi64=5 --output=@" + values + " --output=-"),
                 {"'K' = 5 is out of range [0, 4]", "(TopK)"}, values);
  }
}

TEST_F(KilnCli, MismatchExitsOneAndReportsErrors) {
  auto result = run_kiln("run --module=" + module_ + " --input=" + tiny_input(1) +
                         " --expected_output=" + inline_values("1x10xf32", 10));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("FAIL"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("first mismatch"), std::string::npos) << result.output;
}

TEST_F(KilnCli, TruncatedOnnxIsRefused) {
  std::string bytes = read_bytes(model_path("small/tiny_cnn.onnx"));
  std::string truncated = dir_ + "/truncated.onnx";
  write_bytes(truncated, bytes.substr(0, bytes.size() / 2));
  std::string out = dir_ + "/truncated.kmod";
  expect_error(run_kiln("compile " + truncated + " -o " + out), {"truncated.onnx"}, out);
}

TEST_F(KilnCli, CorruptOnnxIsRefused) {
  std::string corrupt = dir_ + "/corrupt.onnx";
  const char garbage[] = "\xff\xff\xff\xff this is not a protobuf \x01\x02";
  write_bytes(corrupt, std::string(garbage, sizeof(garbage) - 1));
  std::string out = dir_ + "/corrupt.kmod";
  expect_error(run_kiln("compile " + corrupt + " -o " + out), {"corrupt.onnx"}, out);
}

TEST_F(KilnCli, UnsupportedOpsAreAllListedWithTheirNodes) {
  std::string out = dir_ + "/unsupported.kmod";
  expect_error(run_kiln("compile " + model_path("small/unsupported.onnx") + " -o " + out),
               {"Bernoulli", "bernoulli_a", "bernoulli_b", "Multinomial", "multinomial_a"}, out);
}

TEST_F(KilnCli, WrongInputRankIsRefused) {
  std::string out = dir_ + "/o.npy";
  expect_error(run_kiln("run --module=" + module_ + " --input=" + inline_values("3x8x8xf32", 192) +
                        " --output=@" + out),
               {"'data'", "rank"}, out);
}

// fcn_segmenter's skip Concat assumes H and W are multiples of 4 (unprovable symbolically); a
// binding that breaks it is refused when the dispatch is planned, naming it, with no output.
TEST_F(KilnCli, BrokenShapeAssumptionIsRefusedAtRunTime) {
  std::string module = dir_ + "/fcn.kmod";
  auto compiled = run_kiln("compile " + model_path("nets/fcn_segmenter.onnx") + " -o " + module);
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  std::string out = dir_ + "/mask.npy";
  expect_error(run_kiln("run --module=" + module + " --input=" +
                        inline_values("1x3x50x32xf32", 1 * 3 * 50 * 32) + " --output=@" + out),
               {"assumption '2*floor((floor((H + 1)/2) + 1)/2) == floor((H + 1)/2)'",
                "node 'cat1' (Concat)", "H = 50", "26 vs 25"},
               out);
}

TEST_F(KilnCli, WrongInputDtypeIsRefused) {
  std::string out = dir_ + "/o.npy";
  expect_error(run_kiln("run --module=" + module_ +
                        " --input=" + inline_values("1x3x8x8xi64", 192) + " --output=@" + out),
               {"'data'", "dtype", "f32", "i64"}, out);
}

TEST_F(KilnCli, WrongInputDimIsRefused) {
  std::string out = dir_ + "/o.npy";
  expect_error(run_kiln("run --module=" + module_ +
                        " --input=" + inline_values("1x4x8x8xf32", 256) + " --output=@" + out),
               {"'data'", "dim 1", "expected 3", "got 4"}, out);
}

TEST_F(KilnCli, InputFileSizeMismatchIsRefused) {
  std::string out = dir_ + "/o.npy";
  expect_error(run_kiln("run --module=" + module_ + " --input=2x3x8x8xf32=@" +
                        model_path("small/tiny_input_b1.bin") + " --output=@" + out),
               {"tiny_input_b1.bin", "768", "1536"}, out);
}

TEST_F(KilnCli, CorruptedModuleIsRefused) {
  std::string bytes = read_bytes(module_);
  for (size_t offset : {size_t{70}, bytes.size() / 2, bytes.size() - 1}) {
    std::string damaged = bytes;
    damaged[offset] = static_cast<char>(damaged[offset] ^ 0x5a);
    std::string path = dir_ + "/damaged.kmod";
    write_bytes(path, damaged);
    std::string out = dir_ + "/o.npy";
    expect_error(
        run_kiln("run --module=" + path + " --input=" + tiny_input(1) + " --output=@" + out),
        {"damaged.kmod"}, out);
  }
  std::string path = dir_ + "/short.kmod";
  write_bytes(path, bytes.substr(0, bytes.size() - 100));
  expect_error(run_kiln("run --module=" + path + " --input=" + tiny_input(1)), {"short.kmod"});
}

TEST_F(KilnCli, ModuleOfAnotherFormatVersionIsRefused) {
  std::string bytes = read_bytes(module_);
  bytes[8] = 2;  // u32 format version at offset 8: the one before value forms
  std::string path = dir_ + "/v2.kmod";
  write_bytes(path, bytes);
  expect_error(run_kiln("run --module=" + path + " --input=" + tiny_input(1)),
               {"version 2", "recompile"});
}

TEST_F(KilnCli, ExternalDataInsideTheModelDirectoryWorks) {
  std::string out = dir_ + "/ext.kmod";
  auto compiled = run_kiln("compile " + model_path("small/external/model.onnx") + " -o " + out);
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  // y[0] = 1.5 * x, y[1] = -2 * x for a 1x1 conv.
  auto result = run_kiln("run --module=" + out +
                         " --input='1x1x2x2xf32=1 2 3 4' --expected_output='1x2x2x2xf32=1.5 3 4.5 "
                         "6 -2 -4 -6 -8' --atol=0");
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST_F(KilnCli, ExternalDataOutsideTheModelDirectoryIsRefused) {
  for (const char* model : {"small/escape_dotdot/model.onnx", "small/escape_abs/model.onnx"}) {
    std::string out = dir_ + "/escape.kmod";
    expect_error(run_kiln(std::string("compile ") + model_path(model) + " -o " + out),
                 {"'w'", "outside.bin"}, out);
  }
  std::string out = dir_ + "/range.kmod";
  expect_error(run_kiln("compile " + model_path("small/external_range/model.onnx") + " -o " + out),
               {"'w'", "weights.bin"}, out);
}

TEST_F(KilnCli, ShapesOverTheMemoryLimitAreRefusedBeforeAllocation) {
  std::string out = dir_ + "/o.npy";
  expect_error(run_kiln("run --module=" + module_ + " --input=" + tiny_input(3) +
                        " --max-memory=1K --output=@" + out),
               {"memory limit", "N=3"}, out);
  expect_error(
      run_kiln("run --module=" + module_ + " --input=" + tiny_input(1) + " --max-memory=lots"),
      {"--max-memory", "lots"});
  auto ok = run_kiln("run --module=" + module_ + " --input=" + tiny_input(1) + " --max-memory=64M");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST_F(KilnCli, PlanCacheBoundsAreFlagsOfRunAndBench) {
  const std::string run = "run --module=" + module_ + " --input=" + tiny_input(1);
  expect_error(run_kiln(run + " --max-plan-bytes=lots"), {"--max-plan-bytes", "lots"});
  expect_error(run_kiln(run + " --max-plans=0"), {"--max-plans"});
  // A plan over the byte bound alone still runs.
  auto ok = run_kiln(run + " --max-plans=1 --max-plan-bytes=1");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  std::string json = dir_ + "/bench.json";
  auto bench = run_kiln("bench --module=" + module_ + " --input=" + tiny_input(1) +
                        " --warmup=0 --repeat=1 --max-plans=2 --max-plan-bytes=64M --json=" + json);
  EXPECT_EQ(bench.exit_code, 0) << bench.output;
  expect_error(
      run_kiln("bench --module=" + module_ + " --input=" + tiny_input(1) + " --max-plan-bytes=0"),
      {"--max-plan-bytes"});
}

// `--team-policy` (docs/architecture.md "Threads on a busy machine"): each policy gives the same
// bits; an unknown one is an error naming the flag and the word, with no output written.
TEST_F(KilnCli, TeamPolicyIsAFlagOfRunAndBenchAndChangesNoBits) {
  expect_same_output("--threads=2 --team-policy=", {"full", "one-thread", "adaptive"});
  const std::string out = dir_ + "/team_bad.npy";
  expect_error(run_kiln("run --module=" + module_ + " --input=" + tiny_input(1) +
                        " --team-policy=solo --output=@" + out),
               {"--team-policy", "'solo'", "adaptive, full or one-thread"}, out);
  expect_error(run_kiln("bench --module=" + module_ + " --input=" + tiny_input(1) +
                        " --warmup=0 --repeat=1 --team-policy=Full"),
               {"--team-policy", "'Full'"});
  auto bench = run_kiln("bench --module=" + module_ + " --input=" + tiny_input(1) +
                        " --warmup=0 --repeat=2 --threads=2 --team-policy=one-thread");
  EXPECT_EQ(bench.exit_code, 0) << bench.output;
}

// `--sample-groups` (docs/architecture.md "Sample groups"): off, all, auto and a byte count give
// the same bits; anything else is an error naming the flag and the value, with no output.
TEST_F(KilnCli, SampleGroupsIsAFlagOfRunAndBenchAndChangesNoBits) {
  expect_same_output("--sample-groups=", {"off", "all", "auto", "64K"});
  const std::string out = dir_ + "/groups_bad.npy";
  expect_error(run_kiln("run --module=" + module_ + " --input=" + tiny_input(1) +
                        " --sample-groups=some --output=@" + out),
               {"--sample-groups", "'some'", "auto, off, all or a byte count"}, out);
  expect_error(run_kiln("bench --module=" + module_ + " --input=" + tiny_input(1) +
                        " --warmup=0 --repeat=1 --sample-groups=0"),
               {"--sample-groups", "'0'"});
  // One module with and without groups, alternating in one process.
  auto paired =
      run_kiln("bench --module=" + module_ + " --against=" + module_ + " --input=" + tiny_input(3) +
               " --warmup=0 --repeat=2 --sample-groups=all" + " --against-sample-groups=off");
  EXPECT_EQ(paired.exit_code, 0) << paired.output;
  EXPECT_NE(paired.output.find("--module/--against"), std::string::npos) << paired.output;
  expect_error(run_kiln("bench --module=" + module_ + " --against=" + module_ + " --input=" +
                        tiny_input(1) + " --warmup=0 --repeat=1 --against-sample-groups=none"),
               {"--against-sample-groups", "'none'"});
  expect_error(run_kiln("bench --module=" + module_ + " --input=" + tiny_input(1) +
                        " --warmup=0 --repeat=1 --against-sample-groups=off"),
               {"--against-sample-groups needs --against"});
}

TEST_F(KilnCli, UnknownTargetAndBadBindAreUsageErrors) {
  std::string out = dir_ + "/x.kmod";
  expect_error(run_kiln("compile " + model_path("small/tiny_cnn.onnx") + " --target=tpu -o " + out),
               {"tpu"}, out);
  expect_error(run_kiln("compile " + model_path("small/tiny_cnn.onnx") + " --bind M=3 -o " + out),
               {"'M'"}, out);
  expect_error(run_kiln("compile " + model_path("small/tiny_cnn.onnx") + " --bind N=x -o " + out),
               {"N=x"}, out);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(KilnCliWeights, InitializersListedAsInputsAreConstantsUnlessAsked) {
  std::string dir = testing::make_temp_dir("weights");
  std::string model = testing::model_path("small/weights_in_inputs.onnx");
  // Default: the initializer is a constant, so the module takes only x.
  auto compiled = testing::run_kiln("compile " + model + " -o " + dir + "/const.kmod");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  auto run = testing::run_kiln("run --module=" + dir +
                               "/const.kmod --input='1x1x2x2xf32=1 2 3 4' "
                               "--expected_output='1x2x2x2xf32=1.5 3 4.5 6 -2 -4 -6 -8' --atol=0");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  // --weights-as-inputs: w is a runtime input and the values given at run time are used.
  compiled =
      testing::run_kiln("compile " + model + " --weights-as-inputs -o " + dir + "/inputs.kmod");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  run = testing::run_kiln(
      "run --module=" + dir +
      "/inputs.kmod --input='1x1x2x2xf32=1 2 3 4' "
      "--input='2x1x1x1xf32=3 1' --expected_output='1x2x2x2xf32=3 6 9 12 1 2 3 4' --atol=0");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  run = testing::run_kiln("run --module=" + dir + "/inputs.kmod --input='1x1x2x2xf32=1 2 3 4'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("'w'"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(KilnCliSymbols, OneSymbolBoundToTwoValuesIsRefusedNamingBothInputs) {
  std::string dir = testing::make_temp_dir("symbols");
  auto compiled = testing::run_kiln("compile " + testing::model_path("small/two_inputs.onnx") +
                                    " -o " + dir + "/m.kmod");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  auto ok = testing::run_kiln(
      "run --module=" + dir +
      "/m.kmod --input='2x4xf32=1 2 3 4 5 6 7 8' "
      "--input='2x4xf32=1 1 1 1 1 1 1 1' --expected_output='2x4xf32=2 3 4 5 6 7 8 9' --atol=0");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  std::string out = dir + "/o.npy";
  auto bad = testing::run_kiln("run --module=" + dir +
                               "/m.kmod --input='1x4xf32=1 2 3 4' "
                               "--input='2x4xf32=1 1 1 1 1 1 1 1' --output=@" +
                               out);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  for (const char* fragment : {"'a'", "'b'", "'N'"}) {
    EXPECT_NE(bad.output.find(fragment), std::string::npos)
        << fragment << " missing in " << bad.output;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace kiln
