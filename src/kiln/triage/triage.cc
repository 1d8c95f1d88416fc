#include "kiln/triage/triage.h"

#include <algorithm>
#include <chrono>

#include "kiln/triage/fault_device.h"
#include "kiln/triage/isolate.h"

namespace kiln::triage {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Compares each dispatch output with the reference as the run goes, so that only the first
// diverging dispatch's outputs are kept.
class Comparer : public hal::RunObserver {
 public:
  Comparer(const module::ModuleContents& module, const std::vector<std::string>& names,
           const ReferenceValues& reference, const TriageOptions& options, TriageResult& result)
      : module_(module), names_(names), reference_(reference), options_(options), result_(result) {}

  bool wants_outputs(int32_t) override {
    return options_.compare_after_divergence || !result_.first_divergence;
  }

  Status after_dispatch(int32_t d, double elapsed_ms, std::span<const Tensor> outputs) override {
    const module::Dispatch& dispatch = module_.dispatches[d];
    if (outputs.empty()) return ok_status();
    bool failed = false;
    for (size_t i = 0; i < outputs.size(); ++i) {
      LayerReport layer;
      layer.dispatch = d;
      layer.dispatch_name = dispatch.name;
      layer.op_type = dispatch.op_type;
      layer.nodes = dispatch.origins;
      layer.output = static_cast<int32_t>(i);
      layer.value = names_[dispatch.outputs[i]];
      layer.shape = outputs[i].shape();
      layer.elapsed_ms = elapsed_ms;
      if (auto it = reference_.values.find(layer.value); it != reference_.values.end()) {
        layer.compared = true;
        layer.expected_max_abs = compute_stats(it->second).max_abs;
        KILN_ASSIGN_OR_RETURN(layer.tolerance,
                              layer_tolerance(options_.tolerance, layer.expected_max_abs));
        auto compared = compare_tensors(outputs[i], it->second, layer.tolerance);
        if (compared.ok()) {
          layer.result = std::move(compared).value();
        } else {
          layer.error = compared.status().message();
        }
      }
      failed |= !layer.passed();
      result_.layers.push_back(std::move(layer));
    }
    if (failed && !result_.first_divergence) {
      Divergence divergence;
      divergence.layer = result_.layers.size() - outputs.size();
      while (result_.layers[divergence.layer].passed()) ++divergence.layer;
      divergence.dispatch = d;
      divergence.actual.assign(outputs.begin(), outputs.end());
      result_.first_divergence = std::move(divergence);
    }
    return ok_status();
  }

 private:
  const module::ModuleContents& module_;
  const std::vector<std::string>& names_;
  const ReferenceValues& reference_;
  const TriageOptions& options_;
  TriageResult& result_;
};

}  // namespace

runtime::SessionOptions session_options(const TriageOptions& options) {
  runtime::SessionOptions out = options.session;
  if (!options.fault) return out;
  hal::DeviceDecorator fault = fault_decorator(options.fault);
  if (!out.decorate_device) {
    out.decorate_device = std::move(fault);
  } else {
    out.decorate_device =
        [first = std::move(out.decorate_device), fault = std::move(fault)](
            std::unique_ptr<hal::Device> device) -> StatusOr<std::unique_ptr<hal::Device>> {
      KILN_ASSIGN_OR_RETURN(device, first(std::move(device)));
      return fault(std::move(device));
    };
  }
  return out;
}

Triage::Triage(std::shared_ptr<const module::ModuleContents> module, const ir::Graph* graph,
               TriageOptions options)
    : module_(std::move(module)), graph_(graph), options_(std::move(options)) {
  names_ = triage::reference_names(*module_, graph_);
}

StatusOr<Bindings> Triage::check_inputs(std::span<const Tensor> inputs) const {
  KILN_ASSIGN_OR_RETURN(auto session, runtime::Session::create(module_, options_.session));
  return session->bind(inputs);
}

