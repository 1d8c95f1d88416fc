// kiln's command-line conventions, as users of IREE's and ONNX Runtime's tools expect them:
// --version, `kiln info`, named inputs, splat inputs, summarized printing, defaults in every
// --help, memory sizes with units, and the hint when a model is given where a module belongs.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <string>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

// `kiln compile MODEL FLAGS -o MODULE` for a test model (relative to the model folder); the
// compile's exit code and output.
testing::CommandResult compile(const std::string& model, const std::string& module,
                               const std::string& flags = "") {
  return testing::run_kiln("compile " + testing::model_path(model) + flags + " -o " + module);
}

// `kiln --version` names the release (CMake's project version), the oneDNN it runs on and the
// module format it reads and writes; `kiln --help` shows the release too.
TEST(KilnCliVersion, VersionNamesKilnOneDnnAndTheModuleFormat) {
  auto version = testing::run_kiln("--version");
  EXPECT_EQ(version.exit_code, 0) << version.output;
  EXPECT_EQ(version.output.rfind("kiln 0.1.0\n", 0), 0u) << version.output;
  const size_t onednn = version.output.find("\noneDNN ");
  ASSERT_NE(onednn, std::string::npos) << version.output;
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(version.output[onednn + 8])))
      << version.output;
  EXPECT_NE(version.output.find("\nmodule format 3"), std::string::npos) << version.output;
  auto help = testing::run_kiln("--help");
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_NE(help.output.find("kiln 0.1.0"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("--version"), std::string::npos) << help.output;
}

nlohmann::json info_json(const std::string& file) {
  auto result = testing::run_kiln("info " + file + " --json 2>/dev/null");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return nlohmann::json::parse(result.output);
}

