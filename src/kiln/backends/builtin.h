// The backends built into kiln, registered with the HAL's registry (hal/registry.h): "cpu"
// (hal/cpu) and "null" (hal/null).
//
// Linking the kiln_backends library registers them before main() (it is an object library, so
// its registrar is always linked in); register_builtin_backends() does the same explicitly and
// may be called any number of times. The runtime never links this library: tools, tests and
// programs that embed kiln choose the backends they link.
#pragma once

namespace kiln::backends {

void register_builtin_backends();

}  // namespace kiln::backends
