// Conv (1-D to 3-D, groups, dilations, auto_pad) with kiln's fused extensions: optional input 3
// "residual" and attribute "kiln_activation" (registry.h).
#include <array>

#include "kiln/ops/conv_geometry.h"
#include "kiln/ops/families.h"
#include "kiln/ops/op_util.h"

namespace kiln::ops {
namespace {

Status infer_conv(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 4, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", {DType::kF32, DType::kF64}));
  KILN_RETURN_IF_ERROR(check_rank_range(x, 0, "X", 3, 5));
  KILN_ASSIGN_OR_RETURN(ValueType w, required_input(ctx, 1, "W"));
  KILN_RETURN_IF_ERROR(check_same_dtype(w, 1, "W", x.dtype, "input 0 'X'"));
  KILN_RETURN_IF_ERROR(check_rank(w, 1, "W", static_cast<int64_t>(x.shape.size())));

  KILN_ASSIGN_OR_RETURN(int64_t group, ctx.node.attributes.get_int("group", 1));
  if (group < 1) return invalid_argument("attribute 'group' must be >= 1, got {}", group);
  KILN_ASSIGN_OR_RETURN(WindowGeometry geometry, node_window_geometry(ctx.node, x.shape, &w.shape));

  const DimExpr& out_channels = w.shape[0];
  KILN_RETURN_IF_ERROR(check_dims_equal(
      x.shape[1], w.shape[1] * DimExpr(group),
      fmt::format("input 0 'X' dim 1 (channels; input 1 'W' dim 1 {} * attribute 'group' {})",
                  w.shape[1].to_string(), group)));
  if (group > 1) {
    KILN_ASSIGN_OR_RETURN(
        int64_t m, require_constant_dim(out_channels, "input 1 'W' dim 0 (output channels)"));
    if (m % group != 0) {
      return invalid_argument(
          "input 1 'W' dim 0 (output channels) = {} must be divisible by attribute 'group' = {}", m,
          group);
    }
  }
  if (const ValueType* b = optional_input(ctx, 2)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*b, 2, "B", x.dtype, "input 0 'X'"));
    KILN_RETURN_IF_ERROR(check_rank(*b, 2, "B", 1));
    KILN_RETURN_IF_ERROR(
        check_dims_equal(b->shape[0], out_channels, "input 2 'B' dim 0 (input 1 'W' dim 0)"));
  }
  KILN_ASSIGN_OR_RETURN(Shape spatial, window_output_dims(geometry, std::span(x.shape).subspan(2)));
  Shape out{x.shape[0], out_channels};
  out.insert(out.end(), spatial.begin(), spatial.end());
  if (const ValueType* residual = optional_input(ctx, 3)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*residual, 3, "residual", x.dtype, "input 0 'X'"));
    if (residual->shape.size() != out.size()) {
      return invalid_argument("input 3 'residual' must have the output shape {}, got {}",
                              shape_to_string(out), shape_to_string(residual->shape));
    }
    for (size_t i = 0; i < out.size(); ++i) {
      KILN_RETURN_IF_ERROR(check_dims_equal(
          residual->shape[i], out[i],
          fmt::format("input 3 'residual' dim {} (output shape {})", i, shape_to_string(out))));
    }
  }
  KILN_RETURN_IF_ERROR(parse_activation(ctx.node.attributes).status());
  ctx.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

// Output positions [lo, hi) whose input index o * stride + offset lies in [0, in).
std::pair<int64_t, int64_t> valid_range(int64_t offset, int64_t stride, int64_t in, int64_t out) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = in - offset <= 0 ? 0 : (in - 1 - offset) / stride + 1;
  return {std::min(lo, out), std::min(hi, out)};
}

