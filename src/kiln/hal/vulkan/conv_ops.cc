// Conv on f32 (conv_ops.h): the tiled implicit GEMM (shaders/conv_gemm.comp) or the direct
// kernel (shaders/conv_direct.comp), with bias, residual and activation fused in the epilogue.
#include "kiln/hal/vulkan/conv_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::vulkan {
namespace {

std::atomic<ConvVariant> forced_variant{ConvVariant::kAuto};
std::atomic<uint32_t> column_tiles_limit{0};

constexpr uint32_t kTile = 64;  // conv_gemm.comp's BM and BN

uint32_t activation_code(const kernels::FusedActivation& a) {
  switch (a.kind) {
    case kernels::FusedActivation::Kind::kNone: return 0;
    case kernels::FusedActivation::Kind::kRelu: return 1;
    case kernels::FusedActivation::Kind::kClip: return 2;
    case kernels::FusedActivation::Kind::kLeakyRelu: return 3;
    case kernels::FusedActivation::Kind::kSilu: return 4;
    case kernels::FusedActivation::Kind::kMish: return 5;
    case kernels::FusedActivation::Kind::kGelu:  // never: read_conv_attributes rejects GELU
    case kernels::FusedActivation::Kind::kGeluTanh: return 0;
  }
  return 0;
}

uint64_t element_count(const ConcreteShape& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

}  // namespace

void set_conv_variant_for_testing(ConvVariant variant) { forced_variant = variant; }
void set_conv_column_tiles_per_launch_for_testing(uint32_t tiles) { column_tiles_limit = tiles; }

Status build_conv(KernelBuilder& b) {
  for (size_t i = 0; i < std::min<size_t>(b.input_count(), 4); ++i) {
    if (b.has_input(i)) KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(i), DType::kF32));
  }
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.output(0), DType::kF32));
  const ConcreteShape& xs = b.input(0).shape;
  const ConcreteShape& ws = b.input(1).shape;
  const ConcreteShape& ys = b.output(0).shape;
  if (xs.size() != 3 && xs.size() != 4) {
    return unimplemented("a {}-D Conv runs on the CPU (the Vulkan kernels take 1-D and 2-D)",
                         xs.size() - 2);
  }
  KILN_ASSIGN_OR_RETURN(kernels::ConvAttributes a,
                        kernels::read_conv_attributes(b.attributes(), xs, ws));
  const uint64_t out_elements = element_count(ys);
  if (out_elements == 0) return ok_status();
  for (const ConcreteShape* s : {&xs, &ws, &ys}) {
    if (element_count(*s) >= (uint64_t{1} << 32)) {
      return unimplemented(
          "a Conv tensor of {} elements exceeds the Vulkan kernels' 32-bit indices",
          element_count(*s));
    }
  }
  // A 1-D conv is a 2-D one of height 1.
  const bool two_d = xs.size() == 4;
  const auto spatial = [&](const std::vector<int64_t>& v, size_t axis, uint32_t one_d) {
    return two_d ? static_cast<uint32_t>(v[axis])
                 : (axis == 0 ? one_d : static_cast<uint32_t>(v[0]));
  };
  const auto& w = a.window;
  const uint32_t ih = two_d ? static_cast<uint32_t>(xs[2]) : 1;
  const uint32_t iw = static_cast<uint32_t>(xs[two_d ? 3 : 2]);
  const uint32_t oh = two_d ? static_cast<uint32_t>(ys[2]) : 1;
  const uint32_t ow = static_cast<uint32_t>(ys[two_d ? 3 : 2]);
  const uint32_t kh = spatial(w.kernel, 0, 1), kw = spatial(w.kernel, 1, 1);
  const uint32_t sh = spatial(w.strides, 0, 1), sw = spatial(w.strides, 1, 1);
  const uint32_t ph = spatial(w.pads_begin, 0, 0), pw = spatial(w.pads_begin, 1, 0);
  const uint32_t dh = spatial(w.dilations, 0, 1), dw = spatial(w.dilations, 1, 1);
  const uint32_t cin = static_cast<uint32_t>(xs[1]), cout = static_cast<uint32_t>(ws[0]);
  const uint32_t group = static_cast<uint32_t>(a.group);
  const uint32_t cin_g = cin / group, cout_g = cout / group;
  const uint64_t reduction = uint64_t{cin_g} * kh * kw;

  const bool has_bias = b.has_input(2), has_residual = b.has_input(3);
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(0));
  KILN_ASSIGN_OR_RETURN(Operand weights, b.input_operand(1));
  Operand y = b.output_operand(0);
  Operand bias = y, residual = y;  // never read when absent
  if (has_bias) {
    KILN_ASSIGN_OR_RETURN(bias, b.input_operand(2));
  }
  if (has_residual) {
    KILN_ASSIGN_OR_RETURN(residual, b.input_operand(3));
  }
  // HAS_RESIDUAL: 1 added before the activation, 2 after it (kiln_residual_after_activation).
  const uint32_t residual_code = !has_residual ? 0u : a.residual_after_activation ? 2u : 1u;
  const std::vector<uint32_t> specialization = {has_bias ? 1u : 0u, residual_code,
                                                activation_code(a.activation)};
  const bool leaky = a.activation.kind == kernels::FusedActivation::Kind::kLeakyRelu;
  const uint32_t lo =
      KernelBuilder::bits(static_cast<float>(leaky ? a.activation.alpha : a.activation.min));
  const uint32_t hi = KernelBuilder::bits(static_cast<float>(a.activation.max));
  const std::vector<Operand> operands = {x, weights, bias, residual, y};
  const std::string fused =
      fmt::format("{}{}{}{}", has_bias ? " +bias" : "",
                  has_residual && !a.residual_after_activation ? " +residual" : "",
                  a.activation.kind == kernels::FusedActivation::Kind::kNone
                      ? ""
                      : " " + kernels::describe(a.activation),
                  has_residual && a.residual_after_activation ? " +residual" : "");

  // The shaders' parameters between the first (tiled: the launch's first column tile; direct:
  // the launch's first element, then the element count) and the clip bounds.
  const std::vector<uint32_t> geometry = {cin, ih, iw, cout, oh, ow, kh,    kw,
                                          sh,  sw, ph, pw,   dh, dw, cin_g, cout_g};
  const std::string what = fmt::format("(Cout {}, {}x{} pixels, group {}, K {}){}", cout, oh, ow,
                                       group, reduction, fused);

  // The tiled variant, from per-sample dims and device limits only.
  const uint32_t row_tiles = (cout_g + kTile - 1) / kTile;
  const uint64_t columns = out_elements / cout;  // N * OH * OW
  const ConvVariant forced = forced_variant.load();
  bool tiled = cout_g >= kTiledMinChannels && reduction >= kTiledMinReduction;
  if (forced != ConvVariant::kAuto) tiled = forced == ConvVariant::kTiled;
  tiled = tiled && row_tiles <= b.device().max_workgroup_count[1] &&
          group <= b.device().max_workgroup_count[2];
  if (!tiled) {
    b.describe("vulkan conv direct " + what);
    std::vector<uint32_t> params = {static_cast<uint32_t>(out_elements)};
    params.insert(params.end(), geometry.begin(), geometry.end());
    params.insert(params.end(), {lo, hi});
    return b.launch("conv_direct", specialization, out_elements, operands, std::move(params));
  }

  const bool pointwise =
      kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0 && oh == ih && ow == iw;
  std::vector<uint32_t> tiled_specialization = specialization;
  tiled_specialization.push_back(pointwise ? 1 : 0);
  b.describe(fmt::format("vulkan conv tiled{} {}", pointwise ? " pointwise" : "", what));
  // Column tiles in launches of at most maxComputeWorkGroupCount[0] (65535 on lavapipe, about
  // 4 Mi output pixels per launch), each told its first tile.
  const uint64_t column_tiles = (columns + kTile - 1) / kTile;
  const uint32_t limit = column_tiles_limit.load();
  const uint32_t per_launch = limit != 0 ? std::min(limit, b.device().max_workgroup_count[0])
                                         : b.device().max_workgroup_count[0];
  std::vector<uint32_t> params = {0};
  params.insert(params.end(), geometry.begin(), geometry.end());
  params.insert(params.end(), {static_cast<uint32_t>(columns), lo, hi});
  for (uint64_t first = 0; first < column_tiles; first += per_launch) {
    params[0] = static_cast<uint32_t>(first);
    const uint32_t groups[3] = {
        static_cast<uint32_t>(std::min<uint64_t>(per_launch, column_tiles - first)), row_tiles,
        group};
    KILN_RETURN_IF_ERROR(
        b.launch_groups("conv_gemm", tiled_specialization, groups, operands, params));
  }
  return ok_status();
}

}  // namespace kiln::hal::vulkan
