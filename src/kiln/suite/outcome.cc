#include "kiln/suite/outcome.h"

namespace kiln::suite {

std::string_view outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass: return "pass";
    case Outcome::kFailImport: return "fail-import";
    case Outcome::kFailCompile: return "fail-compile";
    case Outcome::kFailRun: return "fail-run";
    case Outcome::kFailCompare: return "fail-compare";
    case Outcome::kError: return "error";
  }
  return "?";
}

std::optional<Outcome> parse_expected_outcome(std::string_view name) {
  for (Outcome outcome : {Outcome::kPass, Outcome::kFailImport, Outcome::kFailCompile,
                          Outcome::kFailRun, Outcome::kFailCompare}) {
    if (outcome_name(outcome) == name) return outcome;
  }
  return std::nullopt;
}

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass: return "PASS";
    case Verdict::kXfail: return "XFAIL";
    case Verdict::kFail: return "FAIL";
    case Verdict::kXpass: return "XPASS";
  }
  return "?";
}

Verdict judge(Outcome actual, const Expectation& expected) {
  if (actual == Outcome::kError) return Verdict::kFail;
  if (actual == expected.outcome)
    return actual == Outcome::kPass ? Verdict::kPass : Verdict::kXfail;
  return actual == Outcome::kPass ? Verdict::kXpass : Verdict::kFail;
}

}  // namespace kiln::suite
