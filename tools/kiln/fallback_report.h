// Where a GPU device ran dispatches on its CPU fallback, as `kiln run` and `kiln bench` report it
// (hal::kFallbackLinePrefix in the device's dispatch descriptions).
#pragma once

#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/runtime/session.h"

namespace kiln::cli {

// One line per dispatch that runs on the fallback at these bindings:
// "dispatch 12 'Transpose_3' (Transpose): the Vulkan backend has no Transpose kernel".
StatusOr<std::vector<std::string>> fallback_dispatches(runtime::Session& session,
                                                       const Bindings& bindings);

// Prints "<command>: N of M dispatches run on the CPU fallback of <device>:" and the first 20
// lines of fallback_dispatches to stderr; nothing when none falls back. Errors as
// Session::describe_dispatches.
Status report_fallbacks(const char* command, runtime::Session& session, const Bindings& bindings);

}  // namespace kiln::cli
