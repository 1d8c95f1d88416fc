#include "kiln/hal/cpu/conv_guard.h"

#include <algorithm>
#include <cmath>

#include "kiln/hal/cpu/finite_guard.h"
#include "kiln/hal/cpu/program_builder.h"

namespace kiln::hal::cpu {

using dt = dnnl::memory::data_type;

bool append_activation_post_op(dnnl::post_ops& ops, const kernels::FusedActivation& a) {
  using Kind = kernels::FusedActivation::Kind;
  auto negative_zero = [](float v) { return v == 0.0f && std::signbit(v); };
  switch (a.kind) {
    case Kind::kRelu:
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      return true;
    case Kind::kClip: {
      const float lo = static_cast<float>(a.min), hi = static_cast<float>(a.max);
      if (!(lo <= 0.0f && hi >= 0.0f) || negative_zero(lo) || negative_zero(hi)) return false;
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, lo, hi);
      return true;
    }
    case Kind::kLeakyRelu: {
      const float alpha = static_cast<float>(a.alpha);
      if (!(alpha > 0.0f)) return false;
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, alpha, 0.0f);
      return true;
    }
    default: return false;
  }
}

std::optional<InputGuard> input_guard(const ProgramBuilder& b, const ConvParams& p,
                                      const dnnl_desc& src_layout, const dnnl_desc& dst_layout) {
  if (p.data != dt::f32 || !p.has_bias) return std::nullopt;
  dnnl::post_ops probe;
  if (!append_activation_post_op(probe, p.activation)) return std::nullopt;
  const OpReader& op = b.op();
  const Tensor* weights = b.constant(op.input_index(1));
  const Tensor* bias = b.constant(op.input_index(2));
  if (weights == nullptr || bias == nullptr) return std::nullopt;
  // The cheap rules first: the bound reads every weight.
  const int32_t x = op.input_index(0);
  // A relu's vouch (kGuardedSumBound) would serve only weights whose sums of |w| stay below 1/8.
  // A residual added before the activation must be checked too; one added after it goes through
  // the post-op sum, which keeps a NaN, as the Add it replaces.
  const bool checks_residual = p.residual_before_activation();
  std::optional<float> known = checks_residual ? std::nullopt : b.vouched_bound(x);
  if (known && *known >= kGuardedSumBound) known.reset();
  const size_t read = src_layout.get_size() + (checks_residual ? dst_layout.get_size() : 0);
  const bool small_read = read <= dst_layout.get_size();
  if (!known && !small_read) return std::nullopt;
  const std::optional<float> bound = conv_input_bound(*weights, bias);
  if (!bound) return std::nullopt;
  const bool vouched = known && *known <= *bound;
  if (!vouched && !small_read) return std::nullopt;
  return InputGuard{*bound, vouched ? x : -1};
}

std::optional<float> output_bound(const kernels::FusedActivation& a) {
  using Kind = kernels::FusedActivation::Kind;
  if (a.kind == Kind::kRelu) return kGuardedSumBound;
  if (a.kind != Kind::kClip) return std::nullopt;
  const float lo = static_cast<float>(a.min), hi = static_cast<float>(a.max);
  if (!std::isfinite(lo) || !std::isfinite(hi)) return std::nullopt;
  return std::max(std::fabs(lo), std::fabs(hi));
}

}  // namespace kiln::hal::cpu
