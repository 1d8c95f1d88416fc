#include "kiln/tooling/dispatch_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "kiln/hal/executable.h"
#include "kiln/kernels/kernel.h"

namespace kiln {
namespace {

// 2 x the multiply-adds of the dispatch's op definition (kernels::OpDef::multiply_adds).
double flops_of(const module::Dispatch& d, std::span<const ConcreteShape> shapes) {
  auto dims_of = [&](const std::vector<int32_t>& ids) {
    std::vector<const ConcreteShape*> dims;
    for (int32_t v : ids) {
      dims.push_back(v >= 0 && static_cast<size_t>(v) < shapes.size() ? &shapes[v] : nullptr);
    }
    return dims;
  };
  return 2 * kernels::multiply_adds(d.op_type, d.attributes, dims_of(d.inputs), dims_of(d.outputs));
}

double median(std::vector<double> xs) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  const size_t m = xs.size() / 2;
  return xs.size() % 2 ? xs[m] : (xs[m - 1] + xs[m]) / 2;
}

// Dispatch indices, slowest median first (ties by index, so the order is stable).
std::vector<size_t> by_time(const DispatchProfiler& profiler) {
  std::vector<size_t> order(profiler.dispatch_count());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<double> t(order.size());
  for (size_t d = 0; d < t.size(); ++d) t[d] = profiler.median_ms(d);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return t[x] > t[y]; });
  return order;
}

double gflop_per_s(double flops, double ms) { return ms > 0 ? flops / (ms * 1e6) : 0; }

}  // namespace

std::vector<double> dispatch_flops(const module::ModuleContents& module,
                                   std::span<const ConcreteShape> shapes) {
  std::vector<double> out;
  out.reserve(module.dispatches.size());
  for (const module::Dispatch& d : module.dispatches) out.push_back(flops_of(d, shapes));
  return out;
}

DispatchProfiler::DispatchProfiler(size_t dispatch_count)
    : dispatch_count_(dispatch_count), origin_(Clock::now()) {}

void DispatchProfiler::begin_run() {
  runs_.emplace_back();
  runs_.back().reserve(dispatch_count_);
}

Status DispatchProfiler::after_dispatch(int32_t dispatch, double elapsed_ms,
                                        std::span<const Tensor> outputs) {
  if (runs_.empty()) return internal_error("DispatchProfiler: begin_run() was not called");
  if (dispatch < 0 || static_cast<size_t>(dispatch) >= dispatch_count_) {
    return internal_error("DispatchProfiler: dispatch {} is out of range ({} dispatches)", dispatch,
                          dispatch_count_);
  }
  // The observer runs right after the dispatch finished: it started elapsed_ms ago.
  const double now_us = std::chrono::duration<double, std::micro>(Clock::now() - origin_).count();
  runs_.back().push_back(Event{dispatch, now_us - elapsed_ms * 1000.0, elapsed_ms});
  return ok_status();
}

double DispatchProfiler::median_ms(size_t d) const {
  std::vector<double> xs;
  for (const auto& run : runs_) {
    double sum = 0;
    bool seen = false;
    for (const Event& e : run) {
      if (static_cast<size_t>(e.dispatch) == d) {
        sum += e.elapsed_ms;
        seen = true;
      }
    }
    if (seen) xs.push_back(sum);
  }
  return median(std::move(xs));
}

double DispatchProfiler::total_median_ms() const {
  double total = 0;
  for (size_t d = 0; d < dispatch_count_; ++d) total += median_ms(d);
  return total;
}

std::vector<DispatchInfo> describe_for_profile(
    const module::ModuleContents& module, std::span<const ConcreteShape> shapes,
    const std::vector<std::vector<std::string>>& kernels) {
  const std::vector<double> flops = dispatch_flops(module, shapes);
  std::vector<DispatchInfo> out;
  out.reserve(module.dispatches.size());
  for (size_t d = 0; d < module.dispatches.size(); ++d) {
    DispatchInfo info;
    info.name = module.dispatches[d].name;
    info.op_type = module.dispatches[d].op_type;
    info.flops = flops[d];
    if (d < kernels.size()) info.kernels = kernels[d];
    out.push_back(std::move(info));
  }
  return out;
}

