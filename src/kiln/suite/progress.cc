#include "kiln/suite/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace kiln::suite {
namespace {

int terminal_width(std::FILE* out) {
  winsize size{};
  if (ioctl(fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col >= 40) return size.ws_col;
  return 80;
}

}  // namespace

Progress::Style Progress::style_for(std::FILE* out) {
  return isatty(fileno(out)) ? Style::kBar : Style::kLines;
}

std::string Progress::format_duration(double seconds) {
  const auto total = static_cast<long long>(seconds + 0.5);
  if (total >= 3600)
    return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
  return fmt::format("{}:{:02}", total / 60, total % 60);
}

void Progress::begin(int models, int jobs, int threads_per_job, int manifest_models) {
  std::lock_guard lock(mutex_);
  models_ = models;
  start_ = std::chrono::steady_clock::now();
  if (style_ == Style::kLines) {
    const std::string selected =
        manifest_models > models
            ? fmt::format("{} of the suite's {} model(s) (those --filter selects)", models,
                          manifest_models)
            : fmt::format("{} model(s)", models);
    fmt::print(out_, "running {}, {} at a time, {} thread(s) each\n", selected, jobs,
               threads_per_job);
    std::fflush(out_);
  }
}

void Progress::case_started(const std::string& name) {
  std::lock_guard lock(mutex_);
  current_ = name;
  if (style_ == Style::kBar) redraw();
}

void Progress::case_done(const CaseResult& result) {
  std::lock_guard lock(mutex_);
  ++cases_done_;
  if (is_unexpected(result.verdict)) ++unexpected_;
  if (style_ == Style::kBar) {
    // Unexpected results stay on screen above the bar.
    if (is_unexpected(result.verdict)) {
      fmt::print(out_, "\r\x1b[K{} {} ({}): {}\n", verdict_name(result.verdict), result.name,
                 outcome_name(result.outcome), result.reason);
    }
    redraw();
    return;
  }
  if (style_ == Style::kQuiet) return;
  fmt::print(out_, "[{}] {:<5} {} ({}, {:.2f} s)\n", cases_done_, verdict_name(result.verdict),
             result.name, outcome_name(result.outcome), result.seconds);
  if (is_unexpected(result.verdict)) {
    fmt::print(out_, "      {}\n",
               result.verdict == Verdict::kXpass
                   ? fmt::format("unexpected pass: expected {} ({})",
                                 outcome_name(result.expected.outcome), result.expected.reason)
                   : result.reason);
  }
  std::fflush(out_);
}

void Progress::model_done(const std::string&) {
  std::lock_guard lock(mutex_);
  ++models_done_;
  if (style_ == Style::kBar) redraw();
}

void Progress::end() {
  std::lock_guard lock(mutex_);
  if (style_ == Style::kBar) {
    fmt::print(out_, "\r\x1b[K");
    std::fflush(out_);
  }
}

void Progress::redraw() {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double fraction = models_ > 0 ? static_cast<double>(models_done_) / models_ : 0;
  constexpr int kBarWidth = 16;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar = std::string(filled, '#') + std::string(kBarWidth - filled, '-');
  std::string eta = models_done_ > 0 && models_done_ < models_
                        ? format_duration(elapsed * (models_ - models_done_) / models_done_)
                        : "?";
  std::string line =
      fmt::format("[{}] {}/{} models {} cases{} {} ETA {} ", bar, models_done_, models_,
                  cases_done_, unexpected_ ? fmt::format(" ({} unexpected)", unexpected_) : "",
                  format_duration(elapsed), eta);
  const size_t width = static_cast<size_t>(terminal_width(out_)) - 1;
  std::string name = current_;
  if (line.size() + 3 < width && name.size() > width - line.size()) {
    name = "..." + name.substr(name.size() - (width - line.size() - 3));
  }
  line += name;
  if (line.size() > width) line.resize(width);
  fmt::print(out_, "\r\x1b[K{}", line);
  std::fflush(out_);
}

}  // namespace kiln::suite
