// BatchNormalization in inference mode: y = act((x - mean) / sqrt(var + epsilon) * scale + B).
// Opset 7's `spatial` = 0 gives the parameters the shape X.shape[1:] (one per feature) instead of
// [C]; later opsets always use [C] and no longer have the attribute (default 1).
#include <cmath>

#include "kiln/kernels/activation.h"
#include "kiln/ops/families.h"
#include "kiln/ops/op_util.h"

namespace kiln::ops {
namespace {

constexpr const char* kParamNames[] = {"X", "scale", "B", "input_mean", "input_var"};

Status infer_batch_norm(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 5, 5, 1, 5));
  KILN_ASSIGN_OR_RETURN(int64_t training, ctx.node.attributes.get_int("training_mode", 0));
  if (training != 0) {
    return unimplemented("attribute 'training_mode' = {}: only inference (0) is supported",
                         training);
  }
  for (size_t i = 1; i < ctx.node.outputs.size(); ++i) {
    if (output_requested(ctx.node, i)) {
      return unimplemented(
          "output {} (running or saved statistics) is only produced in training mode; kiln "
          "supports output 0 'Y' only",
          i);
    }
  }
  KILN_ASSIGN_OR_RETURN(int64_t spatial, ctx.node.attributes.get_int("spatial", 1));
  if (spatial != 0 && spatial != 1) {
    return invalid_argument("attribute 'spatial' must be 0 or 1, got {}", spatial);
  }
  KILN_RETURN_IF_ERROR(ctx.node.attributes.get_float("epsilon", 1e-5).status());
  KILN_RETURN_IF_ERROR(kernels::read_fused_relu(ctx.node.attributes).status());

  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", {DType::kF32, DType::kF64}));
  if (x.shape.size() < 2) {
    return invalid_argument("input 0 'X' must have rank >= 2 ([N, C, ...]), got {}",
                            shape_to_string(x.shape));
  }
  Shape expected = spatial == 1 ? Shape{x.shape[1]} : Shape(x.shape.begin() + 1, x.shape.end());
  for (size_t i = 1; i < 5; ++i) {
    KILN_ASSIGN_OR_RETURN(ValueType p, required_input(ctx, i, kParamNames[i]));
    KILN_RETURN_IF_ERROR(check_dtype(p, i, kParamNames[i], {DType::kF32, DType::kF64}));
    if (p.shape.size() != expected.size()) {
      return invalid_argument("{} must have shape {} ({}), got {}", input_label(i, kParamNames[i]),
                              shape_to_string(expected),
                              spatial == 1 ? "channels of X" : "X.shape[1:] for spatial = 0",
                              shape_to_string(p.shape));
    }
    for (size_t d = 0; d < expected.size(); ++d) {
      KILN_RETURN_IF_ERROR(check_dims_equal(
          p.shape[d], expected[d],
          fmt::format("{} dim {} (input 0 'X' dim {})", input_label(i, kParamNames[i]), d, d + 1)));
    }
  }
  ctx.outputs.assign(ctx.node.outputs.size(), ValueType{x.dtype, x.shape});
  return ok_status();
}

Status batch_norm_kernel(const ir::Node& node, std::span<const Tensor> in, std::span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(double epsilon, node.attributes.get_float("epsilon", 1e-5));
  KILN_ASSIGN_OR_RETURN(int64_t spatial, node.attributes.get_int("spatial", 1));
  KILN_ASSIGN_OR_RETURN(bool relu, kernels::read_fused_relu(node.attributes));
  const Tensor& xt = in[0];
  const int64_t batch = xt.shape()[0];
  const int64_t channels = xt.shape()[1];
  int64_t inner = 1;
  for (size_t i = 2; i < xt.shape().size(); ++i) inner *= xt.shape()[i];
  const std::vector<double> x = to_doubles(xt);
  const std::vector<double> scale = to_doubles(in[1]);
  const std::vector<double> bias = to_doubles(in[2]);
  const std::vector<double> mean = to_doubles(in[3]);
  const std::vector<double> var = to_doubles(in[4]);
  std::vector<double> y(x.size());
  const int64_t feature_count = channels * inner;
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < batch * channels; ++nc) {
    const int64_t c = nc % channels;
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t at = nc * inner + i;
      const int64_t p = spatial == 1 ? c : at % feature_count;
      double v = (x[at] - mean[p]) / std::sqrt(var[p] + epsilon) * scale[p] + bias[p];
      if (relu && v < 0) v = 0;
      y[at] = v;
    }
  }
  store_doubles(y, out[0]);
  return ok_status();
}

}  // namespace

void register_normalization_ops(Registry& registry) {
  registry.add(make_op("BatchNormalization", infer_batch_norm, batch_norm_kernel));
}

}  // namespace kiln::ops