StatusOr<TriageResult> Triage::run(std::span<const Tensor> inputs,
                                   const ReferenceValues& reference) const {
  TriageResult result;
  result.reference = reference.description;
  KILN_ASSIGN_OR_RETURN(auto session, runtime::Session::create(module_, session_options(options_)));
  KILN_ASSIGN_OR_RETURN(result.bindings, session->bind(inputs));
  Comparer comparer(*module_, names_, reference, options_, result);
  const Clock::time_point start = Clock::now();
  KILN_ASSIGN_OR_RETURN(result.outputs, session->run(inputs, &comparer, &result.bindings));
  result.kiln_ms = ms_since(start);
  if (result.first_divergence) {
    const Clock::time_point isolate_start = Clock::now();
    KILN_RETURN_IF_ERROR(isolate(inputs, reference, result));
    result.isolate_ms = ms_since(isolate_start);
  }
  return result;
}

Status Triage::isolate(std::span<const Tensor> inputs, const ReferenceValues& reference,
                       TriageResult& result) const {
  Divergence& divergence = *result.first_divergence;
  const module::Dispatch& dispatch = module_->dispatches[divergence.dispatch];
  std::vector<Tensor> fed;
  std::vector<std::string> missing;
  for (int32_t v : dispatch.inputs) {
    if (v < 0 || module_->values[v].kind == module::ValueKind::kConstant) {
      fed.emplace_back();
      continue;
    }
    if (module_->values[v].kind == module::ValueKind::kInput) {
      const auto pos =
          std::find(module_->inputs.begin(), module_->inputs.end(), v) - module_->inputs.begin();
      fed.push_back(inputs[pos]);
      continue;
    }
    auto it = reference.values.find(names_[v]);
    if (it == reference.values.end()) {
      missing.push_back(names_[v]);
      fed.emplace_back();
    } else {
      fed.push_back(it->second);
    }
  }
  if (!missing.empty()) {
    divergence.explanation =
        fmt::format("could not re-run it alone: the reference has no value for its input(s) {}",
                    fmt::join(missing, ", "));
    return ok_status();
  }
  auto alone = run_dispatch_alone(*module_, divergence.dispatch, fed, result.bindings,
                                  session_options(options_));
  if (!alone.ok())
    return std::move(alone).status().with_note("re-running the first diverging dispatch alone");
  divergence.isolated_run = true;
  bool still_wrong = false;
  for (size_t i = 0; i < alone->size(); ++i) {
    auto it = reference.values.find(names_[dispatch.outputs[i]]);
    if (it == reference.values.end()) continue;
    KILN_ASSIGN_OR_RETURN(Tolerance tolerance,
                          layer_tolerance(options_.tolerance, compute_stats(it->second).max_abs));
    auto compared = compare_tensors((*alone)[i], it->second, tolerance);
    if (!compared.ok()) return std::move(compared).status().with_note("comparing the isolated run");
    still_wrong |= !compared->passed();
    divergence.isolated.push_back(std::move(compared).value());
  }
  divergence.at_fault = still_wrong;
  if (still_wrong) {
    divergence.explanation =
        "re-run alone on the reference's own inputs, it still diverges: this dispatch computes "
        "wrongly";
    return ok_status();
  }
  // Not at fault: name the inputs that were furthest off, relative to their tolerance.
  std::vector<std::string> inputs_off;
  for (int32_t v : dispatch.inputs) {
    if (v < 0) continue;
    for (const LayerReport& layer : result.layers) {
      if (layer.value != names_[v] || !layer.compared || !layer.error.empty()) continue;
      const double bound = layer.tolerance.atol + layer.tolerance.rtol * layer.expected_max_abs;
      inputs_off.push_back(
          fmt::format("'{}' (max abs err {:.3g}, {:.0f}% of its tolerance)", layer.value,
                      layer.result.max_abs_error,
                      bound > 0 ? 100.0 * layer.result.max_abs_error / bound : 0.0));
    }
  }
  divergence.explanation = fmt::format(
      "re-run alone on the reference's own inputs, it matches: its inputs were already off{}{}",
      inputs_off.empty() ? "" : ": ", fmt::join(inputs_off, ", "));
  return ok_status();
}

}  // namespace kiln::triage
