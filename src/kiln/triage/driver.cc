#include "kiln/triage/driver.h"

#include <stdlib.h>

#include <chrono>
#include <filesystem>

#include "kiln/base/file_util.h"
#include "kiln/compiler/model_loader.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/hal/registry.h"
#include "kiln/triage/report.h"

namespace kiln::triage {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The folder the reports go to: the one asked for, else a fresh kiln-triage-XXXXXX in the
// system's temporary folder ($TMPDIR, else /tmp), never the current directory.
StatusOr<std::string> make_output_dir(const std::string& requested) {
  if (!requested.empty()) return requested;
  std::error_code ec;
  const std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
  if (ec)
    return invalid_argument("no temporary folder for the reports ({}): pass -o DIR", ec.message());
  std::string pattern = (temp / "kiln-triage-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return invalid_argument("cannot create a folder in '{}' for the reports: pass -o DIR",
                            temp.string());
  }
  return pattern;
}

}  // namespace

StatusOr<TriageOutcome> run_triage(const TriageRequest& request) {
  const Clock::time_point start = Clock::now();
  TriageOutcome outcome;
  const bool against_module = ends_with(request.against, ".kmod");
  const std::optional<hal::DeviceInfo> against_device =
      against_module || request.against == "reference" || request.against == "onnxruntime"
          ? std::nullopt
          : hal::find_device(request.against);
  if (request.against != "reference" && request.against != "onnxruntime" && !against_module &&
      !against_device) {
    return invalid_argument(
        "--against='{}': expected reference, onnxruntime, a device ({}) or a module file (.kmod)",
        request.against, hal::device_names());
  }
  if (against_device && against_device->results != hal::DeviceResults::kComputed) {
    return invalid_argument("--against={}: that device computes no results to compare with",
                            request.against);
  }
  if (request.against == "onnxruntime" && !ends_with(request.model, ".onnx")) {
    return invalid_argument("--against=onnxruntime needs an .onnx model, got '{}'", request.model);
  }

  auto step = [&](std::string_view what) {
    if (request.progress) request.progress(what);
  };
  step("importing the model");
  Clock::time_point t = Clock::now();
  KILN_ASSIGN_OR_RETURN(ir::Graph graph, compiler::load_model(request.model, {}));
  outcome.timings_ms["import"] = ms_since(t);
  step("compiling");
  t = Clock::now();
  compiler::CompileOptions compile_options;
  compile_options.bind = request.bind;
  auto contents = compiler::compile(graph, compile_options);
  if (!contents.ok())
    return std::move(contents).status().with_note(fmt::format("compiling '{}'", request.model));
  auto module = std::make_shared<const module::ModuleContents>(std::move(contents).value());
  outcome.timings_ms["compile"] = ms_since(t);

  std::vector<Tensor> inputs = request.inputs;
  if (!request.input_args.empty()) {
    KILN_ASSIGN_OR_RETURN(inputs,
                          order_inputs("--input", request.input_args, input_names(*module)));
  }

  Triage triage(module, &graph, request.options);
  if (auto bound = triage.check_inputs(inputs); !bound.ok()) {
    return std::move(bound).status().with_note(
        fmt::format("checking --input against '{}'", request.model));
  }
  std::unique_ptr<runtime::Session> other;
  if (against_module) {
    auto loaded = runtime::Session::open(request.against, session_options(request.options));
    if (!loaded.ok()) return std::move(loaded).status().with_note("loading the --against module");
    other = std::move(loaded).value();
    const std::string what = fmt::format("--against module '{}'", request.against);
    KILN_RETURN_IF_ERROR(check_module_matches_graph(other->module(), graph, what));
    if (auto bound = other->bind(inputs); !bound.ok()) {
      return std::move(bound).status().with_note(fmt::format("checking --input against {}", what));
    }
  }

  if (against_device) {
    // The same module on the peer device, without the planted fault: the trusted side.
    runtime::SessionOptions peer = request.options.session;
    peer.device = request.against;
    auto created = runtime::Session::create(module, peer);
    if (!created.ok())
      return std::move(created).status().with_note("creating the --against device");
    other = std::move(created).value();
  }

  KILN_ASSIGN_OR_RETURN(const std::string output_dir, make_output_dir(request.output_dir));
  outcome.output_dir = output_dir;
  step("computing the reference (" + request.against + ")");
  t = Clock::now();
  ReferenceValues reference;
  if (against_module || against_device) {
    const std::string description =
        against_module ? fmt::format("module '{}'", request.against)
                       : fmt::format("the module on device {}", other->device_name());
    KILN_ASSIGN_OR_RETURN(reference, run_module_reference(*other, inputs, description));
  } else if (request.against == "onnxruntime") {
    OrtOptions ort = request.ort;
    if (ort.work_dir.empty()) ort.work_dir = output_dir + "/onnxruntime";
    std::vector<std::string> wanted;
    for (const std::string& name : triage.reference_names()) wanted.push_back(name);
    KILN_ASSIGN_OR_RETURN(reference, run_onnxruntime(request.model, graph, inputs, wanted, ort));
  } else {
    KILN_ASSIGN_OR_RETURN(reference, evaluate_reference(graph, inputs));
  }
  outcome.timings_ms["reference"] = ms_since(t);

  step("running the module dispatch by dispatch");
  KILN_ASSIGN_OR_RETURN(outcome.result, triage.run(inputs, reference));
  outcome.timings_ms["kiln run"] = outcome.result.kiln_ms;
  if (outcome.result.first_divergence)
    outcome.timings_ms["isolated re-run"] = outcome.result.isolate_ms;

  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  if (ec) return invalid_argument("cannot create '{}': {}", output_dir, ec.message());
  if (!outcome.result.clean()) {
    step("writing the repro");
    t = Clock::now();
    const Divergence& d = *outcome.result.first_divergence;
    ReproRequest repro;
    repro.graph = &graph;
    repro.module = module.get();
    repro.dispatch = d.dispatch;
    repro.reference = &reference;
    repro.model_inputs = inputs;
    for (const LayerReport& layer : outcome.result.layers) {
      if (layer.dispatch == d.dispatch) repro.tolerances.push_back(layer.tolerance);
    }
    repro.dir = output_dir + "/repro";
    repro.kiln = request.kiln;
    repro.fault = request.options.fault;
    repro.device = request.options.session.device;
    repro.summary = fmt::format(
        "kiln triage of '{}' against {}: first divergence at dispatch {} '{}'", request.model,
        reference.description, d.dispatch, module->dispatches[d.dispatch].name);
    KILN_ASSIGN_OR_RETURN(outcome.repro, write_repro(repro));
    outcome.timings_ms["repro"] = ms_since(t);
  }
  outcome.timings_ms["total"] = ms_since(start);

  ReportContext context;
  context.model = request.model;
  context.result = &outcome.result;
  context.repro = outcome.repro ? &*outcome.repro : nullptr;
  context.timings_ms = outcome.timings_ms;
  outcome.text = text_report(context);
  outcome.json = json_report(context);
  outcome.html_path = output_dir + "/report.html";
  KILN_RETURN_IF_ERROR(write_file_atomically(outcome.html_path, html_report(context)));
  return outcome;
}

}  // namespace kiln::triage
