// Launches of the elementwise shaders for a kernel family other than the plain elementwise ops:
// a product's fused epilogue (matmul_ops.cc) runs its residual addition and its GELU with the same
// shaders, and the same arithmetic, as an Add and a Gelu dispatch would (elementwise_ops.cc).
#pragma once

#include <cstdint>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/hal/vulkan/commands.h"

namespace kiln::hal::vulkan {

class KernelBuilder;

// unary.comp's codes for GELU in its erf and tanh forms.
inline constexpr uint32_t kUnaryGeluErf = 4, kUnaryGeluTanh = 5;

// y = x + c (f32), c broadcast to x's shape `shape` as numpy does (x may be y: each invocation
// reads its elements before it writes them). Unimplemented beyond kMaxBroadcastRank dims.
Status launch_add(KernelBuilder& b, Operand x, Operand c, const ConcreteShape& c_shape, Operand y,
                  const ConcreteShape& shape);

// y = unary.comp's function `code` of x over `count` f32 elements (x may be y).
Status launch_unary(KernelBuilder& b, uint32_t code, Operand x, Operand y, uint64_t count,
                    float alpha = 0, float beta = 0);

}  // namespace kiln::hal::vulkan
