// kiln's fused activation: the elementwise function the fusion passes fold into the op before it
// (passes::fuse_conv), applied last to every output element.
//
//   "kiln_activation" absent or ""  none
//   "kiln_activation" = "relu"      v < 0 ? 0 : v
//   "kiln_activation" = "clip"      v < min ? min : (v > max ? max : v), which is ONNX Clip with
//                                   the float attributes "kiln_activation_min" and
//                                   "kiln_activation_max" as bounds (finite, min <= max; an
//                                   absent bound is unbounded). ReLU6 is clip(0, 6).
//   "kiln_activation" = "leaky_relu" v < 0 ? alpha * v : v, ONNX LeakyRelu with the float
//                                   attribute "kiln_activation_alpha" (finite; default 0.01).
//   "kiln_activation" = "silu"      v * sigmoid(v) (SiLU, or swish with beta 1), which is ONNX
//                                   Mul(v, Sigmoid(v)) with Sigmoid as kiln's kernel computes it
//                                   (split by sign, so exp never overflows): -inf gives NaN
//                                   (-inf * 0), +inf gives +inf.
//   "kiln_activation" = "mish"      v * tanh(softplus(v)), ONNX Mish (opset 18) and the
//                                   Softplus -> Tanh -> Mul chain passes::fuse_mish makes one:
//                                   -inf gives NaN (-inf * tanh(0)), +inf gives +inf.
//   "kiln_activation" = "gelu"      v/2 (1 + erf(v / sqrt 2)), ONNX Gelu (opset 20); "gelu_tanh":
//                                   v/2 (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3))), Gelu with
//                                   approximate = "tanh". -inf gives NaN (-inf * 0), +inf gives
//                                   +inf. passes::fuse_matmul folds them into MatMul only; ops
//                                   that take no GELU say so (reject_gelu).
//
// NaN stays NaN, on every path: the portable and reference kernels use apply(); the CPU backend
// hands relu or clip to oneDNN (whose max(x, bound) maps a NaN to the bound) only where the conv's
// input rules a NaN out (hal/cpu/finite_guard.h), and otherwise applies them with kiln's own code
// (hal/cpu/activation_step.h, the Winograd kernel's epilogue), as ONNX Runtime and PyTorch keep
// NaN. -0 stays -0 (v < 0 is false for it). SiLU and Mish run on kiln's vector kernels
// (hal/cpu/vector_map_kernels.h), whose results at the non-finite inputs the CPU tests pin down.
#pragma once

#include <cmath>
#include <limits>
#include <string>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"

namespace kiln::kernels {

// ONNX Gelu (opset 20): x/2 (1 + erf(x / sqrt 2)), or with approximate = "tanh"
// x/2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). Gelu's portable kernel and the fused activation
// both compute it here.
template <typename T>
T gelu(T x, bool tanh_approximation) {
  using std::erf;
  using std::tanh;
  if (tanh_approximation) {
    const T inner = static_cast<T>(0.7978845608028654) * (x + static_cast<T>(0.044715) * x * x * x);
    return static_cast<T>(0.5) * x * (T(1) + tanh(inner));
  }
  return static_cast<T>(0.5) * x * (T(1) + erf(x * static_cast<T>(0.7071067811865476)));
}

// Mish, x * tanh(softplus(x)), with softplus(x) = max(x, 0) + log1p(e^-|x|): -inf gives -inf *
// tanh(0) = NaN, as the op written out (Softplus, Tanh, Mul) does. Mish's portable kernel and the
// fused activation both compute it here.
template <typename T>
T mish(T x) {
  using std::exp;
  using std::fabs;
  using std::log1p;
  using std::tanh;
  return x * tanh((x > T(0) ? x : T(0)) + log1p(exp(-fabs(x))));
}

struct FusedActivation {
  enum class Kind { kNone, kRelu, kClip, kLeakyRelu, kSilu, kMish, kGelu, kGeluTanh };
  Kind kind = Kind::kNone;
  double min = -std::numeric_limits<double>::infinity();  // kClip only
  double max = std::numeric_limits<double>::infinity();   // kClip only
  double alpha = 0.01;                                    // kLeakyRelu only

  template <typename T>
  T apply(T v) const {
    switch (kind) {
      case Kind::kNone: return v;
      case Kind::kRelu: return v < T(0) ? T(0) : v;
      case Kind::kClip:
        if (v < static_cast<T>(min)) return static_cast<T>(min);
        if (v > static_cast<T>(max)) return static_cast<T>(max);
        return v;
      case Kind::kLeakyRelu:
        return v < T(0) ? static_cast<T>(alpha) * v : v;  // as LeakyRelu's kernel
      case Kind::kSilu: {
        using std::exp;
        if (v >= T(0)) return v * (T(1) / (T(1) + exp(-v)));  // as Sigmoid's kernel
        const T e = exp(v);
        return v * (e / (T(1) + e));
      }
      case Kind::kMish: return mish(v);
      case Kind::kGelu: return gelu(v, false);
      case Kind::kGeluTanh: return gelu(v, true);
    }
    return v;
  }
  bool operator==(const FusedActivation&) const = default;
};

// The attribute names above.
inline constexpr const char* kActivationAttribute = "kiln_activation";
inline constexpr const char* kActivationMinAttribute = "kiln_activation_min";
inline constexpr const char* kActivationMaxAttribute = "kiln_activation_max";
inline constexpr const char* kActivationAlphaAttribute = "kiln_activation_alpha";

// Reads and validates the fused activation: an unknown name, a bound or alpha that is not finite,
// min > max, bounds without "clip" or alpha without "leaky_relu" are InvalidArgument naming the
// attribute.
StatusOr<FusedActivation> read_fused_activation(const Attributes& attributes);

// Sets the attributes that read_fused_activation reads back as `activation`.
void set_fused_activation(Attributes& attributes, const FusedActivation& activation);

// "relu", "clip(0, 6)", "leaky_relu(0.1)", "silu", "mish", "gelu", "gelu_tanh"; "" for none.
std::string describe(const FusedActivation& activation);

// Whether `activation` is one of the GELU forms.
bool is_gelu(const FusedActivation& activation);

// For ops whose kernels fuse no GELU (Conv, BatchNormalization): Unimplemented naming the
// attribute when `activation` is a GELU form.
Status reject_gelu(const FusedActivation& activation);

// For ops that fuse only ReLU (BatchNormalization): Unimplemented naming the activation
// otherwise.
StatusOr<bool> read_fused_relu(const Attributes& attributes);

}  // namespace kiln::kernels
