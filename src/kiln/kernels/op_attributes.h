// The attributes of the ops that backends specialize, parsed and checked once: Conv and the
// pools (for concrete input dims), BatchNormalization, Gemm, Gelu, the Softmax family's axis and
// LayerNormalization.
// The ops' definitions (spatial.cc, normalize.cc, linalg.cc, unary.cc) read them with these
// functions, and backends read them here instead of the raw attributes: a backend only decides
// whether it can run what it reads.
//
// Callers pass dims that the op's infer has accepted (plan_concrete or check_concrete); the
// readers still refuse what they cannot parse, with errors naming the attribute.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/dtype.h"
#include "kiln/base/status.h"
#include "kiln/kernels/activation.h"
#include "kiln/kernels/conv_geometry.h"

namespace kiln::kernels {

// Conv: X [N, C, spatial...], W [M, C/group, k...]; kiln's fused activation (activation.h).
// kiln's residual (input 3) is added before the activation, as ResNet's Add before its Relu; with
// kiln_residual_after_activation = 1 it is added after it, as an Add of two activated branches
// (passes::fuse_conv), each of the two steps rounding once as the unfused nodes do.
inline constexpr const char* kResidualAfterActivationAttribute = "kiln_residual_after_activation";
struct ConvAttributes {
  ConcreteWindow window;
  int64_t group = 1;
  FusedActivation activation;
  bool residual_after_activation = false;
};
StatusOr<ConvAttributes> read_conv_attributes(const Attributes& attributes,
                                              std::span<const int64_t> x,
                                              std::span<const int64_t> w);
// kiln_residual_after_activation: 0 (or absent) or 1, and 1 only with a fused `activation`;
// otherwise InvalidArgument naming the attribute.
StatusOr<bool> read_residual_after_activation(const Attributes& attributes,
                                              const FusedActivation& activation);

// MaxPool and AveragePool (windows from the attributes) and GlobalMaxPool and GlobalAveragePool
// (one window over all spatial dims, no padding) on X [N, C, spatial...].
struct PoolAttributes {
  bool max = true;  // max, else average
  ConcreteWindow window;
  bool count_include_pad = false;     // AveragePool
  bool column_major_indices = false;  // MaxPool's storage_order = 1 (for its Indices output)
};
StatusOr<PoolAttributes> read_pool_attributes(std::string_view op_type,
                                              const Attributes& attributes,
                                              std::span<const int64_t> x);

// BatchNormalization (inference): epsilon, opset 7's spatial (false: per-feature parameters of
// shape X.shape[1:]), fused ReLU. training_mode = 1 is Unimplemented (normalize.cc runs it).
struct BatchNormAttributes {
  double epsilon = 1e-5;
  bool spatial = true;
  bool relu = false;
};
StatusOr<BatchNormAttributes> read_batch_norm_attributes(const Attributes& attributes);

// Gemm: Y = alpha * A' B' + beta * C, A' = transA ? A^T : A. For integer `dtype`, alpha and beta
// must be whole numbers (Unimplemented otherwise).
struct GemmAttributes {
  bool trans_a = false, trans_b = false;
  double alpha = 1, beta = 1;
};
StatusOr<GemmAttributes> read_gemm_attributes(const Attributes& attributes, DType dtype);

// MatMul's fused activation (passes::fuse_matmul): none, "gelu" or "gelu_tanh", on a float
// `dtype` only; any other is Unimplemented naming it.
StatusOr<FusedActivation> read_matmul_activation(const Attributes& attributes, DType dtype);

// MatMul's fused scale (passes::fuse_matmul): the float its sums are multiplied by, or nullopt
// when the attribute is absent; on a float product only, and a value an f32 holds exactly.
inline constexpr const char* kMatmulScaleAttribute = "kiln_scale";
StatusOr<std::optional<float>> read_matmul_scale(const Attributes& attributes, DType dtype);

// MatMul's fused softmax (passes::fuse_matmul): whether the attribute kiln_softmax = 1 asks for
// Softmax along the result's last axis after the rest of the epilogue (attention's scores); on a
// float product without kiln_activation only, of rank >= 1; 0 or absent is no softmax, any other
// value is InvalidArgument.
inline constexpr const char* kMatmulSoftmaxAttribute = "kiln_softmax";
StatusOr<bool> read_matmul_softmax(const Attributes& attributes, DType dtype);

// Gelu's `approximate`: true for "tanh", false for "none".
StatusOr<bool> read_gelu_tanh_approximation(const Attributes& attributes);

// LeakyRelu's `alpha` (default 0.01).
StatusOr<double> read_leaky_relu_alpha(const Attributes& attributes);

// The opset-13 Softmax, LogSoftmax and Hardmax `axis` (default -1) for an input of `rank`, made
// non-negative.
StatusOr<int64_t> read_softmax_axis(const Attributes& attributes, int64_t rank);

// LayerNormalization (opset 17): the first normalized axis (non-negative) of an input of `rank`
// and epsilon; stash_type must be 1 (float statistics).
struct LayerNormOptions {
  int64_t axis = -1;
  double epsilon = 1e-5;
};
StatusOr<LayerNormOptions> read_layer_norm_options(const Attributes& attributes, int64_t rank);

// Transpose's `perm` for an input of `rank` (default: the dims reversed), checked to be a
// permutation of 0..rank-1.
StatusOr<std::vector<int64_t>> read_transpose_perm(const Attributes& attributes, size_t rank);

}  // namespace kiln::kernels