Status conv_kernel(const ir::Node& node, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& xt = in[0];
  const Tensor& wt = in[1];
  Shape x_shape = shape_from_concrete(xt.shape());
  Shape w_shape = shape_from_concrete(wt.shape());
  KILN_ASSIGN_OR_RETURN(WindowGeometry geometry, node_window_geometry(node, x_shape, &w_shape));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                        explicit_pads(geometry, std::span(x_shape).subspan(2)));
  KILN_ASSIGN_OR_RETURN(Activation activation, parse_activation(node.attributes));
  const size_t r = geometry.spatial_rank();

  // Spatial dims padded in front to 3 so one loop nest serves 1-D, 2-D and 3-D.
  std::array<int64_t, 3> is{1, 1, 1}, os{1, 1, 1}, ks{1, 1, 1}, st{1, 1, 1}, dl{1, 1, 1},
      pb{0, 0, 0};
  for (size_t i = 0; i < r; ++i) {
    size_t j = 3 - r + i;
    is[j] = xt.shape()[2 + i];
    os[j] = out[0].shape()[2 + i];
    ks[j] = geometry.kernel[i];
    st[j] = geometry.strides[i];
    dl[j] = geometry.dilations[i];
    pb[j] = pads[i];
  }
  const int64_t n_batch = xt.shape()[0];
  const int64_t channels = xt.shape()[1];
  const int64_t m_total = wt.shape()[0];
  const int64_t c_per_group = wt.shape()[1];
  KILN_ASSIGN_OR_RETURN(int64_t group, node.attributes.get_int("group", 1));
  const int64_t m_per_group = m_total / group;
  const int64_t in_plane = is[0] * is[1] * is[2];
  const int64_t out_plane = os[0] * os[1] * os[2];
  const int64_t k_volume = ks[0] * ks[1] * ks[2];

  std::array<std::vector<std::pair<int64_t, int64_t>>, 3> ranges;
  for (size_t a = 0; a < 3; ++a) {
    for (int64_t k = 0; k < ks[a]; ++k) {
      ranges[a].push_back(valid_range(k * dl[a] - pb[a], st[a], is[a], os[a]));
    }
  }

  const std::vector<double> x = to_doubles(xt);
  const std::vector<double> w = to_doubles(wt);
  const std::vector<double> bias =
      in.size() > 2 && !in[2].empty_storage() ? to_doubles(in[2]) : std::vector<double>();
  const std::vector<double> residual =
      in.size() > 3 && !in[3].empty_storage() ? to_doubles(in[3]) : std::vector<double>();
  std::vector<double> y(static_cast<size_t>(out[0].element_count()), 0.0);

  // One (batch, output channel) plane per task; each output element sums over (c, kd, kh, kw) in
  // the same order whatever the batch size (DESIGN.md invariant 4).
#pragma omp parallel for schedule(dynamic)
  for (int64_t job = 0; job < n_batch * m_total; ++job) {
    const int64_t n = job / m_total;
    const int64_t m = job % m_total;
    const int64_t g = m / m_per_group;
    double* acc = y.data() + job * out_plane;
    for (int64_t c = 0; c < c_per_group; ++c) {
      const double* xc = x.data() + (n * channels + g * c_per_group + c) * in_plane;
      const double* wc = w.data() + (m * c_per_group + c) * k_volume;
      for (int64_t kd = 0; kd < ks[0]; ++kd) {
        for (int64_t kh = 0; kh < ks[1]; ++kh) {
          for (int64_t kw = 0; kw < ks[2]; ++kw) {
            const double wv = wc[(kd * ks[1] + kh) * ks[2] + kw];
            const auto [d_lo, d_hi] = ranges[0][kd];
            const auto [h_lo, h_hi] = ranges[1][kh];
            const auto [w_lo, w_hi] = ranges[2][kw];
            for (int64_t od = d_lo; od < d_hi; ++od) {
              const int64_t id = od * st[0] + kd * dl[0] - pb[0];
              for (int64_t oh = h_lo; oh < h_hi; ++oh) {
                const int64_t ih = oh * st[1] + kh * dl[1] - pb[1];
                const int64_t base = (id * is[1] + ih) * is[2] + kw * dl[2] - pb[2];
                double* row = acc + (od * os[1] + oh) * os[2];
                if (st[2] == 1) {
                  for (int64_t ow = w_lo; ow < w_hi; ++ow) row[ow] += wv * xc[base + ow];
                } else {
                  const int64_t sw = st[2];
                  for (int64_t ow = w_lo; ow < w_hi; ++ow) row[ow] += wv * xc[base + ow * sw];
                }
              }
            }
          }
        }
      }
    }
    for (int64_t i = 0; i < out_plane; ++i) {
      double v = acc[i];
      if (!bias.empty()) v += bias[m];
      if (!residual.empty()) v += residual[job * out_plane + i];
      if (activation == Activation::kRelu && v < 0) v = 0;
      acc[i] = v;
    }
  }
  store_doubles(y, out[0]);
  return ok_status();
}

}  // namespace

void register_conv_ops(Registry& registry) {
  registry.add(make_op("Conv", infer_conv, conv_kernel));
}

}  // namespace kiln::ops
