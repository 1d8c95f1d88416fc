#include "kiln/base/status.h"

namespace kiln {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kUnimplemented: return "unsupported";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kDataLoss: return "data loss";
    case StatusCode::kFailedPrecondition: return "failed precondition";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string out = fmt::format("{}: {}", status_code_name(code_), message_);
  for (const std::string& note : notes_) out += fmt::format("\n  {}", note);
  return out;
}

void check_failed(const char* file, int line, const char* expr) {
  std::fprintf(stderr, "kiln: internal check failed at %s:%d: %s\n", file, line, expr);
  std::abort();
}

}  // namespace kiln
