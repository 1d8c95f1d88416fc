#include "kiln/suite/case_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "kiln/compiler/model_loader.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/onnx/tensor_proto_file.h"
#include "kiln/runtime/session.h"
#include "kiln/suite/case_data.h"

namespace kiln::suite {
namespace {

using Clock = std::chrono::steady_clock;

// --backend=reference: evaluate with the reference evaluator instead of compiling.
constexpr std::string_view kReferenceBackend = "reference";

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// First line of a failure, for the one-line reason; the whole text stays in CaseResult::failures.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// Sample `index` of `tensor` along `axis` (that axis becomes 1).
Tensor sample_of(const Tensor& tensor, size_t axis, int64_t index) {
  ConcreteShape shape = tensor.shape();
  const int64_t batch = shape[axis];
  shape[axis] = 1;
  Tensor out = Tensor::create(tensor.dtype(), shape).value();
  int64_t outer = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  if (outer == 0 || batch == 0) return out;
  const size_t block = tensor.byte_size() / static_cast<size_t>(outer * batch);
  for (int64_t o = 0; o < outer; ++o) {
    if (block > 0) {
      std::memcpy(out.mutable_data() + block * o, tensor.data() + block * (o * batch + index),
                  block);
    }
  }
  return out;
}

// Where a port holds the batch: the first axis whose dim is exactly the symbol.
std::optional<size_t> batch_axis(const Port& port, const std::string& symbol) {
  for (size_t axis = 0; axis < port.shape.size(); ++axis) {
    if (port.shape[axis].is_symbol() && port.shape[axis].symbols().front() == symbol) return axis;
  }
  return std::nullopt;
}

// The batch axis of every input (none: the input is shared by all samples, as an RNN's sample
// rate scalar) and output (each output must have one).
struct BatchAxes {
  std::string symbol;
  std::vector<std::optional<size_t>> inputs;
  std::vector<size_t> outputs;
};

class ModelRun {
 public:
  ModelRun(const ModelSpec& spec, const RunContext& ctx) : spec_(spec), ctx_(ctx) {}

  std::vector<CaseResult> run() {
    if (!spec_.setup_error.empty()) {
      model_level_failure(Outcome::kError, spec_.setup_error);
      return std::move(results_);
    }
    const auto start = Clock::now();
    if (ctx_.on_start) ctx_.on_start(spec_.name);
    data_sets_ = spec_.data_sets;
    auto graph = compiler::load_model(spec_.path, import_options());
    if (!graph.ok()) {
      model_level_failure(Outcome::kFailImport, graph.status().to_string(), seconds_since(start));
      return std::move(results_);
    }
    graph_ = std::move(graph).value();
    import_seconds_ = seconds_since(start);
    for (const ir::Node& node : graph_.nodes()) op_types_.push_back(node.op_type);
    std::sort(op_types_.begin(), op_types_.end());
    op_types_.erase(std::unique(op_types_.begin(), op_types_.end()), op_types_.end());
    io_ = model_io(graph_);
    // Inputs bound at import are no longer graph inputs; their files leave the data sets.
    for (auto it = compile_time_bound_.rbegin(); it != compile_time_bound_.rend(); ++it) {
      for (DataSet& set : data_sets_) set.inputs.erase(set.inputs.begin() + static_cast<long>(*it));
    }
    ModelSpec bound_spec = spec_;
    bound_spec.data_sets = data_sets_;
    if (Status checked = check_spec_against_model(bound_spec, io_); !checked.ok()) {
      model_level_failure(Outcome::kError, checked.to_string(), import_seconds_);
      return std::move(results_);
    }
    if (io_.has_non_tensor()) {
      if (data_sets_.empty()) {
        model_level_failure(Outcome::kError,
                            "the model takes or gives sequences or optionals, which only data "
                            "sets (.pb files) supply",
                            import_seconds_);
      }
      for (const DataSet& set : data_sets_) {
        run_value_set(set, data_sets_.size() > 1 ? set.name : "");
      }
    } else if (!data_sets_.empty()) {
      for (const DataSet& set : data_sets_) {
        run_sizes(&set, data_sets_.size() > 1 ? set.name : "", {});
      }
    } else {
      for (const Bindings& sizes : size_combinations(spec_, io_)) run_sizes(nullptr, "", sizes);
    }
    return std::move(results_);
  }

 private:
  bool selected(const std::string& name) const { return !ctx_.selected || ctx_.selected(name); }

