#include <cstdio>

#include "commands.h"
#include "fallback_report.h"
#include "flags.h"
#include "kiln/base/file_util.h"
#include "kiln/runtime/session.h"
#include "kiln/tooling/comparator.h"
#include "kiln/tooling/tensor_io.h"
#include "kiln/tooling/tensor_spec.h"
#include "kiln/triage/tracer.h"
#include "profiling.h"

namespace kiln::cli {
namespace {

struct RunFlags {
  std::string module;
  std::string device = "cpu";
  bool no_fallback = false;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> expected;
  double atol = 1e-5;
  double rtol = 1e-5;
  ThreadFlags thread;
  bool trust_module = false;
  std::string trace;           // --trace=DIR
  std::string trace_dispatch;  // --trace-dispatch=N|NAME
  std::string max_memory;
  PlanCacheFlags plan_cache;
  std::string profile;  // --profile=trace.json
  int profile_runs = 3;
  bool print_all = false;  // --print-all
};

// ", NaN: 0/10, Inf: 0/10" for a float tensor; integers and bools have neither, so nothing.
std::string nonfinite_summary(const Tensor& tensor) {
  if (!is_float(tensor.dtype())) return "";
  int64_t nan = 0, inf = 0;
  if (tensor.dtype() == DType::kF32) {
    for (float v : tensor.values<float>()) {
      nan += std::isnan(v);
      inf += std::isinf(v);
    }
  } else if (is_float(tensor.dtype())) {
    for (int64_t i = 0; i < tensor.element_count(); ++i) {
      const double v = element_as_double(tensor, i);
      nan += std::isnan(v);
      inf += std::isinf(v);
    }
  }
  return fmt::format(", NaN: {}/{}, Inf: {}/{}", nan, tensor.element_count(), inf,
                     tensor.element_count());
}

int run_module(const RunFlags& flags) {
  if (!flags.trace_dispatch.empty() && flags.trace.empty()) {
    return report_error("run", invalid_argument("--trace-dispatch needs --trace=DIR"));
  }
  // Every spec is checked before any work, so a typo never costs a run or leaves partial output.
  auto input_args = load_input_specs("--input", flags.inputs);
  if (!input_args.ok()) return report_error("run", input_args.status());
  std::vector<OutputSpec> output_specs;
  for (const std::string& spec : flags.outputs) {
    auto parsed = parse_output_spec(spec);
    if (!parsed.ok())
      return report_error("run", std::move(parsed).status().with_note("in --output"));
    if (!parsed->to_stdout) {
      if (Status checked = check_output_flag("--output", parsed->path); !checked.ok()) {
        return report_error("run", checked);
      }
    }
    output_specs.push_back(std::move(parsed).value());
  }
  if (Status checked = check_output_flag("--profile", flags.profile); !checked.ok()) {
    return report_error("run", checked);
  }
  auto expected = load_tensor_specs("--expected_output", flags.expected);
  if (!expected.ok()) return report_error("run", expected.status());
  Tolerance tolerance{flags.atol, flags.rtol, false};

  runtime::SessionOptions options;
  options.device = flags.device;
  options.allow_fallback = !flags.no_fallback;
  if (Status threads = flags.thread.apply(options); !threads.ok()) {
    return report_error("run", threads);
  }
  options.trust_module = flags.trust_module;
  if (!flags.max_memory.empty()) {
    auto limit = parse_byte_size("--max-memory", flags.max_memory);
    if (!limit.ok()) return report_error("run", limit.status());
    options.max_memory_bytes = *limit;
  }
  if (Status bounds = flags.plan_cache.apply(options); !bounds.ok()) {
    return report_error("run", bounds);
  }
  if (Status fault = apply_fault_injection(options); !fault.ok()) return report_error("run", fault);
  auto session = open_module("--module", flags.module, options);
  if (!session.ok()) return report_error("run", session.status());
  const auto& module = (*session)->module();
  auto inputs = order_inputs("--input", std::move(input_args).value(), input_names(module));
  if (!inputs.ok()) return report_error("run", inputs.status());
  if (output_specs.size() > module.outputs.size() || expected->size() > module.outputs.size()) {
    return report_error(
        "run", invalid_argument("the module has {} output(s); got {} --output and {} "
                                "--expected_output",
                                module.outputs.size(), output_specs.size(), expected->size()));
  }
  std::unique_ptr<triage::Tracer> tracer;
  if (!flags.trace.empty()) {
    std::optional<std::string> only;
    if (!flags.trace_dispatch.empty()) only = flags.trace_dispatch;
    auto created = triage::Tracer::create(module, *inputs, flags.trace, only);
    if (!created.ok())
      return report_error("run", std::move(created).status().with_note("in --trace"));
    tracer = std::move(created).value();
  }
  Bindings bindings;
  auto outputs = (*session)->run(*inputs, tracer.get(), &bindings);
  if (outputs.ok() && !flags.profile.empty()) {
    // Warm runs only: the first run above paid for preparing kernels and touching memory.
    DispatchProfiler profiler(module.dispatches.size());
    Status profiled = profile_runs(**session, *inputs, flags.profile_runs, profiler);
    auto info = dispatch_info(**session, *inputs);
    if (profiled.ok() && !info.ok()) profiled = info.status();
    if (profiled.ok()) {
      profiled = write_file_atomically(flags.profile, chrome_trace_json(profiler, *info));
    }
    if (!profiled.ok()) return report_error("run", std::move(profiled).with_note("in --profile"));
    std::printf("profile: %d run(s) of %zu dispatches, median %.2f ms per run -> %s\n",
                flags.profile_runs, module.dispatches.size(), profiler.total_median_ms(),
                flags.profile.c_str());
  }
  if (outputs.ok() && tracer) {
    Status traced = tracer->finish(**session, bindings);
    if (!traced.ok()) return report_error("run", std::move(traced).with_note("in --trace"));
    for (const std::string& line : tracer->summary()) std::printf("trace %s\n", line.c_str());
  }
  if (!outputs.ok()) return report_error("run", outputs.status());
  if (Status reported = report_fallbacks("run", **session, bindings); !reported.ok())
    return report_error("run", reported);

  int exit_code = kExitOk;
  for (size_t i = 0; i < outputs->size(); ++i) {
    const Tensor& output = (*outputs)[i];
    const std::string& name = module.values[module.outputs[i]].name;
    std::printf("output %zu '%s': %s%s\n", i, name.c_str(),
                format_tensor_type(output.dtype(), output.shape()).c_str(),
                nonfinite_summary(output).c_str());
    if (i < output_specs.size()) {
      Status written = write_output(output_specs[i], output, stdout, flags.print_all);
      if (!written.ok())
        return report_error("run", std::move(written).with_note("writing output '" + name + "'"));
    }
    if (i < expected->size()) {
      auto result = compare_tensors(output, (*expected)[i], tolerance);
      if (!result.ok())
        return report_error(
            "run", std::move(result).status().with_note("comparing output '" + name + "'"));
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
  add_device_flags(sub, flags->device, flags->no_fallback);
  sub->add_option("--input", flags->inputs,
                  "input tensor: SHAPExDTYPE=@file.bin|@file.npy|values, or NAME=SPEC for the "
                  "input NAME (repeatable; positional ones fill the inputs not named, in order)");
  sub->add_option("--output", flags->outputs,
                  "where output i goes: @file.bin, @file.npy or - (repeatable); - prints over "
                  "1000 values summarized, the first and last 3 along each dim");
  sub->add_flag("--print-all", flags->print_all, "--output=- prints every value");
  sub->add_option("--expected_output", flags->expected,
                  "expected output i, same forms as --input (repeatable)");
  sub->add_option("--atol", flags->atol, "absolute tolerance for --expected_output")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--rtol", flags->rtol, "relative tolerance for --expected_output")
      ->check(CLI::NonNegativeNumber);
  flags->thread.add_to(sub);
  sub->add_flag("--trust-module", flags->trust_module, "skip the module checksum");
  sub->add_option(
      "--trace", flags->trace,
      "write every dispatch's inputs and outputs (.npy), descriptions and a summary to DIR");
  sub->add_option("--trace-dispatch", flags->trace_dispatch,
                  "with --trace: only this dispatch (index, dispatch name or ONNX node name)");
  sub->add_option("--profile", flags->profile,
                  "after the run, time every dispatch over --profile-runs more runs and write "
                  "them as a Chrome trace (JSON; opens in Perfetto or chrome://tracing)");
  sub->add_option("--profile-runs", flags->profile_runs, "runs in the --profile trace")
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-memory", flags->max_memory,
                  "refuse inputs whose activations need more, e.g. 2G (default: 3/4 of RAM)");
  flags->plan_cache.add_to(sub);
  return {sub, [flags] { return run_module(*flags); }};
}

}  // namespace kiln::cli
