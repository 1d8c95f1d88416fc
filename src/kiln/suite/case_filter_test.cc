#include "kiln/suite/case_filter.h"

#include <gtest/gtest.h>

namespace kiln::suite {
namespace {

TEST(CaseFilter, EmptySelectsEverything) {
  CaseFilter filter;
  EXPECT_TRUE(filter.matches("a/dynamic/N=1"));
  EXPECT_TRUE(filter.may_match_prefix("a"));
}

TEST(CaseFilter, PlainPatternsMatchSubstrings) {
  CaseFilter filter({"bound"});
  EXPECT_TRUE(filter.matches("resnet/bound/N=3"));
  EXPECT_FALSE(filter.matches("resnet/dynamic/N=3"));
  // Any model may have a bound case.
  EXPECT_TRUE(filter.may_match_prefix("tiny_cnn"));
}

TEST(CaseFilter, GlobsMatchWholeNames) {
  CaseFilter filter({"resnet*/N=3", "tiny_cnn/*/N=1"});
  EXPECT_TRUE(filter.matches("resnet50-v1-12/bound/N=3"));
  EXPECT_FALSE(filter.matches("resnet50-v1-12/bound/N=1"));
  EXPECT_TRUE(filter.matches("tiny_cnn/dynamic/N=1"));
  EXPECT_FALSE(filter.matches("tiny_cnn/dynamic/N=1/x"));
  EXPECT_FALSE(filter.matches("x/tiny_cnn/dynamic/N=1"));
  // Globs that start with the model name let the suite skip other models unopened.
  EXPECT_TRUE(filter.may_match_prefix("resnet50-v2-7"));
  EXPECT_TRUE(filter.may_match_prefix("tiny_cnn"));
  EXPECT_FALSE(filter.may_match_prefix("mobilenet"));
  // A plain pattern may match any model (it could be a variant or a size).
  EXPECT_TRUE(CaseFilter({"tiny"}).may_match_prefix("mobilenet"));
  CaseFilter question({"t?st/*"});
  EXPECT_TRUE(question.matches("test/static"));
  EXPECT_FALSE(question.matches("toast/static"));
}

TEST(CaseFilter, ExclusionsDropWhatTheyMatchAfterTheSelection) {
  CaseFilter filter({}, {"resnet50*", "bound/N=3"});
  EXPECT_FALSE(filter.matches("resnet50-v1-12/dynamic/N=1"));
  EXPECT_FALSE(filter.matches("tiny_cnn/bound/N=3"));
  EXPECT_TRUE(filter.matches("tiny_cnn/bound/N=1"));
  EXPECT_FALSE(filter.empty());
  // A model every case of which is excluded is skipped unopened; a plain exclusion cannot say.
  EXPECT_FALSE(filter.may_match_prefix("resnet50-v2-7"));
  EXPECT_TRUE(filter.may_match_prefix("tiny_cnn"));
  CaseFilter both({"tiny"}, {"*/dynamic/*"});
  EXPECT_TRUE(both.matches("tiny_cnn/bound/N=1"));
  EXPECT_FALSE(both.matches("tiny_cnn/dynamic/N=1"));
  EXPECT_FALSE(both.matches("mobilenet/bound/N=1"));
}

}  // namespace
}  // namespace kiln::suite
