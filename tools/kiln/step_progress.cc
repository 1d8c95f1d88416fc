#include "step_progress.h"

#include <unistd.h>

#include <cstdio>

namespace kiln::cli {
namespace {

// The progress whose line is on the terminal; commands run on the main thread only.
StepProgress* g_current = nullptr;

}  // namespace

StepProgress::StepProgress(std::string_view command)
    : command_(command), enabled_(::isatty(STDERR_FILENO) == 1) {}

StepProgress::~StepProgress() { done(); }

void StepProgress::step(std::string_view what) {
  if (!enabled_) return;
  // Carriage return and erase-line: the step replaces the previous one.
  std::fprintf(stderr, "\r\033[K[%.*s] %.*s...", static_cast<int>(command_.size()), command_.data(),
               static_cast<int>(what.size()), what.data());
  std::fflush(stderr);
  shown_ = true;
  g_current = this;
}

void StepProgress::clear_current() {
  if (g_current != nullptr) g_current->done();
}

void StepProgress::done() {
  if (g_current == this) g_current = nullptr;
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace kiln::cli