  // For data-set cases: graph inputs that an op needs at compile time (a Reshape's shape, a
  // reduction's axes fed as graph inputs) take their value from the data sets when every set
  // holds the same one; the module is then specialized to it, as a user would with constants.
  onnx_import::ImportOptions import_options() {
    onnx_import::ImportOptions options;
    if (data_sets_.empty()) return options;
    options.compile_time_value =
        [this](size_t position, const std::string& name) -> StatusOr<std::optional<Tensor>> {
      std::optional<Tensor> value;
      for (const DataSet& set : data_sets_) {
        if (position >= set.inputs.size()) return std::optional<Tensor>();
        KILN_ASSIGN_OR_RETURN(onnx_import::TensorProtoFile file,
                              onnx_import::read_tensor_proto_file(set.inputs[position]));
        if (value &&
            (value->dtype() != file.tensor.dtype() || value->shape() != file.tensor.shape() ||
             std::memcmp(value->data(), file.tensor.data(), value->byte_size()) != 0)) {
          return std::optional<Tensor>();  // differs between data sets: stays an input
        }
        value = std::move(file.tensor);
      }
      compile_time_bound_.push_back(position);
      compile_time_names_.push_back(name);
      return value;
    };
    return options;
  }

  CaseResult make_case(const std::string& data_set, const std::string& variant,
                       const std::string& sizes) {
    CaseResult c;
    c.model = spec_.name;
    c.data_set = data_set;
    c.variant = variant;
    c.sizes = sizes;
    c.name = case_name(spec_.name, data_set, variant, sizes);
    c.model_path = spec_.path;
    c.op_types = op_types_;
    c.expected = spec_.expectation(ctx_.backend, c.name);
    return c;
  }

  void finish(CaseResult& c) {
    c.verdict = judge(c.outcome, c.expected);
    if (ctx_.on_done) ctx_.on_done(c);
    results_.push_back(std::move(c));
  }

  // Records a failure; the first one decides the outcome and the one-line reason.
  static void fail(CaseResult& c, Outcome outcome, const std::string& text) {
    if (c.outcome == Outcome::kPass) {
      c.outcome = outcome;
      c.reason = first_line(text);
    }
    c.failures.push_back(text);
  }

  void model_level_failure(Outcome outcome, const std::string& text, double seconds = 0) {
    // Reported whatever the filter: the suite only runs models a filter may select, and a
    // model that cannot be planned has no finer cases to match.
    CaseResult c = make_case("", "", "");
    fail(c, outcome, text);
    c.seconds = seconds;
    finish(c);
  }

  // The dynamic module runs on the full team; a bound one (`bind` not empty) on one thread per
  // dispatch where the kernels allow (hal::TeamPolicy::kOneThread), and with every run of
  // per-sample dispatches in a CPU sample group (sample_group_bytes 0), so that the
  // bound-vs-dynamic comparison also checks that neither the team size nor running one sample
  // at a time changes a bit.
  StatusOr<std::unique_ptr<runtime::Session>> compile_session(const Bindings& bind) {
    compiler::CompileOptions options;
    options.target = "cpu";
    options.bind = bind;
    KILN_ASSIGN_OR_RETURN(module::ModuleContents contents, compiler::compile(graph_, options));
    runtime::SessionOptions session_options;
    session_options.device = ctx_.backend;
    session_options.threads = ctx_.threads;
    session_options.team_policy =
        bind.empty() ? hal::TeamPolicy::kFull : hal::TeamPolicy::kOneThread;
    if (!bind.empty()) session_options.sample_group_bytes = 0;
    session_options.decorate_device = ctx_.decorate_device;
    return runtime::Session::create(
        std::make_shared<const module::ModuleContents>(std::move(contents)), session_options);
  }

  // The dynamic module, compiled on first use; its compile time is charged to that case.
  StatusOr<runtime::Session*> dynamic_session(CaseResult& c) {
    if (!dynamic_) {
      const auto start = Clock::now();
      dynamic_.emplace(compile_session({}));
      c.details.push_back(fmt::format("imported in {:.2f} s, dynamic module compiled in {:.2f} s",
                                      import_seconds_, seconds_since(start)));
      if (!compile_time_names_.empty()) {
        c.details.push_back(fmt::format("graph inputs bound at compile time from the data set: {}",
                                        fmt::join(compile_time_names_, ", ")));
      }
    }
    if (!dynamic_->ok()) return dynamic_->status();
    return dynamic_->value().get();
  }

