#include "kiln/suite/outcome.h"

#include <gtest/gtest.h>

namespace kiln::suite {
namespace {

TEST(Outcome, NamesRoundTrip) {
  for (Outcome o : {Outcome::kPass, Outcome::kFailImport, Outcome::kFailCompile, Outcome::kFailRun,
                    Outcome::kFailCompare}) {
    EXPECT_EQ(parse_expected_outcome(outcome_name(o)), o);
  }
  // "error" is the suite's own failure; no manifest may expect it.
  EXPECT_FALSE(parse_expected_outcome("error").has_value());
  EXPECT_FALSE(parse_expected_outcome("fail").has_value());
}

TEST(Outcome, StrictExpectations) {
  const Expectation pass;
  const Expectation compile{Outcome::kFailCompile, "no Einsum"};
  EXPECT_EQ(judge(Outcome::kPass, pass), Verdict::kPass);
  EXPECT_EQ(judge(Outcome::kFailCompare, pass), Verdict::kFail);
  EXPECT_EQ(judge(Outcome::kFailCompile, compile), Verdict::kXfail);
  // An expected failure that passes is a failure, and so is failing differently.
  EXPECT_EQ(judge(Outcome::kPass, compile), Verdict::kXpass);
  EXPECT_EQ(judge(Outcome::kFailImport, compile), Verdict::kFail);
  EXPECT_EQ(judge(Outcome::kError, pass), Verdict::kFail);
  EXPECT_TRUE(is_unexpected(Verdict::kXpass));
  EXPECT_TRUE(is_unexpected(Verdict::kFail));
  EXPECT_FALSE(is_unexpected(Verdict::kXfail));
}

}  // namespace
}  // namespace kiln::suite
