// Progress of a running suite on stderr. On a terminal: one line redrawn in place, with a bar,
// models done, cases so far (and how many were unexpected), an ETA, and the case running now.
// Otherwise (CI logs, pipes): one plain line per finished case, and the reason under each
// unexpected one. Thread-safe: parallel jobs report into one Progress.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include "kiln/suite/case_result.h"

namespace kiln::suite {

class Progress {
 public:
  enum class Style { kBar, kLines, kQuiet };

  // `style` kBar draws with ANSI carriage returns and erase-line; use it only on a terminal.
  Progress(std::FILE* out, Style style) : out_(out), style_(style) {}

  // The style for `out`: kBar when it is a terminal, else kLines.
  static Style style_for(std::FILE* out);

  // `models` is what runs; `manifest_models`, when more, is the suite's count before --filter.
  void begin(int models, int jobs, int threads_per_job, int manifest_models = 0);
  void case_started(const std::string& name);
  void case_done(const CaseResult& result);
  void model_done(const std::string& model);
  void end();

  // "1:05", "0:07", "2:03:00".
  static std::string format_duration(double seconds);

 private:
  void redraw();  // with mutex_ held

  std::FILE* out_;
  Style style_;
  std::mutex mutex_;
  int models_ = 0, models_done_ = 0, cases_done_ = 0, unexpected_ = 0;
  std::string current_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kiln::suite
