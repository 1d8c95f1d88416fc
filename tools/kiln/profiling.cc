#include "profiling.h"

namespace kiln::cli {

StatusOr<std::vector<DispatchInfo>> dispatch_info(runtime::Session& session,
                                                  std::span<const Tensor> inputs) {
  // One run gives every symbol's value, data-dependent sizes included.
  Bindings bindings;
  KILN_RETURN_IF_ERROR(session.run(inputs, nullptr, &bindings).status());
  KILN_ASSIGN_OR_RETURN(std::vector<ConcreteShape> shapes, session.value_shapes(bindings));
  KILN_ASSIGN_OR_RETURN(auto kernels, session.describe_dispatches(bindings));
  return describe_for_profile(session.module(), shapes, kernels);
}

Status profile_runs(runtime::Session& session, std::span<const Tensor> inputs, int runs,
                    DispatchProfiler& profiler) {
  for (int r = 0; r < runs; ++r) {
    profiler.begin_run();
    KILN_RETURN_IF_ERROR(session.run(inputs, &profiler).status());
  }
  return ok_status();
}

}  // namespace kiln::cli
