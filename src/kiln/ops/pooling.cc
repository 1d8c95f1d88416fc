// MaxPool, AveragePool (1-D to 3-D windows, shared geometry with Conv) and GlobalAveragePool.
#include <array>
#include <cmath>
#include <limits>

#include "kiln/ops/conv_geometry.h"
#include "kiln/ops/families.h"
#include "kiln/ops/op_util.h"

namespace kiln::ops {
namespace {

enum class PoolKind { kMax, kAverage };

Status infer_pool(InferContext& ctx, PoolKind kind) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1, 1, kind == PoolKind::kMax ? 2 : 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", {DType::kF32, DType::kF64}));
  KILN_RETURN_IF_ERROR(check_rank_range(x, 0, "X", 3, 5));
  if (output_requested(ctx.node, 1)) {
    return unimplemented("output 1 'Indices' of MaxPool is not supported");
  }
  if (kind == PoolKind::kAverage) {
    KILN_ASSIGN_OR_RETURN(int64_t include, ctx.node.attributes.get_int("count_include_pad", 0));
    if (include != 0 && include != 1) {
      return invalid_argument("attribute 'count_include_pad' must be 0 or 1, got {}", include);
    }
  } else {
    KILN_ASSIGN_OR_RETURN(int64_t order, ctx.node.attributes.get_int("storage_order", 0));
    if (order != 0 && order != 1) {
      return invalid_argument("attribute 'storage_order' must be 0 or 1, got {}", order);
    }
  }
  KILN_ASSIGN_OR_RETURN(WindowGeometry geometry, node_window_geometry(ctx.node, x.shape));
  KILN_ASSIGN_OR_RETURN(Shape spatial, window_output_dims(geometry, std::span(x.shape).subspan(2)));
  Shape out{x.shape[0], x.shape[1]};
  out.insert(out.end(), spatial.begin(), spatial.end());
  ctx.outputs.assign(ctx.node.outputs.size(), ValueType{x.dtype, out});
  return ok_status();
}

KernelFn pool_kernel(PoolKind kind) {
  return [kind](const ir::Node& node, std::span<const Tensor> in, std::span<Tensor> out) -> Status {
    const Tensor& xt = in[0];
    Shape x_shape = shape_from_concrete(xt.shape());
    KILN_ASSIGN_OR_RETURN(WindowGeometry geometry, node_window_geometry(node, x_shape));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                          explicit_pads(geometry, std::span(x_shape).subspan(2)));
    KILN_ASSIGN_OR_RETURN(int64_t include_pad, node.attributes.get_int("count_include_pad", 0));
    const size_t r = geometry.spatial_rank();
    std::array<int64_t, 3> is{1, 1, 1}, os{1, 1, 1}, ks{1, 1, 1}, st{1, 1, 1}, dl{1, 1, 1},
        pb{0, 0, 0}, pe{0, 0, 0};
    for (size_t i = 0; i < r; ++i) {
      size_t j = 3 - r + i;
      is[j] = xt.shape()[2 + i];
      os[j] = out[0].shape()[2 + i];
      ks[j] = geometry.kernel[i];
      st[j] = geometry.strides[i];
      dl[j] = geometry.dilations[i];
      pb[j] = pads[i];
      pe[j] = pads[r + i];
    }
    const int64_t planes = xt.shape()[0] * xt.shape()[1];
    const int64_t in_plane = is[0] * is[1] * is[2];
    const int64_t out_plane = os[0] * os[1] * os[2];
    const std::vector<double> x = to_doubles(xt);
    std::vector<double> y(static_cast<size_t>(out[0].element_count()), 0.0);

#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      const double* xp = x.data() + p * in_plane;
      double* yp = y.data() + p * out_plane;
      for (int64_t od = 0; od < os[0]; ++od) {
        for (int64_t oh = 0; oh < os[1]; ++oh) {
          for (int64_t ow = 0; ow < os[2]; ++ow) {
            const std::array<int64_t, 3> o{od, oh, ow};
            double best = -std::numeric_limits<double>::infinity();
            double sum = 0;
            int64_t valid = 0;
            int64_t in_padded = 1;
            // Per axis: how many taps land inside the padded extent [-pad_begin, in + pad_end);
            // count_include_pad divides by their product (ceil_mode windows can overhang it).
            for (size_t a = 0; a < 3; ++a) {
              int64_t count = 0;
              for (int64_t k = 0; k < ks[a]; ++k) {
                int64_t i = o[a] * st[a] - pb[a] + k * dl[a];
                if (i >= -pb[a] && i < is[a] + pe[a]) ++count;
              }
              in_padded *= count;
            }
            for (int64_t kd = 0; kd < ks[0]; ++kd) {
              const int64_t id = od * st[0] - pb[0] + kd * dl[0];
              if (id < 0 || id >= is[0]) continue;
              for (int64_t kh = 0; kh < ks[1]; ++kh) {
                const int64_t ih = oh * st[1] - pb[1] + kh * dl[1];
                if (ih < 0 || ih >= is[1]) continue;
                for (int64_t kw = 0; kw < ks[2]; ++kw) {
                  const int64_t iw = ow * st[2] - pb[2] + kw * dl[2];
                  if (iw < 0 || iw >= is[2]) continue;
                  const double v = xp[(id * is[1] + ih) * is[2] + iw];
                  // NaN propagates, as in numpy's max.
                  if (v > best || std::isnan(v)) best = std::isnan(best) ? best : v;
                  sum += v;
                  ++valid;
                }
              }
            }
            double result;
            if (kind == PoolKind::kMax) {
              result = best;
            } else {
              result = sum / static_cast<double>(include_pad ? in_padded : valid);
            }
            yp[(od * os[1] + oh) * os[2] + ow] = result;
          }
        }
      }
    }
    store_doubles(y, out[0]);
    return ok_status();
  };
}

Status infer_global_average_pool(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", {DType::kF32, DType::kF64}));
  KILN_RETURN_IF_ERROR(check_rank_range(x, 0, "X", 3, 8));
  Shape out = x.shape;
  for (size_t i = 2; i < out.size(); ++i) out[i] = DimExpr(1);
  ctx.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

Status global_average_pool_kernel(const ir::Node&, std::span<const Tensor> in,
                                  std::span<Tensor> out) {
  const Tensor& xt = in[0];
  const int64_t planes = xt.shape()[0] * xt.shape()[1];
  int64_t plane = 1;
  for (size_t i = 2; i < xt.shape().size(); ++i) plane *= xt.shape()[i];
  const std::vector<double> x = to_doubles(xt);
  std::vector<double> y(static_cast<size_t>(planes));
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (int64_t i = 0; i < plane; ++i) sum += x[p * plane + i];
    y[p] = sum / static_cast<double>(plane);
  }
  store_doubles(y, out[0]);
  return ok_status();
}

}  // namespace

void register_pooling_ops(Registry& registry) {
  registry.add(make_op(
      "MaxPool", [](InferContext& ctx) { return infer_pool(ctx, PoolKind::kMax); },
      pool_kernel(PoolKind::kMax)));
  registry.add(make_op(
      "AveragePool", [](InferContext& ctx) { return infer_pool(ctx, PoolKind::kAverage); },
      pool_kernel(PoolKind::kAverage)));
  registry.add(make_op("GlobalAveragePool", infer_global_average_pool, global_average_pool_kernel));
}

}  // namespace kiln::ops
