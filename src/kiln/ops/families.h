// Registration entry points of the op families; register_all (registry.cc) calls each one.
#pragma once

#include "kiln/ops/registry.h"

namespace kiln::ops {

void register_elementwise_ops(Registry& registry);    // Relu, Add, Sub, Mul, Div, Sum
void register_normalization_ops(Registry& registry);  // BatchNormalization
void register_softmax_ops(Registry& registry);        // Softmax (opset 1 and 13 semantics)
void register_shape_ops(Registry& registry);
// Every op of kiln::kernels (the portable kernels) that no family above defines (Conv, the pools,
// Gemm, MatMul and most others); call last.
void register_portable_ops(Registry& registry);  // Flatten, Reshape, Identity, Dropout, Constant

}  // namespace kiln::ops
