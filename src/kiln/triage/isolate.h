// Running one dispatch of a module by itself, on inputs of the caller's choosing (triage feeds it
// the reference's values, to tell a dispatch that computes wrongly from one that was fed wrong
// values). The one-dispatch program keeps the dispatch's name, module index and ONNX origins, so
// the backend treats it exactly as inside the whole module (a planted fault included: the device
// is created as a session's, with options.decorate_device).
#pragma once

#include <span>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/module/module.h"
#include "kiln/runtime/session.h"

namespace kiln::triage {

// Runs dispatch `d` of `module` on `inputs` (one per dispatch input, in order; an absent
// optional input or a constant may be given as a default-constructed Tensor, constants then come
// from the module). Output shapes come from the module's shape program under `bindings`. Returns
// one tensor per dispatch output. Errors: `d` out of range, an input count or dtype mismatch, the
// backend's (naming the dispatch).
StatusOr<std::vector<Tensor>> run_dispatch_alone(const module::ModuleContents& module, int32_t d,
                                                 std::span<const Tensor> inputs,
                                                 const Bindings& bindings,
                                                 const runtime::SessionOptions& options);

}  // namespace kiln::triage