  static StatusOr<std::vector<Tensor>> run_session(runtime::Session& session,
                                                   std::span<const NamedTensor> inputs) {
    std::vector<Tensor> tensors;
    for (const NamedTensor& input : inputs) tensors.push_back(input.tensor);
    return session.run(tensors);
  }

  // Output k compared with its reference by compare(tolerance) -> StatusOr<CompareResult>, as a
  // report; a failed comparison fails the case, naming the output and the reference.
  template <typename Compare>
  OutputReport compare_output(CaseResult& c, size_t k, const std::string& reference,
                              Compare&& compare) {
    OutputReport report;
    report.name = io_.outputs[k].name;
    report.reference = reference;
    report.tolerance = spec_.tolerance_for(report.name);
    StatusOr<CompareResult> result = compare(report.tolerance);
    if (!result.ok()) {
      report.message = result.status().to_string();
    } else {
      report.compare = *result;
      report.passed = result->passed();
      report.message = format_compare_result(*result, report.tolerance);
    }
    if (!report.passed) {
      fail(c, Outcome::kFailCompare,
           fmt::format("output '{}' vs {}: {}", report.name, report.reference, report.message));
    }
    return report;
  }

  void compare_outputs(CaseResult& c, const std::vector<Tensor>& outputs, const References& refs) {
    for (size_t k = 0; k < io_.outputs.size() && k < outputs.size(); ++k) {
      OutputReport report = compare_output(c, k, refs.sources[k], [&](const auto& tolerance) {
        return compare_tensors(outputs[k], refs.outputs[k], tolerance);
      });
      if (report.compare && report.compare->actual_nan + report.compare->actual_inf > 0) {
        const CompareResult& r = *report.compare;
        std::string note =
            fmt::format("output '{}' holds {} NaN and {} Inf (the reference: {} NaN, {} Inf)",
                        report.name, r.actual_nan, r.actual_inf, r.expected_nan, r.expected_inf);
        (report.passed ? c.details : c.failures).push_back(std::move(note));
      }
      c.outputs.push_back(std::move(report));
    }
  }

  // The symbol to split and where each port holds it. Without the manifest's `batch_dim`, the
  // symbol is dim 0 of the first input and must be dim 0 of every input and output. With it,
  // each port holds the symbol at the first axis whose dim it is (state inputs [layers, N, H]),
  // and an input without it is given whole to each sample. An output without it cannot be split:
  // `why_not` says so and the check is skipped.
  std::optional<BatchAxes> batch_axes(std::string& why_not) const {
    const std::optional<std::string>& declared = spec_.batch_dim;
    std::string symbol;
    if (declared) {
      symbol = *declared;
    } else if (!io_.inputs.empty() && !io_.inputs[0].shape.empty() &&
               io_.inputs[0].shape[0].is_symbol()) {
      symbol = io_.inputs[0].shape[0].symbols().front();
    } else {
      return std::nullopt;
    }
    BatchAxes axes{symbol, {}, {}};
    for (const Port& port : io_.inputs) {
      std::optional<size_t> axis = batch_axis(port, symbol);
      if (!declared && axis != 0) return std::nullopt;
      axes.inputs.push_back(axis);
    }
    for (const Port& port : io_.outputs) {
      std::optional<size_t> axis = batch_axis(port, symbol);
      if (!declared && axis != 0) return std::nullopt;
      if (!axis) {
        why_not = fmt::format("output '{}' has no axis {}", port.name, symbol);
        return std::nullopt;
      }
      axes.outputs.push_back(*axis);
    }
    return axes;
  }

