// JUnit XML for CI systems (Jenkins, GitLab, GitHub actions): one <testsuites> holding one
// <testsuite> per suite run, one <testcase> per case (name = the case name, classname =
// "<suite>.<model>"). Valid against tests/suite/junit.xsd (the Jenkins/Ant junit-10 structure).
// Verdicts map as pytest maps them:
//   PASS   a plain <testcase>
//   XFAIL  <skipped message="expected fail-...: reason">
//   FAIL   <failure type="fail-..." message="reason"> (or <error> when the suite could not set the
//          case up), with every detail as text
//   XPASS  <failure type="unexpected-pass">
// Each case's details (output figures, checks) are in its <system-out>.
#pragma once

#include <string>

#include "kiln/base/status.h"
#include "kiln/suite/suite_runner.h"

namespace kiln::suite {

std::string junit_xml(const SuiteResult& result);

// Writes junit_xml atomically. Errors name the path.
Status write_junit(const std::string& path, const SuiteResult& result);

// Text made safe for XML 1.0 attribute values and content: & < > " ' escaped, characters XML
// cannot hold (control characters other than tab, newline, carriage return; invalid UTF-8)
// replaced by U+FFFD.
std::string xml_escape(std::string_view text);

}  // namespace kiln::suite