// `kiln info` on a module: inputs and outputs with symbolic shapes, symbols, dispatches,
// constants and the format; as text and as JSON.
TEST(KilnCliInfo, AModuleShowsItsSignatureAndContents) {
  const std::string dir = testing::make_temp_dir("info_module");
  const std::string module = dir + "/tiny.kmod";
  ASSERT_EQ(compile("small/tiny_cnn.onnx", module).exit_code, 0);
  auto text = testing::run_kiln("info " + module);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  for (const char* fragment : {"data: f32[N,3,8,8]", "prob: f32[N,10]", "symbols: N",
                               "dispatches: 8", "format 3", "bytes"}) {
    EXPECT_NE(text.output.find(fragment), std::string::npos) << fragment << " in\n" << text.output;
  }
  const auto info = info_json(module);
  EXPECT_EQ(info["kind"], "module");
  EXPECT_EQ(info["format_version"], 3);
  EXPECT_EQ(info["producer"].get<std::string>().rfind("kiln ", 0), 0u);
  ASSERT_EQ(info["inputs"].size(), 1u);
  EXPECT_EQ(info["inputs"][0]["name"], "data");
  EXPECT_EQ(info["inputs"][0]["dtype"], "f32");
  EXPECT_EQ(info["inputs"][0]["shape"], nlohmann::json::parse(R"(["N", 3, 8, 8])"));
  EXPECT_EQ(info["outputs"][0]["shape"], nlohmann::json::parse(R"(["N", 10])"));
  EXPECT_EQ(info["symbols"], nlohmann::json::parse(R"(["N"])"));
  EXPECT_EQ(info["dispatches"], 8);
  EXPECT_GT(info["constant_bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(info["assumptions"].is_array());
  auto missing = testing::run_kiln("info " + dir + "/missing.kmod");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("missing.kmod"), std::string::npos) << missing.output;
}

// Both ResNet-50s, as ONNX and compiled, show the symbolic batch dim N.
TEST(KilnCliInfo, ResNetModelsAndModulesShowTheSymbolicBatch) {
  const std::string dir = testing::make_temp_dir("info_resnet");
  for (const std::string name : {"resnet50-v1-12", "resnet50-v2-7"}) {
    const std::string model = testing::model_path(name + ".onnx");
    const std::string module = dir + "/" + name + ".kmod";
    auto compiled = testing::run_kiln("compile " + model + " -o " + module);
    ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
    for (const std::string& file : {model, module}) {
      const auto info = info_json(file);
      EXPECT_EQ(info["kind"], file == model ? "model" : "module");
      ASSERT_EQ(info["inputs"].size(), 1u) << info.dump(2);
      EXPECT_EQ(info["inputs"][0]["name"], "data");
      EXPECT_EQ(info["inputs"][0]["shape"], nlohmann::json::parse(R"(["N", 3, 224, 224])"));
      ASSERT_EQ(info["outputs"].size(), 1u) << info.dump(2);
      EXPECT_EQ(info["outputs"][0]["shape"], nlohmann::json::parse(R"(["N", 1000])"));
      if (file == model) {
        EXPECT_GT(info["nodes"].get<int>(), 100);
        EXPECT_EQ(info["opset"], 17);
      } else {
        EXPECT_GT(info["dispatches"].get<int>(), 50);
        EXPECT_GT(info["constant_bytes"].get<int64_t>(), 90'000'000);
      }
    }
    auto text = testing::run_kiln("info " + model);
    EXPECT_NE(text.output.find("data: f32[N,3,224,224]"), std::string::npos) << text.output;
  }
}

// --input=NAME=SPEC gives the input NAME; positional inputs fill the inputs not named, in order.
TEST(KilnCliNamedInputs, NamedInputsGoToTheirInputsInAnyOrder) {
  const std::string dir = testing::make_temp_dir("named_inputs");
  const std::string module = dir + "/inputs.kmod";
  ASSERT_EQ(compile("small/weights_in_inputs.onnx", module, " --weights-as-inputs").exit_code, 0);
  const std::string run = "run --module=" + module;
  const std::string x = "'1x1x2x2xf32=1 2 3 4'", w = "'2x1x1x1xf32=3 1'";
  const std::string expected = " --expected_output='1x2x2x2xf32=3 6 9 12 1 2 3 4' --atol=0";
  for (const std::string& inputs :
       {" --input=w=" + w + " --input=x=" + x, " --input=x=" + x + " --input=w=" + w,
        " --input=w=" + w + " --input=" + x, " --input=" + x + " --input=w=" + w}) {
    auto result = testing::run_kiln(run + inputs + expected);
    EXPECT_EQ(result.exit_code, 0) << inputs << "\n" << result.output;
  }
  auto bench = testing::run_kiln("bench --module=" + module + " --input=w=" + w +
                                 " --input=x=" + x + " --warmup=0 --repeat=1");
  EXPECT_EQ(bench.exit_code, 0) << bench.output;
}

TEST(KilnCliNamedInputs, UnknownRepeatedOrMissingNamesAreUsageErrors) {
  const std::string dir = testing::make_temp_dir("named_input_errors");
  const std::string module = dir + "/inputs.kmod";
  ASSERT_EQ(compile("small/weights_in_inputs.onnx", module, " --weights-as-inputs").exit_code, 0);
  const std::string run = "run --module=" + module;
  const std::string x = "'1x1x2x2xf32=1 2 3 4'", w = "'2x1x1x1xf32=3 1'";
  struct Case {
    std::string inputs;
    std::vector<std::string> fragments;
  };
  for (const Case& c : std::vector<Case>{
           {" --input=weights=" + w + " --input=" + x, {"no input 'weights'", "inputs are: x, w"}},
           {" --input=x=" + x + " --input=x=" + x, {"input 'x' is given twice"}},
           {" --input=w=" + w, {"no value for input 'x'"}},
           {" --input=w=" + w + " --input=" + x + " --input=" + x, {"the module takes 2: x, w"}}}) {
    auto result = testing::run_kiln(run + c.inputs);
    EXPECT_EQ(result.exit_code, 2) << c.inputs << "\n" << result.output;
    for (const std::string& fragment : c.fragments) {
      EXPECT_NE(result.output.find(fragment), std::string::npos) << fragment << " in\n"
                                                                 << result.output;
    }
    EXPECT_NE(result.output.find("--input"), std::string::npos) << result.output;
  }
}

// --input=1x3x8x8xf32=0: one value fills the whole tensor (IREE's splat); a wrong count of
// several values is still an error.
TEST(KilnCliSplat, OneValueFillsTheWholeInput) {
  const std::string dir = testing::make_temp_dir("splat");
  const std::string module = dir + "/inputs.kmod";
  ASSERT_EQ(compile("small/weights_in_inputs.onnx", module, " --weights-as-inputs").exit_code, 0);
  auto result = testing::run_kiln("run --module=" + module +
                                  " --input=1x1x2x2xf32=2 --input=w=2x1x1x1xf32=3 "
                                  "--expected_output=1x2x2x2xf32=6 --atol=0");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  auto wrong = testing::run_kiln("run --module=" + module +
                                 " --input='1x1x2x2xf32=1 2' --input=2x1x1x1xf32=3");
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("needs 4 values, got 2"), std::string::npos) << wrong.output;
}

