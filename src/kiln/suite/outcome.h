// What happened to a test-suite case, what the manifest expected, and the verdict that decides
// the exit code. Expectations are strict: a case expected to fail that passes is a failure
// (an "unexpected pass"), so a fixed bug cannot hide behind a stale expectation.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln::suite {

// The first stage that went wrong, in pipeline order.
enum class Outcome {
  kPass,         // every check held
  kFailImport,   // the model could not be imported (or read)
  kFailCompile,  // import worked, compilation failed
  kFailRun,      // the module compiled, a run returned an error
  kFailCompare,  // outputs differ from the reference, hold NaN/Inf, dynamic != bound, ...
  kError,        // the suite itself could not set the case up (inputs, reference): never expected
};

// "pass", "fail-import", "fail-compile", "fail-run", "fail-compare", "error".
std::string_view outcome_name(Outcome outcome);
// Inverse of outcome_name for the five outcomes a manifest may expect ("error" is not one).
std::optional<Outcome> parse_expected_outcome(std::string_view name);

struct Expectation {
  Outcome outcome = Outcome::kPass;
  std::string reason;  // why a failure is expected (required by the manifest for failures)
  // The cases it applies to, as a `--filter` pattern (case_filter.h: a glob when it holds '*' or
  // '?', else a substring); empty: every case of the model.
  std::string cases;
};

enum class Verdict {
  kPass,   // passed, as expected
  kXfail,  // failed the way the manifest expected
  kFail,   // failed unexpectedly (or failed differently than expected)
  kXpass,  // passed although a failure was expected
};

// "PASS", "XFAIL", "FAIL", "XPASS".
std::string_view verdict_name(Verdict verdict);
Verdict judge(Outcome actual, const Expectation& expected);
// FAIL and XPASS: the cases that make `kiln test-suite` exit non-zero.
inline bool is_unexpected(Verdict verdict) {
  return verdict == Verdict::kFail || verdict == Verdict::kXpass;
}

}  // namespace kiln::suite
