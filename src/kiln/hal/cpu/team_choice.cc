#include "kiln/hal/cpu/team_choice.h"

#include <algorithm>

namespace kiln::hal::cpu {

double TeamChoice::Recent::median() const {
  static_assert(kTryRuns == 3, "the median below is of up to three runs");
  switch (count) {
    case 0: return 0;
    case 1: return ms[0];
    case 2: return (ms[0] + ms[1]) / 2;
    default: return std::max(std::min(ms[0], ms[1]), std::min(std::max(ms[0], ms[1]), ms[2]));
  }
}

Team TeamChoice::next() const { return trying_ > 0 ? other(current_) : current_; }

void TeamChoice::start_try() {
  if (current_ == Team::kOneThread) {
    trying_ = 1;  // a quiet machine's full team wins by far in one run; a busy one loses
    return;
  }
  // The one-thread plan's very first run is cold: one more.
  trying_ = kTryRuns + (runs_[index(Team::kOneThread)] == 0 ? 1 : 0);
}

void TeamChoice::finish_try() {
  const Team tried = other(current_);
  const double current_ms = recent_[index(current_)].median();
  const bool won = tried == Team::kFull
                       ? last_full_share_ >= kBusyShare && last_full_ms_ < current_ms
                       : recent_[index(tried)].median() < kOneThreadMargin * current_ms;
  one_thread_lost_ = tried == Team::kOneThread && !won;
  if (won) {
    current_ = tried;
    interval_ = kFirstInterval;
  } else {
    interval_ = std::min(interval_ * 2, kMaxInterval);
  }
  // The runs of the try are this plan's latest now; the old plan's stay as they were.
}

void TeamChoice::record(Team team, double milliseconds, double cpu_share) {
  const int t = index(team);
  const bool cold = runs_[t] == 0;
  ++runs_[t];
  since_[t] = 0;
  ++since_[1 - t];
  if (team != current_) {
    previous_busy_ms_ = 0;
    if (!cold) recent_[t].add(milliseconds);
    if (team == Team::kFull) {
      last_full_ms_ = milliseconds;
      last_full_share_ = cpu_share;
      best_full_ms_ = best_full_ms_ > 0 ? std::min(best_full_ms_, milliseconds) : milliseconds;
    }
    if (trying_ > 0 && --trying_ == 0) finish_try();
    return;
  }
  if (cold) return;
  recent_[t].add(milliseconds);
  if (team == Team::kOneThread) {
    if (since_[0] < interval_) return;
    if (interval_ < kMaxInterval && others_running_()) {
      interval_ = std::min(interval_ * 2, kMaxInterval);
    } else {
      start_try();
    }
    return;
  }
  last_full_ms_ = milliseconds;
  last_full_share_ = cpu_share;
  const bool slower = best_full_ms_ > 0 && milliseconds > kSlowdown * best_full_ms_;
  best_full_ms_ = best_full_ms_ > 0 ? std::min(best_full_ms_, milliseconds) : milliseconds;
  const bool waited = !one_thread_lost_ || since_[1] >= interval_;
  const bool busy = cpu_share < kBusyShare || slower;
  const double previous_busy_ms = previous_busy_ms_;
  previous_busy_ms_ = busy ? milliseconds : 0;
  if (busy && previous_busy_ms > 0 && waited) {
    // Runs from before the load came say nothing about it: the try is held against these two.
    recent_[t] = Recent{};
    recent_[t].add(previous_busy_ms);
    recent_[t].add(milliseconds);
    previous_busy_ms_ = 0;
    start_try();
  }
}

}  // namespace kiln::hal::cpu
