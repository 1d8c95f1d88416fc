// Resize (shaders/resize.comp) from the definition's own plan (kernels/resize_plan.h): the same
// attribute parsing, coordinate math (in double, on the host) and taps, uploaded as a table, so
// every mode and coordinate_transformation_mode the definition supports runs: nearest (any
// nearest_mode, f32 and other 4-byte dtypes), linear and cubic (f32; weights and sums in f32 in
// the definition's order). Scales and roi must be constants (sizes only shape the output, which
// is known). Rank up to 6.
#include <fmt/format.h>

#include <cstring>
#include <limits>

#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/resize_plan.h"

namespace kiln::hal::vulkan {
namespace {

constexpr size_t kMaxResizeRank = 6;

// The values of constant input i as doubles; nullopt when absent or empty.
StatusOr<std::optional<std::vector<double>>> constant_floats(const KernelBuilder& b, size_t i) {
  if (!b.has_input(i)) return std::optional<std::vector<double>>();
  auto values = constant_doubles(b.input(i));
  if (!values.ok())
    return std::move(values).status().with_note(fmt::format("Resize's input {}", i));
  return values;
}

}  // namespace

Status build_resize(KernelBuilder& b) {
  const DType dtype = b.input(0).dtype;
  const ConcreteShape& in = b.input(0).shape;
  const ConcreteShape& out = b.output(0).shape;
  if (in.empty() || in.size() > kMaxResizeRank) {
    return unimplemented("Resize of rank {} (the Vulkan kernel takes 1 to {})", in.size(),
                         kMaxResizeRank);
  }
  if (dtype_size(dtype) != 4) {
    return unimplemented("Resize of {} (the Vulkan kernel takes 4-byte dtypes)", dtype_name(dtype));
  }
  const int64_t in_count = kernels::product(in), n = kernels::product(out);
  if (n == 0) return ok_status();
  if (in_count > std::numeric_limits<int32_t>::max() || n > std::numeric_limits<int32_t>::max()) {
    return unimplemented("Resize beyond the Vulkan kernel's 32-bit indices");
  }
  KILN_ASSIGN_OR_RETURN(auto scales, constant_floats(b, kernels::kResizeScales));
  std::optional<std::vector<double>> roi;
  if (b.attributes().has("coordinate_transformation_mode")) {
    KILN_ASSIGN_OR_RETURN(std::string coord,
                          b.attributes().get_string("coordinate_transformation_mode", ""));
    if (coord == "tf_crop_and_resize") {
      KILN_ASSIGN_OR_RETURN(roi, constant_floats(b, kernels::kResizeRoi));
    }
  }
  KILN_ASSIGN_OR_RETURN(kernels::ResizePlan plan,
                        kernels::plan_resize(b.attributes(), in, out, scales, roi));
  const bool nearest = plan.mode == kernels::ResizeMode::kNearest;
  if (!nearest && dtype != DType::kF32) {
    return unimplemented("interpolating Resize of {} (the Vulkan kernel takes f32)",
                         dtype_name(dtype));
  }
  bool crop = false;
  for (const kernels::ResizeAxisTaps& ax : plan.axes) crop = crop || !ax.outside.empty();
  uint32_t extrapolation = 0;
  if (crop) {
    if (dtype != DType::kF32) return unimplemented("tf_crop_and_resize of {}", dtype_name(dtype));
    extrapolation = KernelBuilder::bits(static_cast<float>(plan.extrapolation));
  }

  // The table (resize.comp): per axis, per output index, `outside` and the taps.
  std::vector<uint32_t> table;
  std::vector<uint32_t> params = {static_cast<uint32_t>(n), static_cast<uint32_t>(in.size()),
                                  extrapolation};
  std::vector<uint32_t> taps(kMaxResizeRank, 1), start(kMaxResizeRank, 0);
  for (size_t a = 0; a < plan.axes.size(); ++a) {
    const kernels::ResizeAxisTaps& ax = plan.axes[a];
    taps[a] = static_cast<uint32_t>(ax.taps);
    start[a] = static_cast<uint32_t>(table.size());
    for (int64_t o = 0; o < out[a]; ++o) {
      table.push_back(!ax.outside.empty() && ax.outside[o] != 0 ? 1u : 0u);
      for (int64_t t = 0; t < ax.taps; ++t) {
        table.push_back(static_cast<uint32_t>(ax.offset[o * ax.taps + t]));
        table.push_back(KernelBuilder::bits(ax.weight_f[o * ax.taps + t]));
      }
    }
  }
  for (size_t d = 0; d < kMaxResizeRank; ++d) {
    params.push_back(d < out.size() ? static_cast<uint32_t>(out[d]) : 1u);
  }
  params.insert(params.end(), taps.begin(), taps.end());
  params.insert(params.end(), start.begin(), start.end());
  KILN_ASSIGN_OR_RETURN(Operand table_operand, b.owned_constant(std::as_bytes(std::span(table))));
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(0));
  KILN_ASSIGN_OR_RETURN(std::string mode, b.attributes().get_string("mode", "nearest"));
  b.describe(fmt::format("vulkan Resize {} of {} ({} elements)", mode, dtype_name(dtype), n));
  return b.launch("resize", {nearest ? 1u : 0u}, static_cast<uint64_t>(n),
                  {x, b.output_operand(0), table_operand}, std::move(params));
}

}  // namespace kiln::hal::vulkan
