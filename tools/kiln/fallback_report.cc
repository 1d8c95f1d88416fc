#include "fallback_report.h"

#include <fmt/format.h>

#include <cstdio>

#include "kiln/hal/executable.h"

namespace kiln::cli {

StatusOr<std::vector<std::string>> fallback_dispatches(runtime::Session& session,
                                                       const Bindings& bindings) {
  KILN_ASSIGN_OR_RETURN(auto descriptions, session.describe_dispatches(bindings));
  const auto& module = session.module();
  std::vector<std::string> lines;
  for (size_t d = 0; d < descriptions.size(); ++d) {
    if (descriptions[d].empty()) continue;
    const std::string& first = descriptions[d].front();
    if (first.rfind(hal::kFallbackLinePrefix, 0) != 0) continue;
    lines.push_back(fmt::format("dispatch {} '{}' ({}): {}", d, module.dispatches[d].name,
                                module.dispatches[d].op_type,
                                first.substr(hal::kFallbackLinePrefix.size())));
  }
  return lines;
}

Status report_fallbacks(const char* command, runtime::Session& session, const Bindings& bindings) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> lines, fallback_dispatches(session, bindings));
  if (lines.empty()) return ok_status();
  std::fprintf(stderr, "kiln %s: %zu of %zu dispatches run on the CPU fallback of %s:\n", command,
               lines.size(), session.module().dispatches.size(), session.device_name().c_str());
  const size_t shown = std::min<size_t>(lines.size(), 20);
  for (size_t i = 0; i < shown; ++i) std::fprintf(stderr, "  %s\n", lines[i].c_str());
  if (shown < lines.size()) std::fprintf(stderr, "  ... and %zu more\n", lines.size() - shown);
  return ok_status();
}

}  // namespace kiln::cli
