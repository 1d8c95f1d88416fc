#include "kiln/triage/tracer.h"

#include <algorithm>
#include <filesystem>

#include "kiln/base/file_util.h"
#include "kiln/tooling/tensor_io.h"

namespace kiln::triage {

StatusOr<int32_t> find_dispatch(const module::ModuleContents& module, const std::string& selector) {
  const auto count = static_cast<int64_t>(module.dispatches.size());
  if (!selector.empty() && std::all_of(selector.begin(), selector.end(), ::isdigit)) {
    if (selector.size() > 9 || std::stoll(selector) >= count) {
      return invalid_argument("dispatch index {} is out of range: the module has {} dispatches",
                              selector, count);
    }
    return static_cast<int32_t>(std::stoll(selector));
  }
  for (int64_t d = 0; d < count; ++d) {
    const module::Dispatch& dispatch = module.dispatches[d];
    if (dispatch.name == selector || std::find(dispatch.origins.begin(), dispatch.origins.end(),
                                               selector) != dispatch.origins.end()) {
      return static_cast<int32_t>(d);
    }
  }
  return invalid_argument(
      "no dispatch is named '{}' or comes from an ONNX node of that name "
      "(give an index 0..{}, a dispatch name or an ONNX node name)",
      selector, count - 1);
}

StatusOr<std::unique_ptr<Tracer>> Tracer::create(const module::ModuleContents& module,
                                                 std::span<const Tensor> inputs,
                                                 const std::string& dir,
                                                 const std::optional<std::string>& only) {
  std::unique_ptr<Tracer> tracer(new Tracer(module, inputs, dir));
  if (only) {
    KILN_ASSIGN_OR_RETURN(tracer->only_, find_dispatch(module, *only));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return invalid_argument("cannot create trace directory '{}': {}", dir, ec.message());
  tracer->keep_.assign(module.values.size(), false);
  for (size_t d = 0; d < module.dispatches.size(); ++d) {
    if (!tracer->traced(static_cast<int32_t>(d))) continue;
    for (int32_t v : module.dispatches[d].inputs) {
      if (v >= 0 && module.values[v].kind == module::ValueKind::kIntermediate)
        tracer->keep_[v] = true;
    }
  }
  tracer->time_.assign(module.dispatches.size(), std::nullopt);
  tracer->stats_.assign(module.dispatches.size(), {});
  return tracer;
}

bool Tracer::wants_outputs(int32_t dispatch) {
  if (traced(dispatch)) return true;
  const auto& outputs = module_.dispatches[dispatch].outputs;
  return std::any_of(outputs.begin(), outputs.end(), [&](int32_t v) { return keep_[v]; });
}

StatusOr<Tensor> Tracer::input_value(int32_t value) const {
  const module::ModuleValue& v = module_.values[value];
  if (v.kind == module::ValueKind::kConstant) return v.constant;
  if (v.kind == module::ValueKind::kInput) {
    auto pos =
        std::find(module_.inputs.begin(), module_.inputs.end(), value) - module_.inputs.begin();
    if (static_cast<size_t>(pos) < inputs_.size()) return inputs_[pos];
  } else if (auto it = kept_.find(value); it != kept_.end()) {
    return it->second;
  }
  return internal_error("trace: value '{}' was not kept", v.name);
}

Status Tracer::after_dispatch(int32_t dispatch, double elapsed_ms,
                              std::span<const Tensor> outputs) {
  const module::Dispatch& d = module_.dispatches[dispatch];
  time_[dispatch] = elapsed_ms;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (keep_[d.outputs[i]]) kept_[d.outputs[i]] = outputs[i];
  }
  if (!traced(dispatch)) return ok_status();
  const std::string stem = dir_ + "/" + dispatch_file_stem(module_, dispatch);
  for (size_t i = 0; i < d.inputs.size(); ++i) {
    const int32_t v = d.inputs[i];
    if (v < 0 || (module_.values[v].kind == module::ValueKind::kConstant && !only_)) continue;
    KILN_ASSIGN_OR_RETURN(Tensor tensor, input_value(v));
    KILN_RETURN_IF_ERROR(write_tensor_file(fmt::format("{}.in{}.npy", stem, i), tensor));
  }
  std::vector<std::string> parts;
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(write_tensor_file(fmt::format("{}.out{}.npy", stem, i), outputs[i]));
    stats_[dispatch].push_back(compute_stats(outputs[i]));
    parts.push_back(fmt::format("out {} '{}' {}: {}", i, module_.values[d.outputs[i]].name,
                                shape_to_string(outputs[i].shape()),
                                format_stats(stats_[dispatch].back())));
  }
  summary_.push_back(fmt::format("{:4} {} ({}) {:.3f} ms; {}", dispatch, d.name, d.op_type,
                                 elapsed_ms, fmt::join(parts, "; ")));
  // Free what no later traced dispatch reads.
  for (auto it = kept_.begin(); it != kept_.end();) {
    bool later = false;
    for (size_t e = dispatch + 1; e < module_.dispatches.size() && !later; ++e) {
      if (!traced(static_cast<int32_t>(e))) continue;
      const auto& ins = module_.dispatches[e].inputs;
      later = std::find(ins.begin(), ins.end(), it->first) != ins.end();
    }
    it = later ? std::next(it) : kept_.erase(it);
  }
  return ok_status();
}

Status Tracer::finish(runtime::Session& session, const Bindings& bindings) {
  DispatchRunInfo run;
  run.bindings = bindings;
  KILN_ASSIGN_OR_RETURN(run.value_shapes, session.value_shapes(run.bindings));
  KILN_ASSIGN_OR_RETURN(run.kernels, session.describe_dispatches(run.bindings));
  run.extra.resize(module_.dispatches.size());
  for (size_t d = 0; d < module_.dispatches.size(); ++d) {
    if (!traced(static_cast<int32_t>(d))) continue;
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    const std::string stem = dispatch_file_stem(module_, d);
    if (time_[d]) extra["elapsed_ms"] = *time_[d];
    nlohmann::ordered_json stats = nlohmann::ordered_json::array();
    for (const TensorStats& s : stats_[d]) {
      stats.push_back({{"count", s.count},
                       {"nan", s.nan},
                       {"inf", s.inf},
                       {"min", s.min},
                       {"max", s.max},
                       {"mean", s.mean}});
    }
    extra["output_stats"] = std::move(stats);
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    const module::Dispatch& dispatch = module_.dispatches[d];
    for (size_t i = 0; i < dispatch.inputs.size(); ++i) {
      const int32_t v = dispatch.inputs[i];
      if (v >= 0 && (only_ || module_.values[v].kind != module::ValueKind::kConstant)) {
        files.push_back(fmt::format("{}.in{}.npy", stem, i));
      }
    }
    for (size_t i = 0; i < dispatch.outputs.size(); ++i)
      files.push_back(fmt::format("{}.out{}.npy", stem, i));
    extra["files"] = std::move(files);
    run.extra[d] = std::move(extra);
  }
  KILN_RETURN_IF_ERROR(write_dispatch_dump(dir_, module_, {}, &run));
  return write_file_atomically(dir_ + "/summary.txt",
                               fmt::format("{}\n", fmt::join(summary_, "\n")));
}

}  // namespace kiln::triage
