// `kiln run --trace=DIR [--trace-dispatch=N|NAME]`: a RunObserver that writes each traced
// dispatch's inputs and outputs as .npy files and keeps one summary line per dispatch (time,
// NaN/Inf counts, min, max, mean of each output), then the dispatch descriptions of
// dispatch_dump.h with concrete shapes and kernels.
//
// Files, for each traced dispatch with stem S (dispatch_file_stem): S.in<i>.npy for every input
// that is a graph input or an intermediate (and constants too when a single dispatch is traced),
// S.out<i>.npy for every output, S.json; plus index.txt, index.json and summary.txt. All writes
// are atomic.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/hal/device.h"
#include "kiln/module/module.h"
#include "kiln/runtime/session.h"
#include "kiln/triage/dispatch_dump.h"
#include "kiln/triage/tensor_stats.h"

namespace kiln::triage {

// The dispatch `selector` names: an all-digit index, a dispatch name, or an ONNX node name in its
// origins. Error (invalid argument) naming the selector when nothing matches or the index is out
// of range.
StatusOr<int32_t> find_dispatch(const module::ModuleContents& module, const std::string& selector);

class Tracer : public hal::RunObserver {
 public:
  // `only`: trace just this dispatch (find_dispatch); nullopt traces all. `inputs` are the run's
  // graph inputs (kept by reference; they must outlive the run). Creates `dir`.
  static StatusOr<std::unique_ptr<Tracer>> create(const module::ModuleContents& module,
                                                  std::span<const Tensor> inputs,
                                                  const std::string& dir,
                                                  const std::optional<std::string>& only);

  bool wants_outputs(int32_t dispatch) override;
  Status after_dispatch(int32_t dispatch, double elapsed_ms,
                        std::span<const Tensor> outputs) override;

  // After `session` ran with this tracer, binding `bindings` (Session::run's `bound`): writes the
  // descriptions (with the concrete shapes and kernels of that run, plus each traced dispatch's
  // time and statistics) and summary.txt.
  Status finish(runtime::Session& session, const Bindings& bindings);
  // One line per dispatch seen, in order.
  const std::vector<std::string>& summary() const { return summary_; }

 private:
  Tracer(const module::ModuleContents& module, std::span<const Tensor> inputs, std::string dir)
      : module_(module), inputs_(inputs), dir_(std::move(dir)) {}
  bool traced(int32_t dispatch) const { return !only_ || *only_ == dispatch; }
  StatusOr<Tensor> input_value(int32_t value) const;

  const module::ModuleContents& module_;
  std::span<const Tensor> inputs_;
  std::string dir_;
  std::optional<int32_t> only_;
  std::vector<bool> keep_;                   // per value: needed as a traced input later
  std::map<int32_t, Tensor> kept_;           // value -> tensor
  std::vector<std::optional<double>> time_;  // per dispatch
  std::vector<std::vector<TensorStats>> stats_;
  std::vector<std::string> summary_;
};

}  // namespace kiln::triage
