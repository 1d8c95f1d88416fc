// BatchNormalization (inference) on f32 (shaders/batch_norm.comp), any rank >= 2, per channel or
// (opset 7's spatial = 0) per feature, with kiln's fused ReLU. When scale and var are constants,
// a = scale / sqrt(var + epsilon) is computed once on the host in float64 and uploaded; otherwise
// the shader computes it in float. Parameters of another dtype run on the CPU fallback.
#include <fmt/format.h>

#include <cmath>

#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::vulkan {

Status build_batch_norm(KernelBuilder& b) {
  for (size_t i = 0; i < 5; ++i) KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(i), DType::kF32));
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.output(0), DType::kF32));
  KILN_ASSIGN_OR_RETURN(kernels::BatchNormAttributes o,
                        kernels::read_batch_norm_attributes(b.attributes()));
  const ConcreteShape& xs = b.input(0).shape;
  uint64_t n = 1, spatial = 1;
  for (int64_t d : xs) n *= static_cast<uint64_t>(d);
  for (size_t i = 2; i < xs.size(); ++i) spatial *= static_cast<uint64_t>(xs[i]);
  if (n >= (uint64_t{1} << 32)) {
    return unimplemented("{} elements exceed the Vulkan kernels' 32-bit indices", n);
  }
  if (n == 0) return ok_status();
  const uint64_t size = o.spatial ? spatial : 1;
  const uint64_t params = o.spatial ? static_cast<uint64_t>(xs[1]) : spatial * xs[1];

  const ValueSpec& scale = b.input(1);
  const ValueSpec& var = b.input(4);
  const bool host_a = scale.role == ValueRole::kConstant && var.role == ValueRole::kConstant &&
                      scale.constant != nullptr && var.constant != nullptr;
  Operand a_or_scale, var_operand;
  if (host_a) {
    std::span<const float> s = scale.constant->values<float>();
    std::span<const float> v = var.constant->values<float>();
    std::vector<float> a(s.size());
    for (size_t p = 0; p < a.size(); ++p) {
      a[p] = static_cast<float>(static_cast<double>(s[p]) /
                                std::sqrt(static_cast<double>(v[p]) + o.epsilon));
    }
    KILN_ASSIGN_OR_RETURN(a_or_scale, b.owned_constant(std::as_bytes(std::span(a))));
    var_operand = a_or_scale;  // unused
  } else {
    KILN_ASSIGN_OR_RETURN(a_or_scale, b.input_operand(1));
    KILN_ASSIGN_OR_RETURN(var_operand, b.input_operand(4));
  }
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(0));
  KILN_ASSIGN_OR_RETURN(Operand bias, b.input_operand(2));
  KILN_ASSIGN_OR_RETURN(Operand mean, b.input_operand(3));
  b.describe(fmt::format("vulkan batch norm ({} elements, {} parameters{})", n, params,
                         o.relu ? ", relu" : ""));
  return b.launch(
      "batch_norm", {host_a ? 1u : 0u, o.relu ? 1u : 0u}, n,
      {x, b.output_operand(0), a_or_scale, bias, mean, var_operand},
      {static_cast<uint32_t>(n), static_cast<uint32_t>(size), static_cast<uint32_t>(params),
       KernelBuilder::bits(static_cast<float>(o.epsilon))});
}

}  // namespace kiln::hal::vulkan
