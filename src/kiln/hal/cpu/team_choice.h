// TeamChoice: decides, run by run, whether a CPU executable runs on its full OpenMP team or on
// its one-thread plan (docs/architecture.md, "Threads on a busy machine").
//
// Why: oneDNN's kernels split their work statically between the team's threads, and a thread
// that waits at a barrier spins. When another process holds a core, the team's thread on that
// core gets a share of it, and the whole team waits for it at every barrier: a run at 2 threads
// can take 4x the time of a run at 1. No environment setting helps on every load (passive waits
// cost half the speed on a quiet machine), so the executable measures instead.
//
// The rule, per executable (one set of shapes, so run times are comparable):
//  - Start on the full team, and stay there while the machine looks quiet: the one-thread plan
//    is not even built (the executable builds it on first use).
//  - A full-team run looks busy when the calling thread got less than kBusyShare of the run's
//    wall time as CPU time (it was descheduled: spinning at a barrier still counts as CPU time),
//    or when it took more than kSlowdown times the fastest full-team run so far. After two busy
//    runs in a row, the one-thread plan is tried. A load that makes the one-thread plan pay
//    lasts (a busy machine's share of a core comes and goes over hundreds of milliseconds); a
//    lone slow run is a moment's interruption, after which a try costs the next runs twice their
//    time for nothing (a shared VM: one 2.2x run of ResNet-50 at batch 1 was followed by five
//    one-thread runs at 1.9x, a 4% higher median over 60 runs).
//  - On the one-thread plan, the full team is tried again once it has not run for `interval`
//    runs, to notice when the load is gone; but while `others_running` says other tasks want
//    the cores, the try waits, the interval doubling, until kMaxInterval runs have gone by.
//  - A try of the one-thread plan is kTryRuns runs (one more for its very first, which pays for
//    building it and for first touches of memory and is not counted), and their median must come
//    within kOneThreadMargin of the mean of the two busy full-team runs that started the try (the
//    runs before them are from before the load came). Medians: a busy machine's share of a core
//    comes and goes over hundreds of milliseconds. The margin: right after full-team runs the
//    scheduler still charges the process for two cores, so the first one-thread runs come out slow;
//    where the full team is much faster even when busy (many cores, one of them taken), it still
//    wins.
//  - A try of the full team is one run, which must look quiet (a CPU share of kBusyShare or more)
//    and beat the median of the one-thread plan's last kTryRuns runs: on a quiet machine it wins
//    by far, and on a busy one each full-team run is costly and a lucky one misleading.
//  - A try that wins makes the tried plan the current one and starts the interval over at
//    kFirstInterval; one that loses doubles the interval, up to kMaxInterval. After a lost try
//    of the one-thread plan, a busy-looking full team waits that long before trying again.
//
// Not thread-safe: one run at a time per executable (cpu_executable.h), and so per TeamChoice.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

namespace kiln::hal::cpu {

enum class Team : uint8_t { kFull, kOneThread };

class TeamChoice {
 public:
  static constexpr double kBusyShare = 0.85;
  static constexpr double kSlowdown = 1.5;
  static constexpr double kOneThreadMargin = 1.25;
  static constexpr int kTryRuns = 3;
  static constexpr int64_t kFirstInterval = 4;
  static constexpr int64_t kMaxInterval = 64;

  // `others_running`: whether other tasks want the cores right now (a cheap snapshot, asked
  // only when a try of the full team is due); by default never.
  TeamChoice() = default;
  explicit TeamChoice(std::function<bool()> others_running)
      : others_running_(std::move(others_running)) {}

  // The plan the next run should use.
  Team next() const;
  // A run on `team` took `milliseconds` of wall time, of which the calling thread had
  // `cpu_share` (its CPU time over the wall time) on a core.
  void record(Team team, double milliseconds, double cpu_share);

  Team current() const { return current_; }
  int64_t interval() const { return interval_; }

 private:
  // The last kTryRuns counted runs of one plan.
  struct Recent {
    std::array<double, kTryRuns> ms{};
    int count = 0;  // how many of `ms` hold runs (at most kTryRuns)
    int next = 0;   // where the next run goes
    void add(double t) {
      ms[static_cast<std::size_t>(next)] = t;
      next = (next + 1) % kTryRuns;
      count = count < kTryRuns ? count + 1 : kTryRuns;
    }
    double median() const;
  };
  static int index(Team t) { return t == Team::kFull ? 0 : 1; }
  static Team other(Team t) { return t == Team::kFull ? Team::kOneThread : Team::kFull; }
  void start_try();
  void finish_try();

  std::function<bool()> others_running_ = [] { return false; };
  Team current_ = Team::kFull;
  int trying_ = 0;                // runs of the other plan still to make in the current try
  bool one_thread_lost_ = false;  // the last try was of the one-thread plan, and it lost
  Recent recent_[2];
  double best_full_ms_ = 0;      // the fastest full-team run but the first
  double last_full_ms_ = 0;      // the latest full-team run
  double last_full_share_ = 1;   // and the calling thread's CPU share in it
  double previous_busy_ms_ = 0;  // the run before, on the full team and busy: its time; else 0
  int64_t runs_[2] = {0, 0};     // runs of each plan so far
  int64_t since_[2] = {0, 0};    // runs since each plan last ran
  int64_t interval_ = kFirstInterval;
};

}  // namespace kiln::hal::cpu
