#include "kiln/kernels/op_attributes.h"

#include <fmt/ranges.h>

#include <cmath>

#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {

StatusOr<ConvAttributes> read_conv_attributes(const Attributes& attributes,
                                              std::span<const int64_t> x,
                                              std::span<const int64_t> w) {
  if (x.size() < 3 || w.size() != x.size()) {
    return invalid_argument(
        "Conv needs X [N, C, spatial...] and W of the same rank, got ranks {} "
        "and {}",
        x.size(), w.size());
  }
  ConvAttributes a;
  KILN_ASSIGN_OR_RETURN(a.group, attributes.get_int("group", 1));
  if (a.group < 1) return invalid_argument("attribute 'group' must be >= 1, got {}", a.group);
  WindowOptions options;
  options.kernel_from_weights = std::vector<int64_t>(w.begin() + 2, w.end());
  KILN_ASSIGN_OR_RETURN(WindowGeometry g, parse_window_geometry(attributes, x.size() - 2, options));
  KILN_ASSIGN_OR_RETURN(a.window, resolve_window(g, x.subspan(2)));
  KILN_ASSIGN_OR_RETURN(a.activation, read_fused_activation(attributes));
  KILN_RETURN_IF_ERROR(reject_gelu(a.activation));
  KILN_ASSIGN_OR_RETURN(a.residual_after_activation,
                        read_residual_after_activation(attributes, a.activation));
  return a;
}

StatusOr<bool> read_residual_after_activation(const Attributes& attributes,
                                              const FusedActivation& activation) {
  KILN_ASSIGN_OR_RETURN(const int64_t after,
                        attributes.get_int(kResidualAfterActivationAttribute, 0));
  if (after != 0 && after != 1) {
    return invalid_argument("attribute '{}' must be 0 or 1, got {}",
                            kResidualAfterActivationAttribute, after);
  }
  if (after == 1 && activation.kind == FusedActivation::Kind::kNone) {
    return invalid_argument("attribute '{}' needs a fused activation ('{}')",
                            kResidualAfterActivationAttribute, kActivationAttribute);
  }
  return after == 1;
}

StatusOr<FusedActivation> read_matmul_activation(const Attributes& attributes, DType dtype) {
  KILN_ASSIGN_OR_RETURN(FusedActivation a, read_fused_activation(attributes));
  if (a.kind == FusedActivation::Kind::kNone) return a;
  if (!is_gelu(a)) {
    return unimplemented("MatMul's attribute '{}' = \"{}\" is not supported (only GELU fuses)",
                         kActivationAttribute, describe(a));
  }
  if (!is_float(dtype)) {
    return unimplemented("MatMul's attribute '{}' = \"{}\" needs a float product, got {}",
                         kActivationAttribute, describe(a), dtype_name(dtype));
  }
  return a;
}

StatusOr<std::optional<float>> read_matmul_scale(const Attributes& attributes, DType dtype) {
  if (!attributes.has(kMatmulScaleAttribute)) return std::optional<float>();
  KILN_ASSIGN_OR_RETURN(double value, attributes.get_float(kMatmulScaleAttribute, 1.0));
  if (!is_float(dtype)) {
    return unimplemented("MatMul's attribute '{}' needs a float product, got {}",
                         kMatmulScaleAttribute, dtype_name(dtype));
  }
  const auto scale = static_cast<float>(value);
  if (static_cast<double>(scale) != value && !(std::isnan(value) && std::isnan(scale))) {
    return invalid_argument("MatMul's attribute '{}' = {} is not an f32 value",
                            kMatmulScaleAttribute, value);
  }
  return std::optional<float>(scale);
}

StatusOr<bool> read_matmul_softmax(const Attributes& attributes, DType dtype) {
  KILN_ASSIGN_OR_RETURN(int64_t value, attributes.get_int(kMatmulSoftmaxAttribute, 0));
  if (value != 0 && value != 1) {
    return invalid_argument("MatMul's attribute '{}' must be 0 or 1, got {}",
                            kMatmulSoftmaxAttribute, value);
  }
  if (value == 0) return false;
  if (!is_float(dtype)) {
    return unimplemented("MatMul's attribute '{}' needs a float product, got {}",
                         kMatmulSoftmaxAttribute, dtype_name(dtype));
  }
  KILN_ASSIGN_OR_RETURN(FusedActivation activation, read_fused_activation(attributes));
  if (activation.kind != FusedActivation::Kind::kNone) {
    return invalid_argument("MatMul's attributes '{}' and '{}' do not go together",
                            kMatmulSoftmaxAttribute, kActivationAttribute);
  }
  return true;
}

StatusOr<PoolAttributes> read_pool_attributes(std::string_view op_type,
                                              const Attributes& attributes,
                                              std::span<const int64_t> x) {
  if (x.size() < 3) {
    return invalid_argument("{} needs X [N, C, spatial...], got rank {}", op_type, x.size());
  }
  const size_t r = x.size() - 2;
  PoolAttributes a;
  if (op_type == "GlobalMaxPool" || op_type == "GlobalAveragePool") {
    a.max = op_type == "GlobalMaxPool";
    a.window = ConcreteWindow{std::vector<int64_t>(x.begin() + 2, x.end()),
                              std::vector<int64_t>(r, 1),
                              std::vector<int64_t>(r, 1),
                              std::vector<int64_t>(r, 0),
                              std::vector<int64_t>(r, 0),
                              false};
    return a;
  }
  if (op_type != "MaxPool" && op_type != "AveragePool") {
    return internal_error("read_pool_attributes: '{}' is not a max or average pool", op_type);
  }
  a.max = op_type == "MaxPool";
  WindowOptions options;
  options.allow_ceil_mode = true;
  KILN_ASSIGN_OR_RETURN(WindowGeometry g, parse_window_geometry(attributes, r, options));
  KILN_ASSIGN_OR_RETURN(a.window, resolve_window(g, x.subspan(2)));
  if (a.max) {
    KILN_ASSIGN_OR_RETURN(int64_t order, attributes.get_int("storage_order", 0));
    if (order != 0 && order != 1) {
      return invalid_argument("attribute 'storage_order' must be 0 or 1, got {}", order);
    }
    a.column_major_indices = order == 1;
  } else {
    KILN_ASSIGN_OR_RETURN(int64_t include, attributes.get_int("count_include_pad", 0));
    if (include != 0 && include != 1) {
      return invalid_argument("attribute 'count_include_pad' must be 0 or 1, got {}", include);
    }
    a.count_include_pad = include == 1;
  }
  return a;
}

