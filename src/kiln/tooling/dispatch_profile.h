// Per-dispatch timing: a hal::RunObserver that records how long each dispatch of a module takes
// over one or more runs, and the two reports made from it: a table sorted by time (with GFLOP/s
// for convolutions and matrix products; `kiln bench --per-dispatch`) and a Chrome trace
// (`kiln run --profile=trace.json`; opens in Perfetto and chrome://tracing).
//
// Timings are the backend's (hal::RunObserver::after_dispatch): wall time of the dispatch's own
// kernels and reorders. Observing drains the device after every dispatch, so an observed run can
// be slightly slower than an unobserved one; time whole runs without an observer.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/hal/device.h"
#include "kiln/module/module.h"

namespace kiln {

// Floating-point operations of each dispatch at these concrete value shapes (one per module
// value, as Session::value_shapes returns): 2 per multiply-add for Conv (with kiln's fused
// residual and activation not counted), Gemm and MatMul; 0 for every other op type.
std::vector<double> dispatch_flops(const module::ModuleContents& module,
                                   std::span<const ConcreteShape> shapes);

// Records every dispatch's elapsed time, run after run. Call begin_run() before each observed
// run; dispatches are numbered as in module().dispatches.
class DispatchProfiler : public hal::RunObserver {
 public:
  explicit DispatchProfiler(size_t dispatch_count);

  void begin_run();
  // Error when `dispatch` is out of range or begin_run() was not called.
  Status after_dispatch(int32_t dispatch, double elapsed_ms,
                        std::span<const Tensor> outputs) override;

  size_t runs() const { return runs_.size(); }
  size_t dispatch_count() const { return dispatch_count_; }
  // Median over runs of dispatch `d`'s time (0 when no run recorded it).
  double median_ms(size_t d) const;
  // Sum over dispatches of median_ms.
  double total_median_ms() const;

  // One observed dispatch: start in microseconds since the profiler was made, duration in ms.
  struct Event {
    int32_t dispatch = 0;
    double start_us = 0;
    double elapsed_ms = 0;
  };
  // Events of run `r` (0-based, in order of begin_run calls).
  const std::vector<Event>& events(size_t r) const { return runs_[r]; }

 private:
  using Clock = std::chrono::steady_clock;
  size_t dispatch_count_;
  Clock::time_point origin_;
  std::vector<std::vector<Event>> runs_;
};

// What the reports say about each dispatch besides its time.
struct DispatchInfo {
  std::string name;
  std::string op_type;
  double flops = 0;                  // dispatch_flops
  std::vector<std::string> kernels;  // Executable::describe_dispatch lines (may be empty)
};

// Dispatch descriptions for `module` at `shapes`; `kernels` as Session::describe_dispatches
// returns (empty or one list per dispatch).
std::vector<DispatchInfo> describe_for_profile(
    const module::ModuleContents& module, std::span<const ConcreteShape> shapes,
    const std::vector<std::vector<std::string>>& kernels);

// The per-dispatch table, slowest first: rank, median ms, share of the total, cumulative share,
// GFLOP/s (when the dispatch has flops), op type, name and first kernel line. Ends with a line
// summing time and flops of all dispatches. `info` has one entry per dispatch.
std::string format_dispatch_table(const DispatchProfiler& profiler,
                                  std::span<const DispatchInfo> info);

// The same figures as JSON: [{"dispatch":i,"name":..,"op_type":..,"median_ms":..,"gflops":..,
// "gflop_per_s":..,"kernels":[..]}], slowest first.
std::string dispatch_table_json(const DispatchProfiler& profiler,
                                std::span<const DispatchInfo> info);

// Chrome trace event format (JSON object with "traceEvents"): one complete ("X") event per
// observed dispatch per run, named after the dispatch, with op type, kernels and GFLOP/s as args.
std::string chrome_trace_json(const DispatchProfiler& profiler, std::span<const DispatchInfo> info);

}  // namespace kiln