  void check_batch_invariance(CaseResult& c, runtime::Session& session,
                              std::span<const NamedTensor> inputs,
                              const std::vector<Tensor>& outputs, const Bindings& sizes) {
    if (spec_.batch_invariance == BatchInvariance::kOff) return;
    std::string why_not;
    std::optional<BatchAxes> axes = batch_axes(why_not);
    if (!why_not.empty()) {
      c.details.push_back("batch invariance: not checked: " + why_not);
      return;
    }
    auto bound = axes ? sizes.find(axes->symbol) : sizes.end();
    if (bound == sizes.end() || bound->second <= 1) return;
    const std::string& symbol = axes->symbol;
    const int64_t batch = bound->second;
    double worst = 0;
    bool equal = true;
    std::string where;
    for (int64_t i = 0; i < batch; ++i) {
      std::vector<NamedTensor> alone;
      for (size_t k = 0; k < inputs.size(); ++k) {
        const std::optional<size_t> axis = axes->inputs[k];
        alone.push_back(
            {inputs[k].name, axis ? sample_of(inputs[k].tensor, *axis, i) : inputs[k].tensor});
      }
      auto single = run_session(session, alone);
      if (!single.ok()) {
        fail(c, Outcome::kFailRun,
             fmt::format("batch invariance: running sample {} alone ({}=1): {}", i, symbol,
                         single.status().to_string()));
        return;
      }
      for (size_t k = 0; k < outputs.size() && k < single->size(); ++k) {
        Tensor row = sample_of(outputs[k], axes->outputs[k], i);
        if (bitwise_equal(row, (*single)[k])) continue;
        equal = false;
        double diff = max_abs_difference(row, (*single)[k]);
        if (where.empty() || diff > worst) {
          worst = std::max(worst, diff);
          where = fmt::format("output '{}', sample {}", io_.outputs[k].name, i);
        }
      }
    }
    c.batch_invariance = equal ? 0.0 : std::max(worst, 0.0);
    if (equal) {
      c.details.push_back(fmt::format(
          "batch invariance: every sample of {}={} equals the sample run alone, bit for bit",
          symbol, batch));
      return;
    }
    std::string text = fmt::format(
        "batch invariance: samples of {}={} differ from the samples run alone by up to "
        "{:.3g} (worst: {})",
        symbol, batch, worst, where);
    if (spec_.batch_invariance == BatchInvariance::kEnforce) {
      fail(c, Outcome::kFailCompare, text);
    } else {
      c.details.push_back(text + " [reported, not enforced]");
    }
  }

  void run_sizes(const DataSet* set, const std::string& set_name, Bindings sizes) {
    const bool symbolic = !io_.symbols.empty();
    std::vector<NamedTensor> inputs;
    Status loaded = ok_status();
    if (set != nullptr) {
      auto tensors = data_set_inputs(*set, io_, sizes);
      if (tensors.ok())
        inputs = std::move(tensors).value();
      else
        loaded = tensors.status();
    }
    const std::string size_text = format_sizes(sizes, io_.symbols);
    CaseResult first = make_case(set_name, symbolic ? "dynamic" : "static", size_text);
    CaseResult bound = make_case(set_name, "bound", size_text);
    const bool run_first = selected(first.name);
    const bool run_bound = symbolic && selected(bound.name);
    if (!run_first && !run_bound) return;
    if (set == nullptr && loaded.ok()) {
      auto tensors = manifest_inputs(spec_, io_, sizes);
      if (tensors.ok())
        inputs = std::move(tensors).value();
      else
        loaded = tensors.status();
    }
    if (!loaded.ok()) {
      for (auto [c, wanted] : {std::pair{&first, run_first}, std::pair{&bound, run_bound}}) {
        if (!wanted) continue;
        fail(*c, Outcome::kError, "cannot set up the inputs: " + loaded.to_string());
        finish(*c);
      }
      return;
    }
    std::optional<StatusOr<References>> refs;
    auto references = [&]() -> const StatusOr<References>& {
      if (!refs) refs.emplace(reference_outputs(spec_, io_, graph_, set, sizes, inputs, ctx_.ort));
      return *refs;
    };
    auto check_against_reference = [&](CaseResult& c, const std::vector<Tensor>& outputs) {
      if (!ctx_.compare_results) {
        c.details.push_back(fmt::format(
            "outputs not compared: device '{}' computes placeholders, not results", ctx_.backend));
        return;
      }
      const StatusOr<References>& r = references();
      if (!r.ok()) {
        fail(c, Outcome::kError, "cannot get the reference outputs: " + r.status().to_string());
        return;
      }
      compare_outputs(c, outputs, *r);
    };

    if (ctx_.backend == kReferenceBackend) {
      run_reference(set_name, size_text, inputs, check_against_reference);
      return;
    }
    // The dynamic (or static) run; the bound case compares with it, so it runs for either.
    std::optional<std::vector<Tensor>> dynamic_outputs;
    {
      if (ctx_.on_start && run_first) ctx_.on_start(first.name);
      const auto start = Clock::now();
      auto session = dynamic_session(first);
      if (!session.ok()) {
        fail(first, Outcome::kFailCompile, session.status().to_string());
      } else if (auto outputs = run_session(**session, inputs); !outputs.ok()) {
        fail(first, Outcome::kFailRun, outputs.status().to_string());
      } else {
        if (ctx_.tamper) ctx_.tamper(first.name, *outputs);
        dynamic_outputs = *outputs;
        check_against_reference(first, *outputs);
        if (symbolic && ctx_.compare_results) {
          check_batch_invariance(first, **session, inputs, *outputs, sizes);
        }
      }
      first.seconds = seconds_since(start);
      if (run_first) finish(first);
    }
    if (!run_bound) return;
    if (ctx_.on_start) ctx_.on_start(bound.name);
    const auto start = Clock::now();
    auto session = compile_session(sizes);
    if (!session.ok()) {
      fail(bound, Outcome::kFailCompile, session.status().to_string());
    } else if (auto outputs = run_session(**session, inputs); !outputs.ok()) {
      fail(bound, Outcome::kFailRun, outputs.status().to_string());
    } else {
      if (ctx_.tamper) ctx_.tamper(bound.name, *outputs);
      check_against_reference(bound, *outputs);
      if (ctx_.compare_results) compare_with_dynamic(bound, *outputs, dynamic_outputs, size_text);
    }
    bound.seconds = seconds_since(start);
    finish(bound);
  }

