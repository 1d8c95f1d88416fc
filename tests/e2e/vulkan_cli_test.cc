// The Vulkan device from the command line: `kiln devices` lists it with its limits, `--device=
// vulkan` runs a model (matching ONNX Runtime's outputs) and reports the dispatches that ran on
// the CPU fallback, `--no-fallback` refuses them, and a bad index is a clear error. The validation
// layer is on (KILN_VULKAN_VALIDATION=1 in every command).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/onnx/test_models.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

// Every kiln command the tests start inherits it.
const bool validation_on = [] {
  setenv("KILN_VULKAN_VALIDATION", "1", 1);
  return true;
}();

testing::CommandResult kiln_vulkan(const std::string& args) { return testing::run_kiln(args); }

// x [N, 4] -> Relu -> Hardmax -> y, compiled into `dir`: Hardmax has no GPU kernel, Relu has one.
std::string relu_hardmax_module(const std::string& dir) {
  onnx_import::testing::ModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {std::string("N"), int64_t{4}});
  b.output("y");
  b.node("Relu", {"x"}, {"r"}, "the_relu");
  b.node("Hardmax", {"r"}, {"y"}, "the_hardmax");
  const std::string model = dir + "/relu_hardmax.onnx";
  std::ofstream(model, std::ios::binary) << b.bytes();
  const std::string module = dir + "/relu_hardmax.kmod";
  auto compiled = testing::run_kiln("compile " + model + " -o " + module);
  EXPECT_EQ(compiled.exit_code, 0) << compiled.output;
  return module;
}

// tiny_cnn compiled into `dir`; its path.
std::string tiny_module(const std::string& dir) {
  const std::string module = dir + "/tiny.kmod";
  auto compiled =
      testing::run_kiln("compile " + testing::model_path("small/tiny_cnn.onnx") + " -o " + module);
  EXPECT_EQ(compiled.exit_code, 0) << compiled.output;
  return module;
}

std::string tiny_io(int batch) {
  const std::string n = std::to_string(batch);
  return " --input=" + n + "x3x8x8xf32=@" + testing::model_path("small/tiny_input_b" + n + ".bin") +
         " --expected_output=" + n + "x10xf32=@" +
         testing::model_path("small/tiny_cnn.ref_b" + n + ".bin");
}

TEST(VulkanCli, DevicesListsEveryBackendAndEachGpuWithItsLimits) {
  auto text = kiln_vulkan("devices");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  for (const char* fragment : {"cpu ", "null ", "vulkan ", "vulkan:0: ", "maxStorageBufferRange",
                               "maxComputeWorkGroupCount", "bufferDeviceAddress"}) {
    EXPECT_NE(text.output.find(fragment), std::string::npos) << fragment << " in\n" << text.output;
  }
  auto json = kiln_vulkan("devices --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const auto parsed = nlohmann::json::parse(json.output);
  bool found = false;
  for (const auto& device : parsed["devices"]) {
    if (device["name"] != "vulkan") continue;
    found = true;
    ASSERT_FALSE(device["instances"].empty());
    EXPECT_EQ(device["instances"][0]["name"], "vulkan:0");
    EXPECT_TRUE(device["instances"][0]["properties"].contains("subgroupSize"));
  }
  EXPECT_TRUE(found) << json.output;
}

TEST(VulkanCli, RunsAModelAtTwoBatchSizesMatchingOnnxRuntime) {
  const std::string module = tiny_module(testing::make_temp_dir("vulkan_cli_run"));
  for (int batch : {1, 3}) {
    auto run = kiln_vulkan("run --module=" + module + " --device=vulkan" + tiny_io(batch));
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("vs expected: PASS"), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("NaN: 0/"), std::string::npos) << run.output;
  }
}

TEST(VulkanCli, ReportsWhichDispatchesRanOnTheCpuFallbackAndWhy) {
  const std::string module = relu_hardmax_module(testing::make_temp_dir("vulkan_cli_report"));
  auto run = kiln_vulkan("run --module=" + module + " --device=vulkan:0 --input=2x4xf32=1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("1 of 2 dispatches run on the CPU fallback of vulkan:0"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("(Hardmax): the Vulkan backend has no Hardmax kernel"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("(Relu)"), std::string::npos) << run.output;
}

TEST(VulkanCli, NoFallbackRefusesNamingTheDispatchAndWritesNothing) {
  const std::string dir = testing::make_temp_dir("vulkan_cli_no_fallback");
  const std::string module = relu_hardmax_module(dir);
  auto run =
      kiln_vulkan("run --module=" + module +
                  " --device=vulkan --no-fallback --input=2x4xf32=1 --output=@" + dir + "/out.bin");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("(Hardmax) cannot run on the Vulkan device and fallback is off "
                            "(--no-fallback)"),
            std::string::npos)
      << run.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.bin"));
}

