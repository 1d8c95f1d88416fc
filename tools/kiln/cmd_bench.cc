#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "fallback_report.h"
#include "flags.h"
#include "kiln/base/file_util.h"
#include "kiln/runtime/session.h"
#include "kiln/tooling/tensor_spec.h"
#include "profiling.h"

namespace kiln::cli {
namespace {

struct BenchFlags {
  std::string module;
  std::string device = "cpu";
  bool no_fallback = false;
  std::vector<std::string> inputs;
  int warmup = 3;
  int repeat = 10;
  ThreadFlags thread;
  std::string json;
  bool per_dispatch = false;
  std::string against;  // a second module, timed alternately with --module on the same inputs
  std::string against_sample_groups;   // its --sample-groups; empty: --module's
  std::optional<int> against_threads;  // its --threads; unset: --module's
  PlanCacheFlags plan_cache;
  bool serve = false;  // after the warm-up, timed runs as stdin asks (serve_runs)
};

double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double percentile(std::vector<double> sorted, double q) {
  std::sort(sorted.begin(), sorted.end());
  size_t index = static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(index, sorted.size() - 1)];
}

// Wall time of one run of `session` on `inputs`; the run's bindings go to `bindings` when given.
StatusOr<double> timed_run(runtime::Session& session, const std::vector<Tensor>& inputs,
                           Bindings* bindings) {
  const auto start = std::chrono::steady_clock::now();
  auto outputs = session.run(inputs, nullptr, bindings);
  if (!outputs.ok()) return outputs.status();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The process's peak resident memory so far.
double peak_rss_mib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

// Work per run: the flops of convolutions and matrix products at the sizes of `bindings` (0
// where the sizes cannot be derived).
double run_flops(runtime::Session& session, const Bindings& bindings) {
  double flops = 0;
  if (auto shapes = session.value_shapes(bindings); shapes.ok()) {
    for (double f : dispatch_flops(session.module(), *shapes)) flops += f;
  }
  return flops;
}

// --serve: the session stays loaded and warm, and stdin says when to run, so that a harness can
// interleave short bursts of kiln's runs with another engine's (bench/harness.py) and pair
// figures taken within a second of each other. After the warm-up it prints one JSON line
// {"ready": true, "load_ms", "cold_ms", "gflop", "peak_rss_mib"}; then each line of stdin is a
// run count N (1 to 100000), answered by one JSON line {"times_ms": [N wall times]}, or `quit`;
// the end of input also ends it. Any other line is an error naming the line, with exit status 2.
int serve_runs(runtime::Session& session, const std::vector<Tensor>& inputs, double load_ms,
               double cold_ms, double gflop) {
  std::printf("%s\n", nlohmann::json({{"ready", true},
                                      {"load_ms", load_ms},
                                      {"cold_ms", cold_ms},
                                      {"gflop", gflop},
                                      {"peak_rss_mib", peak_rss_mib()}})
                          .dump()
                          .c_str());
  std::fflush(stdout);
  constexpr long kMaxRuns = 100000;
  std::string line;
  for (int number = 1; std::getline(std::cin, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "quit") break;
    char* end = nullptr;
    const long count = std::strtol(line.c_str(), &end, 10);
    if (line.empty() || *end != '\0' || count < 1 || count > kMaxRuns) {
      return report_error("bench", invalid_argument("--serve: stdin line {}: expected a run count "
                                                    "(1 to {}) or 'quit', got '{}'",
                                                    number, kMaxRuns, line));
    }
    std::vector<double> times;
    for (long i = 0; i < count; ++i) {
      auto t = timed_run(session, inputs, nullptr);
      if (!t.ok()) return report_error("bench", t.status());
      times.push_back(*t);
    }
    std::printf("%s\n", nlohmann::json({{"times_ms", times}}).dump().c_str());
    std::fflush(stdout);
  }
  return kExitOk;
}

int run_bench(const BenchFlags& flags) {
  auto loaded = load_input_specs("--input", flags.inputs);
  if (!loaded.ok()) return report_error("bench", loaded.status());
  if (Status checked = check_output_flag("--json", flags.json); !checked.ok()) {
    return report_error("bench", checked);
  }
  runtime::SessionOptions options;
  options.device = flags.device;
  options.allow_fallback = !flags.no_fallback;
  if (Status threads = flags.thread.apply(options); !threads.ok()) {
    return report_error("bench", threads);
  }
  if (Status bounds = flags.plan_cache.apply(options); !bounds.ok()) {
    return report_error("bench", bounds);
  }
  if (Status fault = apply_fault_injection(options); !fault.ok())
    return report_error("bench", fault);
  auto load_start = std::chrono::steady_clock::now();
  auto session = open_module("--module", flags.module, options);
  if (!session.ok()) return report_error("bench", session.status());
  auto ordered =
      order_inputs("--input", std::move(loaded).value(), input_names((*session)->module()));
  if (!ordered.ok()) return report_error("bench", ordered.status());
  std::vector<Tensor> inputs = std::move(ordered).value();
  double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start)
          .count();

  // The peer module of --against, prepared and warmed like --module; its errors name it.
  std::unique_ptr<runtime::Session> peer;
  auto peer_error = [&](Status status) {
    return report_error("bench", std::move(status).with_note("in --against=" + flags.against));
  };
  if (flags.against.empty() && !flags.against_sample_groups.empty()) {
    return report_error("bench",
                        invalid_argument("--against-sample-groups needs --against=MODULE"));
  }
  if (flags.against.empty() && flags.against_threads) {
    return report_error("bench", invalid_argument("--against-threads needs --against=MODULE"));
  }
  if (flags.serve && (!flags.against.empty() || flags.per_dispatch || !flags.json.empty())) {
    return report_error("bench", invalid_argument("--serve times only --module, as stdin asks: it "
                                                  "takes no --against, --per-dispatch or --json"));
  }
  if (!flags.against.empty()) {
    runtime::SessionOptions peer_options = options;
    if (flags.against_threads) peer_options.threads = *flags.against_threads;
    if (!flags.against_sample_groups.empty()) {
      Status groups =
          apply_sample_groups("--against-sample-groups", flags.against_sample_groups, peer_options);
      if (!groups.ok()) return report_error("bench", groups);
    }
    auto opened = open_module("--against", flags.against, peer_options);
    if (!opened.ok()) return peer_error(opened.status());
    peer = std::move(opened).value();
  }

  // Wall time of each run; the process CPU time of each timed run goes to cpu_times (all threads,
  // spin-waiting included: with OMP_WAIT_POLICY=passive it is the work done, which other load on
  // the machine disturbs less than the wall time).
  std::vector<double> cpu_times;
  Bindings bindings;  // of the last run, data-dependent sizes included
  auto run_module = [&]() -> StatusOr<double> {
    const double cpu_start = process_cpu_ms();
    auto wall = timed_run(**session, inputs, &bindings);
    cpu_times.push_back(process_cpu_ms() - cpu_start);
    return wall;
  };
  auto cold = run_module();
  if (!cold.ok()) return report_error("bench", cold.status());
  if (Status reported = report_fallbacks("bench", **session, bindings); !reported.ok())
    return report_error("bench", reported);
  for (int i = 0; i < flags.warmup; ++i) {
    if (auto t = run_module(); !t.ok()) return report_error("bench", t.status());
  }
  if (flags.serve) {
    return serve_runs(**session, inputs, load_ms, *cold, run_flops(**session, bindings) / 1e9);
  }
  if (peer) {
    for (int i = 0; i <= flags.warmup; ++i) {  // its cold run, then its warm-up
      if (auto t = timed_run(*peer, inputs, nullptr); !t.ok()) return peer_error(t.status());
    }
  }
  // With a peer, runs alternate A B B A ..., so that drifting load on the machine falls on both.
  std::vector<double> times, peer_times;
  cpu_times.clear();
  auto run_peer = [&]() -> Status {
    auto p = timed_run(*peer, inputs, nullptr);
    if (!p.ok()) return p.status();
    peer_times.push_back(*p);
    return ok_status();
  };
  for (int i = 0; i < flags.repeat; ++i) {
    const bool peer_first = peer && i % 2 == 1;
    if (peer_first) {
      if (Status s = run_peer(); !s.ok()) return peer_error(std::move(s));
    }
    auto t = run_module();
    if (!t.ok()) return report_error("bench", t.status());
    times.push_back(*t);
    if (peer && !peer_first) {
      if (Status s = run_peer(); !s.ok()) return peer_error(std::move(s));
    }
  }
  std::error_code size_error;
  const auto module_bytes = std::filesystem::file_size(flags.module, size_error);
  const double flops = run_flops(**session, bindings);
  const double batch =
      !inputs.empty() && inputs[0].rank() > 0 ? static_cast<double>(inputs[0].shape()[0]) : 1.0;
  const double median = percentile(times, 0.5);
  nlohmann::json report = {
      {"module", flags.module},
      {"module_mib", size_error ? 0.0 : static_cast<double>(module_bytes) / (1024.0 * 1024.0)},
      {"load_ms", load_ms},
      {"cold_ms", *cold},
      {"min_ms", percentile(times, 0.0)},
      {"median_ms", median},
      {"p90_ms", percentile(times, 0.9)},
      {"times_ms", times},
      {"cpu_median_ms", percentile(cpu_times, 0.5)},
      {"items_per_s", batch * 1000.0 / median},
      {"gflop", flops / 1e9},
      {"gflop_per_s", flops / (median * 1e6)},
      {"peak_rss_mib", peak_rss_mib()},
      {"plans", (*session)->plan_cache_stats().plans},
      {"plan_mib", static_cast<double>((*session)->plan_cache_stats().bytes) / (1024.0 * 1024.0)},
      {"threads", flags.thread.threads},
      {"device", (*session)->device_name()},
      {"warmup", flags.warmup},
      {"repeat", flags.repeat}};
  std::printf(
      "load %.1f ms, cold run %.1f ms; min %.2f ms, median %.2f ms, p90 %.2f ms; %.1f items/s, "
      "%.1f GFLOP/s; peak RSS %.0f MiB (module %.0f MiB)\n",
      load_ms, *cold, percentile(times, 0.0), median, percentile(times, 0.9),
      batch * 1000.0 / median, flops / (median * 1e6), report["peak_rss_mib"].get<double>(),
      report["module_mib"].get<double>());
  if (peer) {
    std::vector<double> ratios(times.size());
    for (size_t i = 0; i < times.size(); ++i) ratios[i] = times[i] / peer_times[i];
    const double peer_median = percentile(peer_times, 0.5);
    report["against"] = {{"module", flags.against},
                         {"device", peer->device_name()},
                         {"median_ms", peer_median},
                         {"times_ms", peer_times},
                         {"ratio_of_medians", median / peer_median},
                         {"median_of_pair_ratios", percentile(ratios, 0.5)}};
    std::printf(
        "against %s: median %.2f ms; --module/--against: %.3f (ratio of medians), %.3f (median of "
        "%d paired runs)\n",
        flags.against.c_str(), peer_median, median / peer_median, percentile(ratios, 0.5),
        flags.repeat);
  }
  if (flags.per_dispatch) {
    // Separate runs, after the timed ones: observing drains the device after every dispatch.
    auto info = dispatch_info(**session, inputs);
    if (!info.ok()) return report_error("bench", info.status());
    DispatchProfiler profiler((*session)->module().dispatches.size());
    Status profiled = profile_runs(**session, inputs, flags.repeat, profiler);
    if (!profiled.ok()) return report_error("bench", profiled);
    std::printf("\nper dispatch (median of %d observed runs):\n%s", flags.repeat,
                format_dispatch_table(profiler, *info).c_str());
    report["dispatches"] = nlohmann::json::parse(dispatch_table_json(profiler, *info));
  }
  if (!flags.json.empty()) {
    Status written = write_file_atomically(flags.json, report.dump(2) + "\n");
    if (!written.ok()) return report_error("bench", written);
  }
  return kExitOk;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* sub = app.add_subcommand("bench", "time a compiled module");
  sub->add_option("--module", flags->module, "module file (.kmod)")->required();
  add_device_flags(sub, flags->device, flags->no_fallback);
  sub->add_option("--input", flags->inputs, "input tensor, as for `kiln run` (repeatable)");
  sub->add_option("--warmup", flags->warmup, "untimed runs after the cold run")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--repeat", flags->repeat, "timed runs")->check(CLI::PositiveNumber);
  flags->thread.add_to(sub);
  sub->add_option("--json", flags->json, "also write the figures as JSON to this file");
  sub->add_flag("--per-dispatch", flags->per_dispatch,
                "then time each dispatch over --repeat more runs: a table sorted by time, with "
                "GFLOP/s per convolution and matrix product");
  sub->add_option("--against", flags->against,
                  "a second module (.kmod) timed on the same inputs, its runs alternating with "
                  "--module's (A B B A ...): prints its median and the ratio, which drift in the "
                  "machine's load affects far less than separate processes");
  sub->add_option("--against-sample-groups", flags->against_sample_groups,
                  "--sample-groups for the --against module (default: --module's), e.g. to time "
                  "one module with and without sample groups: --against=SAME.kmod "
                  "--against-sample-groups=off");
  sub->add_option("--against-threads", flags->against_threads,
                  "--threads for the --against module (default: --module's), e.g. to time one "
                  "module at 2 threads against itself at 1 in one process: --threads=2 "
                  "--against=SAME.kmod --against-threads=1")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--serve", flags->serve,
                "after the warm-up, run as stdin asks: each line a run count, answered with one "
                "JSON line of the runs' wall times ('quit' or end of input ends it); for harnesses "
                "that interleave kiln with another engine (bench/harness.py)");
  flags->plan_cache.add_to(sub);
  return {sub, [flags] { return run_bench(*flags); }};
}

}  // namespace kiln::cli
