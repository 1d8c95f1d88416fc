#include <cstdio>

#include "commands.h"
#include "kiln/runtime/session.h"
#include "kiln/tooling/comparator.h"
#include "kiln/tooling/tensor_io.h"
#include "kiln/tooling/tensor_spec.h"

namespace kiln::cli {
namespace {

struct RunFlags {
  std::string module;
  std::string device = "cpu";
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> expected;
  double atol = 1e-5;
  double rtol = 1e-5;
  int threads = 0;
  bool trust_module = false;
};

std::string nonfinite_summary(const Tensor& tensor) {
  int64_t nan = 0, inf = 0;
  if (tensor.dtype() == DType::kF32) {
    for (float v : tensor.values<float>()) {
      nan += std::isnan(v);
      inf += std::isinf(v);
    }
  }
  return fmt::format("NaN: {}/{}, Inf: {}/{}", nan, tensor.element_count(), inf, tensor.element_count());
}

int run_module(const RunFlags& flags) {
  // Every spec is checked before any work, so a typo never costs a run or leaves partial output.
  std::vector<Tensor> inputs;
  for (const std::string& spec : flags.inputs) {
    auto tensor = parse_tensor_spec(spec);
    if (!tensor.ok()) return report_error("run", std::move(tensor).status().with_note("in --input"));
    inputs.push_back(std::move(tensor).value());
  }
  std::vector<OutputSpec> output_specs;
  for (const std::string& spec : flags.outputs) {
    auto parsed = parse_output_spec(spec);
    if (!parsed.ok()) return report_error("run", std::move(parsed).status().with_note("in --output"));
    output_specs.push_back(std::move(parsed).value());
  }
  std::vector<Tensor> expected;
  for (const std::string& spec : flags.expected) {
    auto tensor = parse_tensor_spec(spec);
    if (!tensor.ok()) return report_error("run", std::move(tensor).status().with_note("in --expected_output"));
    expected.push_back(std::move(tensor).value());
  }
  Tolerance tolerance{flags.atol, flags.rtol, false};

  runtime::SessionOptions options;
  options.device = flags.device;
  options.threads = flags.threads;
  options.trust_module = flags.trust_module;
  auto session = runtime::Session::open(flags.module, options);
  if (!session.ok()) return report_error("run", session.status());
  const auto& module = (*session)->module();
  if (output_specs.size() > module.outputs.size() || expected.size() > module.outputs.size()) {
    return report_error("run", invalid_argument("the module has {} output(s); got {} --output and {} "
                                                "--expected_output",
                                                module.outputs.size(), output_specs.size(), expected.size()));
  }
  auto outputs = (*session)->run(inputs);
  if (!outputs.ok()) return report_error("run", outputs.status());

  int exit_code = kExitOk;
  for (size_t i = 0; i < outputs->size(); ++i) {
    const Tensor& output = (*outputs)[i];
    const std::string& name = module.values[module.outputs[i]].name;
    std::printf("output %zu '%s': %s, %s\n", i, name.c_str(),
                format_tensor_type(output.dtype(), output.shape()).c_str(), nonfinite_summary(output).c_str());
    if (i < output_specs.size()) {
      Status written = write_output(output_specs[i], output, stdout);
      if (!written.ok()) return report_error("run", std::move(written).with_note("writing output '" + name + "'"));
    }
    if (i < expected.size()) {
      auto result = compare_tensors(output, expected[i], tolerance);
      if (!result.ok()) return report_error("run", std::move(result).status().with_note("comparing output '" + name + "'"));
      std::printf("  vs expected: %s\n", format_compare_result(*result, tolerance).c_str());
      if (!result->passed()) exit_code = kExitMismatch;
    }
  }
  return exit_code;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* sub = app.add_subcommand("run", "run a compiled module on inputs");
  sub->add_option("--module", flags->module, "module file (.kmod)")->required();
  sub->add_option("--device", flags->device, "device to run on (cpu)");
  sub->add_option("--input", flags->inputs, "input tensor: SHAPExDTYPE=@file.bin|@file.npy|values (repeatable)");
  sub->add_option("--output", flags->outputs, "where output i goes: @file.bin, @file.npy or - (repeatable)");
  sub->add_option("--expected_output", flags->expected, "expected output i, same forms as --input (repeatable)");
  sub->add_option("--atol", flags->atol, "absolute tolerance for --expected_output")->check(CLI::NonNegativeNumber);
  sub->add_option("--rtol", flags->rtol, "relative tolerance for --expected_output")->check(CLI::NonNegativeNumber);
  sub->add_option("--threads", flags->threads, "threads (default: all cores)")->check(CLI::NonNegativeNumber);
  sub->add_flag("--trust-module", flags->trust_module, "skip the module checksum");
  return {sub, [flags] { return run_module(*flags); }};
}

}  // namespace kiln::cli