  // A data set of a model with sequence or optional inputs or outputs: the values run through
  // Session::run_values (graph_eval::evaluate_graph_values on the reference backend) and compare
  // with the expected files value by value (compare_values, the one comparator's rule). The bound
  // variant must equal the dynamic one bit for bit. Batch invariance and tampering hooks take
  // tensor outputs and are not applied here.
  void run_value_set(const DataSet& set, const std::string& set_name) {
    Bindings sizes;
    auto inputs = data_set_values(set, io_, sizes);
    const bool symbolic = !io_.symbols.empty();
    const std::string size_text = format_sizes(sizes, io_.symbols);
    const bool reference = ctx_.backend == kReferenceBackend;
    CaseResult first = make_case(set_name,
                                 reference  ? "reference"
                                 : symbolic ? "dynamic"
                                            : "static",
                                 size_text);
    CaseResult bound = make_case(set_name, "bound", size_text);
    const bool run_first = selected(first.name);
    const bool run_bound = !reference && symbolic && selected(bound.name);
    if (!run_first && !run_bound) return;
    // The expected files, read once for both variants.
    std::optional<StatusOr<std::vector<HostValue>>> expected_once;
    auto check = [&](CaseResult& c, const std::vector<HostValue>& outputs) {
      if (!ctx_.compare_results) {
        c.details.push_back(fmt::format(
            "outputs not compared: device '{}' computes placeholders, not results", ctx_.backend));
        return;
      }
      if (!expected_once) expected_once.emplace(data_set_outputs(set, io_));
      const StatusOr<std::vector<HostValue>>& expected = *expected_once;
      if (!expected.ok()) {
        fail(c, Outcome::kError,
             "cannot read the reference outputs: " + expected.status().to_string());
        return;
      }
      compare_value_outputs(c, outputs, *expected, fmt::format("file of data set '{}'", set.name));
    };
    std::optional<std::vector<HostValue>> dynamic_outputs;
    {
      if (ctx_.on_start && run_first) ctx_.on_start(first.name);
      const auto start = Clock::now();
      if (!inputs.ok()) {
        fail(first, Outcome::kError, "cannot set up the inputs: " + inputs.status().to_string());
      } else if (reference) {
        auto outputs = graph_eval::evaluate_graph_values(graph_, *inputs);
        if (!outputs.ok()) {
          fail(first, Outcome::kFailRun, outputs.status().to_string());
        } else {
          check(first, *outputs);
        }
      } else if (auto session = dynamic_session(first); !session.ok()) {
        fail(first, Outcome::kFailCompile, session.status().to_string());
      } else if (auto outputs = (*session)->run_values(*inputs); !outputs.ok()) {
        fail(first, Outcome::kFailRun, outputs.status().to_string());
      } else {
        dynamic_outputs = *outputs;
        check(first, *outputs);
      }
      first.seconds = seconds_since(start);
      if (run_first) finish(first);
    }
    if (!run_bound) return;
    if (ctx_.on_start) ctx_.on_start(bound.name);
    const auto start = Clock::now();
    if (!inputs.ok()) {
      fail(bound, Outcome::kError, "cannot set up the inputs: " + inputs.status().to_string());
    } else if (auto session = compile_session(sizes); !session.ok()) {
      fail(bound, Outcome::kFailCompile, session.status().to_string());
    } else if (auto outputs = (*session)->run_values(*inputs); !outputs.ok()) {
      fail(bound, Outcome::kFailRun, outputs.status().to_string());
    } else {
      check(bound, *outputs);
      if (ctx_.compare_results && dynamic_outputs) {
        for (size_t k = 0; k < outputs->size() && k < dynamic_outputs->size(); ++k) {
          auto same = compare_values((*outputs)[k], (*dynamic_outputs)[k], Tolerance{0, 0, true});
          if (same.ok() && same->passed()) continue;
          fail(bound, Outcome::kFailCompare,
               fmt::format("output '{}': the module bound to {} differs from the dynamic module "
                           "({}); invariant 1 requires them equal",
                           io_.outputs[k].name, size_text,
                           same.ok() ? format_compare_result(*same, Tolerance{0, 0, true})
                                     : same.status().to_string()));
        }
      }
    }
    bound.seconds = seconds_since(start);
    finish(bound);
  }