std::string format_dispatch_table(const DispatchProfiler& profiler,
                                  std::span<const DispatchInfo> info) {
  const double total = profiler.total_median_ms();
  std::string out = fmt::format("{:>4} {:>9} {:>6} {:>6} {:>9}  {:<18} {}\n", "#", "median ms", "%",
                                "cum %", "GFLOP/s", "op", "dispatch / kernel");
  double cumulative = 0, total_flops = 0;
  int rank = 0;
  for (size_t d : by_time(profiler)) {
    const double ms = profiler.median_ms(d);
    cumulative += ms;
    const double flops = d < info.size() ? info[d].flops : 0;
    total_flops += flops;
    const std::string rate = flops > 0 ? fmt::format("{:.1f}", gflop_per_s(flops, ms)) : "";
    const std::string name = d < info.size() ? info[d].name : fmt::format("dispatch {}", d);
    const std::string op = d < info.size() ? info[d].op_type : "";
    out += fmt::format("{:>4} {:>9.3f} {:>6.1f} {:>6.1f} {:>9}  {:<18} {}\n", ++rank, ms,
                       total > 0 ? 100 * ms / total : 0, total > 0 ? 100 * cumulative / total : 0,
                       rate, op, name);
    if (d < info.size() && !info[d].kernels.empty()) {
      // A sample group's line is no step: it ends the description (hal::kSampleGroupLinePrefix).
      std::vector<std::string> k = info[d].kernels;
      std::string group;
      if (k.size() > 1 && k.back().starts_with(hal::kSampleGroupLinePrefix)) {
        group = fmt::format(" [{}]", k.back());
        k.pop_back();
      }
      // The dispatch's main kernel: the line that is not a reorder or copy, else the first.
      auto main = std::find_if(k.begin(), k.end(), [](const std::string& line) {
        return line.find("reorder ") == std::string::npos &&
               line.find("copy ") == std::string::npos;
      });
      const std::string& line = main != k.end() ? *main : k.front();
      // Step labels start with "name (Op): "; the table already shows both.
      const size_t colon = line.find("): ");
      out += fmt::format("{:>50}{}{}{}\n", "",
                         colon == std::string::npos ? line : line.substr(colon + 3),
                         k.size() > 1 ? fmt::format(" (+{} step(s))", k.size() - 1) : "", group);
    }
  }
  out +=
      fmt::format("total {:.3f} ms over {} dispatches, {:.2f} GFLOP, {:.1f} GFLOP/s ({} run(s))\n",
                  total, profiler.dispatch_count(), total_flops / 1e9,
                  gflop_per_s(total_flops, total), profiler.runs());
  return out;
}

std::string dispatch_table_json(const DispatchProfiler& profiler,
                                std::span<const DispatchInfo> info) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t d : by_time(profiler)) {
    const double ms = profiler.median_ms(d);
    nlohmann::json row = {{"dispatch", d}, {"median_ms", ms}};
    if (d < info.size()) {
      row["name"] = info[d].name;
      row["op_type"] = info[d].op_type;
      row["gflops"] = info[d].flops / 1e9;
      row["gflop_per_s"] = gflop_per_s(info[d].flops, ms);
      row["kernels"] = info[d].kernels;
    }
    rows.push_back(std::move(row));
  }
  return rows.dump();
}

std::string chrome_trace_json(const DispatchProfiler& profiler,
                              std::span<const DispatchInfo> info) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "kiln"}}}});
  events.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", 1},
                    {"args", {{"name", "dispatches"}}}});
  for (size_t r = 0; r < profiler.runs(); ++r) {
    const auto& run = profiler.events(r);
    if (run.empty()) continue;
    const double begin = run.front().start_us;
    const double end = run.back().start_us + run.back().elapsed_ms * 1000.0;
    events.push_back({{"name", fmt::format("run {}", r)},
                      {"cat", "run"},
                      {"ph", "X"},
                      {"ts", begin},
                      {"dur", end - begin},
                      {"pid", 1},
                      {"tid", 0}});
    for (const DispatchProfiler::Event& e : run) {
      const auto d = static_cast<size_t>(e.dispatch);
      nlohmann::json args = {{"dispatch", e.dispatch}, {"run", r}};
      std::string name = fmt::format("dispatch {}", d);
      if (d < info.size()) {
        name = info[d].name;
        args["op_type"] = info[d].op_type;
        if (info[d].flops > 0) {
          args["gflops"] = info[d].flops / 1e9;
          args["gflop_per_s"] = gflop_per_s(info[d].flops, e.elapsed_ms);
        }
        if (!info[d].kernels.empty()) args["kernels"] = info[d].kernels;
      }
      events.push_back({{"name", name},
                        {"cat", d < info.size() ? info[d].op_type : "dispatch"},
                        {"ph", "X"},
                        {"ts", e.start_us},
                        {"dur", e.elapsed_ms * 1000.0},
                        {"pid", 1},
                        {"tid", 1},
                        {"args", std::move(args)}});
    }
  }
  nlohmann::json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return trace.dump() + "\n";
}

}  // namespace kiln