namespace {

StatusOr<bool> flag_attribute(const Attributes& attributes, const char* name) {
  KILN_ASSIGN_OR_RETURN(int64_t v, attributes.get_int(name, 0));
  if (v != 0 && v != 1) return invalid_argument("attribute '{}' must be 0 or 1, got {}", name, v);
  return v == 1;
}

}  // namespace

StatusOr<BatchNormAttributes> read_batch_norm_attributes(const Attributes& a) {
  KILN_RETURN_IF_ERROR(check_known_attributes(
      a, {"epsilon", "momentum", "training_mode", "spatial", "kiln_activation"}));
  BatchNormAttributes o;
  KILN_ASSIGN_OR_RETURN(o.epsilon, a.get_float("epsilon", 1e-5));
  KILN_RETURN_IF_ERROR(a.get_float("momentum", 0.9).status());
  KILN_ASSIGN_OR_RETURN(int64_t training, a.get_int("training_mode", 0));
  if (training != 0) {
    return unimplemented("attribute 'training_mode' = {} is not supported (inference only)",
                         training);
  }
  KILN_ASSIGN_OR_RETURN(int64_t spatial, a.get_int("spatial", 1));
  if (spatial != 0 && spatial != 1) {
    return invalid_argument("attribute 'spatial' must be 0 or 1, got {}", spatial);
  }
  o.spatial = spatial == 1;
  KILN_ASSIGN_OR_RETURN(o.relu, read_fused_relu(a));
  return o;
}

StatusOr<GemmAttributes> read_gemm_attributes(const Attributes& attributes, DType dtype) {
  GemmAttributes p;
  KILN_ASSIGN_OR_RETURN(p.trans_a, flag_attribute(attributes, "transA"));
  KILN_ASSIGN_OR_RETURN(p.trans_b, flag_attribute(attributes, "transB"));
  KILN_ASSIGN_OR_RETURN(p.alpha, attributes.get_float("alpha", 1.0));
  KILN_ASSIGN_OR_RETURN(p.beta, attributes.get_float("beta", 1.0));
  if (is_integer(dtype) && (p.alpha != std::trunc(p.alpha) || p.beta != std::trunc(p.beta))) {
    return unimplemented("attributes 'alpha' {} and 'beta' {} must be integers for dtype {}",
                         p.alpha, p.beta, dtype_name(dtype));
  }
  return p;
}

StatusOr<bool> read_gelu_tanh_approximation(const Attributes& attributes) {
  const StatusOr<std::string> approximate = attributes.get_string("approximate", "none");
  if (!approximate.ok()) return approximate.status();
  const std::string_view text = *approximate;
  if (text == "tanh") return true;
  if (text == "none") return false;
  return invalid_argument("attribute 'approximate' must be \"none\" or \"tanh\", got \"{}\"", text);
}

StatusOr<double> read_leaky_relu_alpha(const Attributes& attributes) {
  return attributes.get_float("alpha", 0.01);
}

StatusOr<int64_t> read_softmax_axis(const Attributes& attributes, int64_t rank) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, attributes.get_int("axis", -1));
  return normalize_axis(axis, rank, "attribute 'axis'");
}

StatusOr<LayerNormOptions> read_layer_norm_options(const Attributes& a, int64_t rank) {
  KILN_RETURN_IF_ERROR(check_known_attributes(a, {"axis", "epsilon", "stash_type"}));
  LayerNormOptions o;
  KILN_ASSIGN_OR_RETURN(int64_t axis, a.get_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(o.epsilon, a.get_float("epsilon", 1e-5));
  KILN_ASSIGN_OR_RETURN(int64_t stash, a.get_int("stash_type", 1));
  if (stash != 1) {
    return unimplemented("attribute 'stash_type' = {} is not supported (only 1, float)", stash);
  }
  KILN_ASSIGN_OR_RETURN(o.axis, normalize_axis(axis, rank, "attribute 'axis'", true));
  return o;
}

StatusOr<std::vector<int64_t>> read_transpose_perm(const Attributes& attributes, size_t rank) {
  std::vector<int64_t> reversed(rank);
  for (size_t i = 0; i < rank; ++i) reversed[i] = static_cast<int64_t>(rank - 1 - i);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, attributes.get_ints("perm", reversed));
  if (perm.size() != rank) {
    return invalid_argument("attribute 'perm' has {} elements for input 0 'data' of rank {}",
                            perm.size(), rank);
  }
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(rank) || seen[perm[i]]) {
      return invalid_argument("attribute 'perm' [{}] is not a permutation of 0..{}",
                              fmt::join(perm, ","), static_cast<int64_t>(rank) - 1);
    }
    seen[perm[i]] = true;
  }
  return perm;
}

}  // namespace kiln::kernels
