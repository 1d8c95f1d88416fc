// Pooling on f32 (shaders/pool.comp): MaxPool and AveragePool on [N, C, W] and [N, C, H, W]
// (a 1-D pool is a 2-D one of height 1), and GlobalMaxPool and GlobalAveragePool on any rank (one
// window over the flattened spatial dims). MaxPool's Indices output, 3-D windowed pools and other
// dtypes run on the CPU fallback.
#include <fmt/format.h>

#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::vulkan {

Status build_pool(KernelBuilder& b) {
  const std::string& op = b.dispatch().op_type;
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(0), DType::kF32));
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.output(0), DType::kF32));
  if (b.output_count() > 1) return unimplemented("{} with its Indices output runs on the CPU", op);
  const ConcreteShape& xs = b.input(0).shape;
  const ConcreteShape& ys = b.output(0).shape;
  uint64_t in_elements = 1, out_elements = 1;
  for (int64_t d : xs) in_elements *= static_cast<uint64_t>(d);
  for (int64_t d : ys) out_elements *= static_cast<uint64_t>(d);
  if (in_elements >= (uint64_t{1} << 32)) {
    return unimplemented("{} elements exceed the Vulkan kernels' 32-bit indices", in_elements);
  }
  if (out_elements == 0) return ok_status();
  const bool global = op == "GlobalMaxPool" || op == "GlobalAveragePool";
  // [ih, iw, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, ph_end, pw_end]
  std::vector<uint32_t> params;
  uint32_t mode = 0;
  if (global) {
    uint64_t plane = 1;
    for (size_t i = 2; i < xs.size(); ++i) plane *= static_cast<uint64_t>(xs[i]);
    const auto p = static_cast<uint32_t>(plane);
    params = {1, p, 1, 1, 1, p, 1, 1, 0, 0, 1, 1, 0, 0};
    mode = op == "GlobalMaxPool" ? 0 : 1;
  } else {
    if (xs.size() != 3 && xs.size() != 4) {
      return unimplemented("a {}-D {} runs on the CPU (the Vulkan kernel takes 1-D and 2-D)",
                           xs.size() - 2, op);
    }
    KILN_ASSIGN_OR_RETURN(kernels::PoolAttributes a,
                          kernels::read_pool_attributes(op, b.attributes(), xs));
    const kernels::ConcreteWindow& w = a.window;
    const bool two_d = xs.size() == 4;
    const auto at = [&](const std::vector<int64_t>& v, size_t axis, uint32_t one_d) {
      if (!two_d) return axis == 0 ? one_d : static_cast<uint32_t>(v[0]);
      return static_cast<uint32_t>(v[axis]);
    };
    params = {two_d ? static_cast<uint32_t>(xs[2]) : 1u,
              static_cast<uint32_t>(xs.back()),
              two_d ? static_cast<uint32_t>(ys[2]) : 1u,
              static_cast<uint32_t>(ys.back()),
              at(w.kernel, 0, 1),
              at(w.kernel, 1, 1),
              at(w.strides, 0, 1),
              at(w.strides, 1, 1),
              at(w.pads_begin, 0, 0),
              at(w.pads_begin, 1, 0),
              at(w.dilations, 0, 1),
              at(w.dilations, 1, 1),
              at(w.pads_end, 0, 0),
              at(w.pads_end, 1, 0)};
    mode = a.max ? 0 : (a.count_include_pad ? 2 : 1);
  }
  params.insert(params.begin(), static_cast<uint32_t>(out_elements));
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(0));
  b.describe(
      fmt::format("vulkan {} ({} outputs, window {}x{})", op, out_elements, params[5], params[6]));
  return b.launch("pool", {mode}, out_elements, {x, b.output_operand(0)}, std::move(params));
}

}  // namespace kiln::hal::vulkan
