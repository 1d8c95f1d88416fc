// Relu, Add, Sub, Mul, Div and Sum are defined by the portable kernels (kiln/kernels/unary.cc and
// binary.cc), registered by register_portable_ops; this family no longer defines any op.
#include "kiln/ops/families.h"

namespace kiln::ops {

void register_elementwise_ops(Registry&) {}

}  // namespace kiln::ops