  void compare_value_outputs(CaseResult& c, const std::vector<HostValue>& outputs,
                             const std::vector<HostValue>& expected, const std::string& source) {
    for (size_t k = 0; k < io_.outputs.size() && k < outputs.size() && k < expected.size(); ++k) {
      c.outputs.push_back(compare_output(c, k, source, [&](const auto& tolerance) {
        return compare_values(outputs[k], expected[k], tolerance);
      }));
    }
  }

  // The "reference" backend: the imported graph evaluated by graph_eval::evaluate_graph (float64
  // accumulation), no compilation. One case per input set.
  template <typename Check>
  void run_reference(const std::string& set_name, const std::string& size_text,
                     std::span<const NamedTensor> inputs, Check& check_against_reference) {
    CaseResult c = make_case(set_name, "reference", size_text);
    if (!selected(c.name)) return;
    if (ctx_.on_start) ctx_.on_start(c.name);
    const auto start = Clock::now();
    std::vector<Tensor> tensors;
    for (const NamedTensor& input : inputs) tensors.push_back(input.tensor);
    auto outputs = graph_eval::evaluate_graph(graph_, tensors);
    if (!outputs.ok()) {
      fail(c, Outcome::kFailRun, outputs.status().to_string());
    } else {
      if (ctx_.tamper) ctx_.tamper(c.name, *outputs);
      check_against_reference(c, *outputs);
    }
    c.seconds = seconds_since(start);
    finish(c);
  }

  void compare_with_dynamic(CaseResult& c, const std::vector<Tensor>& outputs,
                            const std::optional<std::vector<Tensor>>& dynamic,
                            const std::string& sizes) {
    if (!dynamic) {
      c.details.push_back("bound vs dynamic: not checked, the dynamic module did not run");
      return;
    }
    double worst = 0;
    std::string differing;
    for (size_t k = 0; k < outputs.size() && k < dynamic->size(); ++k) {
      if (bitwise_equal(outputs[k], (*dynamic)[k])) continue;
      double diff = max_abs_difference(outputs[k], (*dynamic)[k]);
      if (differing.empty() || diff > worst) {
        worst = std::max(worst, diff);
        differing = io_.outputs[k].name;
      }
    }
    c.bound_vs_dynamic = differing.empty() ? 0.0 : worst;
    const std::string teams =
        ctx_.threads > 1
            ? fmt::format(
                  " (bound: one thread per dispatch where the kernels allow; dynamic: {} "
                  "threads)",
                  ctx_.threads)
            : "";
    if (differing.empty()) {
      c.details.push_back(fmt::format("bound vs dynamic at {}: bit for bit equal{}", sizes, teams));
      return;
    }
    fail(c, Outcome::kFailCompare,
         fmt::format(
             "output '{}': the module bound to {} differs from the dynamic module at {} (max abs "
             "difference {:.3g}){}; invariant 1 requires them bit for bit equal (and invariant "
             "8, where the bound module ran on one thread)",
             differing, sizes, sizes, worst, teams));
  }

  const ModelSpec& spec_;
  const RunContext& ctx_;
  ir::Graph graph_;
  std::vector<std::string> op_types_;  // of graph_, sorted, distinct
  ModelIo io_;
  double import_seconds_ = 0;
  std::vector<DataSet> data_sets_;          // the spec's, less inputs bound at compile time
  std::vector<size_t> compile_time_bound_;  // positions of those inputs, ascending
  std::vector<std::string> compile_time_names_;
  std::optional<StatusOr<std::unique_ptr<runtime::Session>>> dynamic_;
  std::vector<CaseResult> results_;
};

}  // namespace

std::vector<CaseResult> run_model(const ModelSpec& spec, const RunContext& context) {
  return ModelRun(spec, context).run();
}

}  // namespace kiln::suite
