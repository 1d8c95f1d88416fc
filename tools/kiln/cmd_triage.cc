#include <unistd.h>

#include <climits>
#include <cstdio>

#include "commands.h"
#include "flags.h"
#include "kiln/base/file_util.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/tooling/tensor_spec.h"
#include "kiln/triage/driver.h"
#include "step_progress.h"

namespace kiln::cli {
namespace {

struct TriageFlags {
  std::string model;
  std::vector<std::string> inputs;
  std::string against = "reference";
  std::vector<std::string> bind;
  std::string json;
  std::string output_dir;  // empty: a new folder in $TMPDIR (triage::TriageRequest)
  std::string device = "cpu";
  bool no_fallback = false;
  int threads = 0;
  double atol = 1e-5, rtol = 1e-4, scale_tol = 1e-4;
  std::string ort_runner;
  std::string node = "node";
};

// The running binary, so that the repro command works from any directory.
std::string self_path() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "kiln";
}

int run_triage(const TriageFlags& flags) {
  triage::TriageRequest request;
  request.model = flags.model;
  auto input_args = load_input_specs("--input", flags.inputs);
  if (!input_args.ok()) return report_error("triage", input_args.status());
  request.input_args = std::move(input_args).value();
  StepProgress progress("triage");
  request.progress = [&progress](std::string_view step) { progress.step(step); };
  auto bind = compiler::parse_bind_specs(flags.bind);
  if (!bind.ok()) return report_error("triage", bind.status());
  if (Status checked = check_output_flag("--json", flags.json); !checked.ok()) {
    return report_error("triage", checked);
  }
  request.bind = std::move(bind).value();
  request.against = flags.against;
  request.options.tolerance = {flags.atol, flags.rtol, flags.scale_tol};
  request.options.session.device = flags.device;
  request.options.session.allow_fallback = !flags.no_fallback;
  request.options.session.threads = flags.threads;
  auto fault = triage::fault_from_environment();
  if (!fault.ok()) return report_error("triage", fault.status());
  request.options.fault = std::move(fault).value();
  request.output_dir = flags.output_dir;
  request.kiln = self_path();
  request.ort.node = flags.node;
  request.ort.runner = flags.ort_runner.empty() ? triage::default_ort_runner() : flags.ort_runner;
  request.ort.threads = flags.threads;

  auto outcome = triage::run_triage(request);
  progress.done();
  if (!outcome.ok()) return report_error("triage", outcome.status());
  std::fputs(outcome->text.c_str(), stdout);
  std::printf("  report: %s\n", outcome->html_path.c_str());
  if (!flags.json.empty()) {
    Status written = write_file_atomically(flags.json, outcome->json.dump(2) + "\n");
    if (!written.ok())
      return report_error("triage", std::move(written).with_note("writing --json"));
  }
  return outcome->result.clean() ? kExitOk : kExitMismatch;
}

}  // namespace

Command add_triage_command(CLI::App& app) {
  auto flags = std::make_shared<TriageFlags>();
  CLI::App* sub = app.add_subcommand(
      "triage",
      "find the first dispatch that diverges from a reference, and the ONNX nodes behind it");
  sub->add_option("model", flags->model, "model file (.onnx, or .kir)")->required();
  sub->add_option("--input", flags->inputs, "input tensor, as for `kiln run` (repeatable)");
  sub->add_option(
      "--against", flags->against,
      "reference: the float64 evaluator (default), onnxruntime, a device (the same module there, "
      "no fault planted: --device=vulkan --against=cpu), or another module (.kmod)");
  sub->add_option("--bind", flags->bind,
                  "fix a symbolic dim of the module under test, e.g. --bind N=1");
  sub->add_option("--json", flags->json, "also write the findings as JSON to this file");
  sub->add_option("-o,--output-dir", flags->output_dir,
                  "where report.html and the repro go (default: a new kiln-triage-XXXXXX folder in "
                  "$TMPDIR or /tmp, printed at the end)");
  add_device_flags(sub, flags->device, flags->no_fallback);
  sub->add_option("--threads", flags->threads, "threads; 0: all cores")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--atol", flags->atol, "absolute tolerance floor per layer")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--rtol", flags->rtol, "relative tolerance per element")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--scale-tol", flags->scale_tol,
                  "atol grows by this fraction of the layer's largest |expected|")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--ort-runner", flags->ort_runner,
                  "tools/ort/run_ort.js, for --against=onnxruntime");
  sub->add_option("--node", flags->node, "node.js binary, for --against=onnxruntime");
  return {sub, [flags] { return run_triage(*flags); }};
}

}  // namespace kiln::cli
