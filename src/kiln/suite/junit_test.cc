#include "kiln/suite/junit.h"

#include <gtest/gtest.h>

#include "kiln/suite/report.h"

namespace kiln::suite {
namespace {

SuiteResult sample_result() {
  SuiteResult result;
  result.name = "demo<&>";
  result.source = "demo.json";
  result.backend = "cpu";
  CaseResult pass;
  pass.model = "m";
  pass.name = "m/dynamic/N=1";
  pass.variant = "dynamic";
  pass.sizes = "N=1";
  OutputReport out;
  out.name = "y";
  out.reference = "file 'r.bin'";
  out.passed = true;
  out.message = "ok";
  CompareResult compare;
  compare.count = 10;
  compare.max_abs_error = 1e-6;
  out.compare = compare;
  pass.outputs.push_back(out);
  result.cases.push_back(pass);

  CaseResult fail = pass;
  fail.name = "m/bound/N=1";
  fail.variant = "bound";
  fail.outcome = Outcome::kFailCompare;
  fail.reason = "output 'y': FAIL: 3/10 mismatches \"quoted\" \x01";
  fail.verdict = Verdict::kFail;
  fail.outputs[0].passed = false;
  fail.outputs[0].compare->actual_nan = 3;
  result.cases.push_back(fail);

  CaseResult xfail;
  xfail.model = "u";
  xfail.name = "u";
  xfail.outcome = Outcome::kFailImport;
  xfail.expected = {Outcome::kFailImport, "TopK"};
  xfail.verdict = Verdict::kXfail;
  result.cases.push_back(xfail);

  CaseResult xpass = pass;
  xpass.name = "m/static";
  xpass.expected = {Outcome::kFailCompare, "known bug"};
  xpass.verdict = Verdict::kXpass;
  result.cases.push_back(xpass);

  CaseResult error = pass;
  error.name = "e";
  error.outcome = Outcome::kError;
  error.verdict = Verdict::kFail;
  error.reason = "cannot set up the inputs";
  result.cases.push_back(error);
  return result;
}

TEST(Junit, EscapesWhatXmlCannotHold) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(xml_escape("tab\tnl\n"), "tab\tnl\n");
  EXPECT_EQ(xml_escape("bell\x07"), "bell\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("bad\xC3"), "bad\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("caf\xC3\xA9"), "caf\xC3\xA9");
}

TEST(Junit, MapsVerdictsLikePytest) {
  const std::string xml = junit_xml(sample_result());
  EXPECT_NE(xml.find("<testsuite name=\"demo&lt;&amp;&gt;\" tests=\"5\" failures=\"2\" "
                     "errors=\"1\" skipped=\"1\""),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<skipped message=\"expected failure (fail-import: TopK)\"/>"),
            std::string::npos)
      << xml;
  EXPECT_NE(
      xml.find(
          "<failure type=\"fail-compare\" message=\"output &apos;y&apos;: FAIL: 3/10 mismatches "
          "&quot;quoted&quot; \xEF\xBF\xBD\">"),
      std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<failure type=\"unexpected-pass\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<error type=\"error\" message=\"cannot set up the inputs\">"),
            std::string::npos)
      << xml;
}

TEST(Report, SummaryNamesEveryUnexpectedCase) {
  const std::string text = format_summary(sample_result());
  EXPECT_NE(text.find("5 cases"), std::string::npos) << text;
  EXPECT_NE(text.find("FAIL m/bound/N=1"), std::string::npos) << text;
  EXPECT_NE(text.find("XPASS m/static"), std::string::npos) << text;
  EXPECT_NE(text.find("unexpected pass: expected fail-compare (known bug)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("3/0"), std::string::npos) << text;  // NaN/Inf column of the failing case
  const std::string md = markdown_report(sample_result());
  EXPECT_NE(md.find("### FAIL m/bound/N=1"), std::string::npos) << md;
  const std::string html = html_report(sample_result());
  EXPECT_NE(html.find("<title>kiln test-suite: demo&lt;&amp;&gt;</title>"), std::string::npos)
      << html;
  EXPECT_FALSE(check_report_path("r.txt").ok());
  EXPECT_TRUE(check_report_path("r.HTML").ok());
}

}  // namespace
}  // namespace kiln::suite
