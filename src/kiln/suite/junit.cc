#include "kiln/suite/junit.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "kiln/base/file_util.h"

namespace kiln::suite {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of the valid UTF-8 sequence starting at text[i], or 0.
size_t utf8_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  if (n == 2 && c < 0xC2) return 0;                                                 // overlong
  if (n == 3 && c == 0xE0 && byte(i + 1) < 0xA0) return 0;                          // overlong
  if (n == 3 && c == 0xED && byte(i + 1) >= 0xA0) return 0;                         // surrogates
  if (n == 3 && c == 0xEF && byte(i + 1) == 0xBF && byte(i + 2) >= 0xBE) return 0;  // U+FFFE/F
  if (n == 4 &&
      (c > 0xF4 || (c == 0xF0 && byte(i + 1) < 0x90) || (c == 0xF4 && byte(i + 1) >= 0x90)))
    return 0;
  return n;
}

std::string timestamp_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
  return text;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string failure_text(const CaseResult& c) {
  std::string text;
  for (const std::string& failure : c.failures) text += failure + "\n";
  return text;
}

std::string output_text(const CaseResult& c) {
  std::string text;
  for (const OutputReport& o : c.outputs)
    text += fmt::format("output '{}' vs {}: {}\n", o.name, o.reference, o.message);
  for (const std::string& line : c.details) text += line + "\n";
  return text;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '&':
        out += "&amp;";
        ++i;
        continue;
      case '<':
        out += "&lt;";
        ++i;
        continue;
      case '>':
        out += "&gt;";
        ++i;
        continue;
      case '"':
        out += "&quot;";
        ++i;
        continue;
      case '\'':
        out += "&apos;";
        ++i;
        continue;
      default: break;
    }
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      out += kReplacement;
      ++i;
      continue;
    }
    const size_t n = utf8_length(text, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

std::string junit_xml(const SuiteResult& result) {
  const int failures = result.count(Verdict::kXpass) +
                       static_cast<int>(std::count_if(
                           result.cases.begin(), result.cases.end(), [](const CaseResult& c) {
                             return c.verdict == Verdict::kFail && c.outcome != Outcome::kError;
                           }));
  const int errors = static_cast<int>(
      std::count_if(result.cases.begin(), result.cases.end(), [](const CaseResult& c) {
        return c.verdict == Verdict::kFail && c.outcome == Outcome::kError;
      }));
  const int skipped = result.count(Verdict::kXfail);
  const std::string name = xml_escape(result.name);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      "<testsuites name=\"kiln test-suite\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
      "time=\"{:.3f}\">\n",
      result.cases.size(), failures, errors, result.seconds);
  out += fmt::format(
      "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
      "time=\"{:.3f}\" "
      "timestamp=\"{}\" hostname=\"{}\" id=\"0\" package=\"kiln\">\n",
      name, result.cases.size(), failures, errors, skipped, result.seconds, timestamp_now(),
      xml_escape(host_name()));
  out += fmt::format(
      "    <properties>\n      <property name=\"backend\" value=\"{}\"/>\n      <property "
      "name=\"source\" "
      "value=\"{}\"/>\n      <property name=\"threads_per_job\" value=\"{}\"/>\n    "
      "</properties>\n",
      xml_escape(result.backend), xml_escape(result.source), result.threads_per_job);
  for (const CaseResult& c : result.cases) {
    out += fmt::format("    <testcase name=\"{}\" classname=\"{}.{}\" time=\"{:.3f}\">\n",
                       xml_escape(c.name), name, xml_escape(c.model), c.seconds);
    const std::string expected =
        fmt::format("{}{}", outcome_name(c.expected.outcome),
                    c.expected.reason.empty() ? "" : ": " + c.expected.reason);
    switch (c.verdict) {
      case Verdict::kPass: break;
      case Verdict::kXfail:
        out += fmt::format("      <skipped message=\"expected failure ({})\"/>\n",
                           xml_escape(expected));
        break;
      case Verdict::kXpass:
        out += fmt::format(
            "      <failure type=\"unexpected-pass\" message=\"{}\">expected {}, but every check "
            "passed</failure>\n",
            xml_escape("unexpected pass: expected " + expected), xml_escape(expected));
        break;
      case Verdict::kFail: {
        const char* element = c.outcome == Outcome::kError ? "error" : "failure";
        std::string message = c.expected.outcome == Outcome::kPass
                                  ? c.reason
                                  : fmt::format("expected {}, got {}: {}", expected,
                                                outcome_name(c.outcome), c.reason);
        out += fmt::format("      <{} type=\"{}\" message=\"{}\">{}</{}>\n", element,
                           outcome_name(c.outcome), xml_escape(message),
                           xml_escape(failure_text(c)), element);
        break;
      }
    }
    const std::string text = output_text(c);
    if (!text.empty()) out += fmt::format("      <system-out>{}</system-out>\n", xml_escape(text));
    out += "    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

Status write_junit(const std::string& path, const SuiteResult& result) {
  return write_file_atomically(path, junit_xml(result));
}

}  // namespace kiln::suite
