// The step a long command is at (`kiln compile`, `kiln triage`), shown on one line of stderr
// that each step overwrites and that is cleared at the end, only when stderr is a terminal:
// logs and pipes get no progress text.
#pragma once

#include <string_view>

namespace kiln::cli {

class StepProgress {
 public:
  // `command` prefixes the line ("[triage] compiling...").
  explicit StepProgress(std::string_view command);
  ~StepProgress();
  StepProgress(const StepProgress&) = delete;
  StepProgress& operator=(const StepProgress&) = delete;

  void step(std::string_view what);
  // Clears the line (before the command prints its results).
  void done();
  // done() on the StepProgress that showed the last step, if any (before an error is printed).
  static void clear_current();

 private:
  std::string_view command_;
  bool enabled_;
  bool shown_ = false;
};

}  // namespace kiln::cli