TEST(VulkanCli, BadDeviceIndexesAreClearErrors) {
  const std::string module = tiny_module(testing::make_temp_dir("vulkan_cli_index"));
  auto missing = kiln_vulkan("run --module=" + module + " --device=vulkan:7" + tiny_io(1));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("vulkan:7"), std::string::npos) << missing.output;
  EXPECT_NE(missing.output.find("kiln devices"), std::string::npos) << missing.output;
  auto word = kiln_vulkan("run --module=" + module + " --device=vulkan:gpu" + tiny_io(1));
  EXPECT_EQ(word.exit_code, 2) << word.output;
  EXPECT_NE(word.output.find("device index"), std::string::npos) << word.output;
  auto cpu = kiln_vulkan("run --module=" + module + " --device=cpu:1" + tiny_io(1));
  EXPECT_EQ(cpu.exit_code, 2) << cpu.output;
  EXPECT_NE(cpu.output.find("does not take"), std::string::npos) << cpu.output;
}

std::string tiny_triage(const std::string& dir, const std::string& against) {
  return "triage " + testing::model_path("small/tiny_cnn.onnx") +
         " --device=vulkan --against=" + against + " --input=3x3x8x8xf32=@" +
         testing::model_path("small/tiny_input_b3.bin") + " -o " + dir;
}

// `kiln triage --device=vulkan --against=cpu`: the same module on the CPU is the trusted side. A
// fault planted in one Vulkan conv (the CPU peer has none) is found at that dispatch, with its
// ONNX nodes, and the repro runs on vulkan; without the fault the run is clean.
TEST(VulkanCli, TriageAgainstTheCpuFindsAFaultPlantedInAGpuConv) {
  const std::string dir = testing::make_temp_dir("vulkan_cli_triage");
  auto faulty = testing::run_command("KILN_FAULT=dispatch:2:perturb=0.5 " + testing::kiln_binary() +
                                     " " + tiny_triage(dir + "/faulty", "cpu"));
  EXPECT_EQ(faulty.exit_code, 1) << faulty.output;
  EXPECT_NE(faulty.output.find("verdict: DIVERGED at dispatch 2 'd2_conv1' (Conv), ONNX nodes: "
                               "conv1"),
            std::string::npos)
      << faulty.output;
  EXPECT_NE(faulty.output.find("against the module on device cpu ("), std::string::npos)
      << faulty.output;
  EXPECT_NE(faulty.output.find("--device=vulkan"), std::string::npos) << faulty.output;
  auto clean = kiln_vulkan(tiny_triage(dir + "/clean", "cpu"));
  EXPECT_EQ(clean.exit_code, 0) << clean.output;
  EXPECT_NE(clean.output.find("verdict: CLEAN"), std::string::npos) << clean.output;
  auto placeholder = kiln_vulkan(tiny_triage(dir + "/null", "null"));
  EXPECT_EQ(placeholder.exit_code, 2) << placeholder.output;
  EXPECT_NE(placeholder.output.find("--against=null: that device computes no results"),
            std::string::npos)
      << placeholder.output;
}

// With the loader pointed at no driver, --device=vulkan fails cleanly (kiln devices still lists
// the CPU devices and says why there is no Vulkan one); so does validation without its layer.
TEST(VulkanCli, NoDriverOrNoValidationLayerIsAClearError) {
  const std::string module = tiny_module(testing::make_temp_dir("vulkan_cli_no_driver"));
  const std::string no_driver = "VK_ICD_FILENAMES=/nonexistent.json ";
  auto run = testing::run_kiln("run --module=" + module + " --device=vulkan" + tiny_io(1));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string kiln = testing::kiln_binary();
  auto failed = testing::run_command(no_driver + kiln + " run --module=" + module +
                                     " --device=vulkan" + tiny_io(1));
  EXPECT_EQ(failed.exit_code, 2) << failed.output;
  EXPECT_NE(failed.output.find("no Vulkan driver found"), std::string::npos) << failed.output;
  auto devices = testing::run_command(no_driver + kiln + " devices");
  EXPECT_EQ(devices.exit_code, 0) << devices.output;
  EXPECT_NE(devices.output.find("cpu "), std::string::npos) << devices.output;
  EXPECT_NE(devices.output.find("none available: no Vulkan driver found"), std::string::npos)
      << devices.output;
  // Validation asked for but the layer missing (the loader looks for layers only where told).
  auto no_layer = testing::run_command("VK_LAYER_PATH=/nonexistent " + kiln +
                                       " run --module=" + module + " --device=vulkan" + tiny_io(1));
  EXPECT_EQ(no_layer.exit_code, 2) << no_layer.output;
  EXPECT_NE(no_layer.output.find("asks for VK_LAYER_KHRONOS_validation, which is not installed"),
            std::string::npos)
      << no_layer.output;
}

}  // namespace
}  // namespace kiln