// --output=- prints over 1000 values summarized (the first and last 3 along each dim);
// --print-all prints them all.
TEST(KilnCliPrint, LargeOutputsAreSummarizedUnlessPrintAll) {
  const std::string dir = testing::make_temp_dir("print");
  const std::string module = dir + "/w.kmod";
  ASSERT_EQ(compile("small/weights_in_inputs.onnx", module).exit_code, 0);
  const std::string run = "run --module=" + module + " --input=200x1x2x2xf32=1 --output=-";
  auto summary = testing::run_kiln(run);
  ASSERT_EQ(summary.exit_code, 0) << summary.output;
  EXPECT_NE(summary.output.find("200x2x2x2xf32\n[0,0,0,0]: 1.5 1.5\n"), std::string::npos)
      << summary.output;
  EXPECT_NE(summary.output.find("[2,1,1,0]: -2 -2\n...\n[197,0,0,0]: 1.5 1.5\n"), std::string::npos)
      << summary.output;
  EXPECT_NE(summary.output.find("(1600 values;"), std::string::npos) << summary.output;
  EXPECT_EQ(summary.output.find("[100,0,0,0]"), std::string::npos) << summary.output;
  auto all = testing::run_kiln(run + " --print-all");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_NE(all.output.find("[100,0,0,0]: 1.5 1.5\n"), std::string::npos) << all.output;
  EXPECT_EQ(all.output.find("..."), std::string::npos) << all.output;
}

// Every --help shows each option's default after its type.
TEST(KilnCliHelp, EveryHelpShowsTheDefaults) {
  struct Case {
    const char* command;
    std::vector<const char*> fragments;
  };
  for (const Case& c : std::vector<Case>{
           {"run",
            {"--atol FLOAT:NONNEGATIVE=1e-05", "--rtol FLOAT:NONNEGATIVE=1e-05",
             "--device TEXT=cpu", "--profile-runs INT:POSITIVE=3", "--max-plans UINT:POSITIVE=64",
             "--threads INT:NONNEGATIVE=0"}},
           {"bench", {"--warmup INT:NONNEGATIVE=3", "--repeat INT:POSITIVE=10"}},
           {"compile", {"--target TEXT=cpu", "--opset-version INT=17"}},
           {"import", {"--opset-version INT=17"}},
           {"triage", {"--rtol FLOAT:NONNEGATIVE=0.0001", "--against TEXT=reference"}},
           {"test-suite", {"--jobs INT:POSITIVE=1", "--backend TEXT=cpu"}}}) {
    auto help = testing::run_kiln(std::string(c.command) + " --help");
    EXPECT_EQ(help.exit_code, 0) << help.output;
    for (const char* fragment : c.fragments) {
      EXPECT_NE(help.output.find(fragment), std::string::npos)
          << c.command << ": " << fragment << " in\n"
          << help.output;
    }
    EXPECT_EQ(help.output.find("=[]"), std::string::npos) << help.output;
  }
}

