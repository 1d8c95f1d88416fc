#include "kiln/suite/case_filter.h"

#include <set>

namespace kiln::suite {
namespace {

// Pattern positions reachable after reading `text` (a glob NFA without backtracking blowup);
// position pattern.size() means the whole pattern was consumed.
std::set<size_t> advance(const std::string& pattern, std::string_view text) {
  auto close = [&](std::set<size_t> states) {
    // '*' may match nothing: a state before '*' also stands after it.
    std::set<size_t> out;
    for (size_t s : states) {
      while (true) {
        out.insert(s);
        if (s < pattern.size() && pattern[s] == '*')
          ++s;
        else
          break;
      }
    }
    return out;
  };
  std::set<size_t> states = close({0});
  for (char c : text) {
    std::set<size_t> next;
    for (size_t s : states) {
      if (s == pattern.size()) continue;
      if (pattern[s] == '*')
        next.insert(s);
      else if (pattern[s] == '?' || pattern[s] == c)
        next.insert(s + 1);
    }
    states = close(std::move(next));
    if (states.empty()) break;
  }
  return states;
}

// The patterns as globs: one without '*' or '?' matches names that contain it.
std::vector<std::string> as_globs(std::vector<std::string> patterns) {
  std::vector<std::string> globs;
  for (std::string& pattern : patterns) {
    if (pattern.empty()) continue;
    if (pattern.find_first_of("*?") == std::string::npos) pattern = "*" + pattern + "*";
    globs.push_back(std::move(pattern));
  }
  return globs;
}

bool matches_any(const std::vector<std::string>& globs, std::string_view name) {
  for (const std::string& glob : globs) {
    if (advance(glob, name).count(glob.size())) return true;
  }
  return false;
}

}  // namespace

CaseFilter::CaseFilter(std::vector<std::string> patterns, std::vector<std::string> exclusions)
    : globs_(as_globs(std::move(patterns))), excluded_(as_globs(std::move(exclusions))) {}

bool CaseFilter::matches(std::string_view name) const {
  if (matches_any(excluded_, name)) return false;
  return globs_.empty() || matches_any(globs_, name);
}

bool CaseFilter::may_match_prefix(std::string_view prefix) const {
  // An exclusion that matches every name starting with `prefix` (the rest of it only '*').
  for (const std::string& glob : excluded_) {
    for (size_t state : advance(glob, prefix)) {
      if (glob.find_first_not_of('*', state) == std::string::npos) return false;
    }
  }
  if (globs_.empty()) return true;
  for (const std::string& glob : globs_) {
    // Any state left can be completed by a suitable suffix.
    if (!advance(glob, prefix).empty()) return true;
  }
  return false;
}

}  // namespace kiln::suite
