// Glue between a Session and the per-dispatch profile reports of kiln/tooling/dispatch_profile.h,
// shared by `kiln run --profile` and `kiln bench --per-dispatch`.
#pragma once

#include <span>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/runtime/session.h"
#include "kiln/tooling/dispatch_profile.h"

namespace kiln::cli {

// What the reports say about each dispatch of the session's module at the inputs' sizes (flops,
// kernels); runs the module once to learn every size. Errors as Session::run.
StatusOr<std::vector<DispatchInfo>> dispatch_info(runtime::Session& session,
                                                  std::span<const Tensor> inputs);

// Runs the module `runs` times with `profiler` observing each run.
Status profile_runs(runtime::Session& session, std::span<const Tensor> inputs, int runs,
                    DispatchProfiler& profiler);

}  // namespace kiln::cli