// --max-memory takes K/M/G/T and KiB..TiB (powers of 1024) and KB..TB (powers of 1000); a bad
// value is an error naming the flag and the value.
TEST(KilnCliMaxMemory, UnitsArePowersOf1024Or1000) {
  const std::string dir = testing::make_temp_dir("max_memory");
  const std::string module = dir + "/tiny.kmod";
  ASSERT_EQ(compile("small/tiny_cnn.onnx", module).exit_code, 0);
  const std::string run = "run --module=" + module + " --input=3x3x8x8xf32=0 --max-memory=";
  for (const auto& [flag, limit] : std::vector<std::pair<std::string, std::string>>{
           {"1K", "1024"}, {"1KiB", "1024"}, {"1KB", "1000"}, {"2kb", "2000"}, {"3000", "3000"}}) {
    auto result = testing::run_kiln(run + flag);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find("over the memory limit of " + limit + " bytes"), std::string::npos)
        << flag << ": " << result.output;
  }
  for (const char* flag : {"64M", "64MiB", "64MB", "1G", "1GiB", "1GB", "1T", "1TiB", "1TB"}) {
    auto result = testing::run_kiln(run + flag);
    EXPECT_EQ(result.exit_code, 0) << flag << ": " << result.output;
  }
  for (const char* flag : {"lots", "2XB", "0", "20000000T", "1.5G", "-1G", "G"}) {
    auto result = testing::run_kiln(run + flag);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find(std::string("--max-memory '") + flag + "'"), std::string::npos)
        << result.output;
  }
}

// A model given where a compiled module belongs is refused with the `kiln compile` to run.
TEST(KilnCliModule, AModelAsTheModuleSuggestsKilnCompile) {
  const std::string dir = testing::make_temp_dir("model_as_module");
  const std::string model = testing::model_path("small/tiny_cnn.onnx");
  for (const std::string command : {"run", "bench"}) {
    auto result = testing::run_kiln(command + " --module=" + model + " --input=1x3x8x8xf32=0");
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find("is a model, not a compiled module"), std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find("kiln compile " + model + " -o tiny_cnn.kmod"), std::string::npos)
        << result.output;
  }
  // Whatever its name, a file that is no module says what writes one.
  const std::string renamed = dir + "/model.bin";
  std::filesystem::copy_file(model, renamed);
  auto result = testing::run_kiln("run --module=" + renamed + " --input=1x3x8x8xf32=0");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("kiln compile MODEL -o MODULE.kmod"), std::string::npos)
      << result.output;
}

// `kiln compile` and `kiln triage` show the step they are at on one line of a terminal (here a
// pseudo-terminal made by `script`), cleared before their results; a pipe gets none of it.
TEST(KilnCliProgress, LongStepsShowOnATerminalOnly) {
  const std::string dir = testing::make_temp_dir("progress");
  const std::string compile_args =
      "compile " + testing::model_path("small/tiny_cnn.onnx") + " -o " + dir + "/tiny.kmod";
  auto piped = testing::run_kiln(compile_args);
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(piped.output.find("[compile]"), std::string::npos) << piped.output;

  auto on_terminal = [&](const std::string& args) {
    return testing::run_command("script -qec '" + testing::kiln_binary() + " " + args +
                                "' /dev/null");
  };
  auto compiled = on_terminal(compile_args);
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  for (const char* step : {"\r\033[K[compile] importing the model...", "[compile] compiling...",
                           "[compile] writing the module...\r\033[Kcompiled 'tiny_cnn'"}) {
    EXPECT_NE(compiled.output.find(step), std::string::npos) << step << " in\n" << compiled.output;
  }
  auto triaged = on_terminal(
      "triage " + testing::model_path("small/tiny_cnn.onnx") + " --input=1x3x8x8xf32=@" +
      testing::model_path("small/tiny_input_b1.bin") + " -o " + dir + "/triage");
  ASSERT_EQ(triaged.exit_code, 0) << triaged.output;
  for (const char* step : {"[triage] computing the reference (reference)...",
                           "[triage] running the module dispatch by dispatch...\r\033[K"}) {
    EXPECT_NE(triaged.output.find(step), std::string::npos) << step << " in\n" << triaged.output;
  }
}

}  // namespace
}  // namespace kiln
