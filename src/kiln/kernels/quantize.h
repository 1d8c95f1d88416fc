// Linear quantization arithmetic, shared by every path that quantizes so that all of them round
// alike: the quantize family (quantize.cc: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear), the quantized products (QLinearConv in spatial.cc, QLinearMatMul in
// linalg.cc) and the CPU backend's int8 fast paths (hal/cpu/qlinear_op.cc).
//
// Numerics are ONNX's at opset 17, computed in f32 as ONNX Runtime does (the spec's scales are
// tensor(float), so these ops accept f32 scales only and the reference evaluator runs them in
// f32 too):
//   quantize:    q = saturate(round_half_even(x / scale) + zero_point)
//   dequantize:  x = float(q - zero_point) * scale
//   requantize:  y = saturate(round_half_even(float(acc + bias) * multiplier) + zero_point),
//                multiplier = (a_scale * b_scale) / y_scale, per output channel when b_scale is.
// Rounding ties go to the even integer whatever the floating-point rounding mode; the zero point
// is added after rounding (so an odd zero point does not move a tie); saturation is to the
// output type's range (u8 [0, 255], i8 [-128, 127]); +-Inf saturates. NaN has no integer: it
// quantizes to the zero point.
//
// A parameter (scale or zero point) holds one value (a scalar or [1]: per tensor) or one value
// per channel; element i of a tensor is in channel (i / inner) % channels, where inner is the
// product of the dims after the channel axis.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/kernels/kernel.h"

namespace kiln::kernels {

// ---- Shape rules

// A scale operand: dtype f32, and a scalar or [1], or (when `per` is given) [per], one value per
// `per_what`. Errors name the input.
Status check_quant_scale(const ValueType& scale, size_t index, std::string_view name,
                         const DimExpr* per, std::string_view per_what);
// A zero point: dtype `dtype` (that of `dtype_from`), and a scalar or [1], or [per].
Status check_quant_zero_point(const ValueType& zero_point, size_t index, std::string_view name,
                              DType dtype, std::string_view dtype_from, const DimExpr* per,
                              std::string_view per_what);
// True when a parameter of this shape holds one value (a scalar or [1]).
bool is_per_tensor(const Shape& shape);

// ---- Kernels

// x rounded to the nearest integer, ties to even (independent of the rounding mode).
inline float round_half_even(float x) {
  const float r = std::floor(x);
  const float frac = x - r;  // exact; NaN for +-Inf, which then stays r
  if (frac > 0.5f) return r + 1.0f;
  if (frac == 0.5f && std::fmod(r, 2.0f) != 0.0f) return r + 1.0f;
  return r;
}

// The quantized value of `scaled` (x / scale, or acc * multiplier): round, add the zero point,
// saturate to [lo, hi] (a u8 or i8 range). NaN gives the zero point. Clamping to
// [lo - zero_point, hi - zero_point] before rounding gives the same result (the bounds are
// integers), and within them the rounding is integer arithmetic without branches or libm calls
// (the hot loop of requantization): truncate toward zero, then step away from zero when the rest
// is above one half, or exactly one half and the truncated value is odd.
inline int32_t quantize_scaled(float scaled, int32_t zero_point, int32_t lo, int32_t hi) {
  const auto low = static_cast<float>(lo - zero_point);
  const auto high = static_cast<float>(hi - zero_point);
  const float finite = scaled == scaled ? scaled : 0.0f;  // NaN: the zero point
  const float v = std::min(std::max(finite, low), high);
  const auto t = static_cast<int32_t>(v);
  const float rest = v - static_cast<float>(t);  // exact
  const int32_t odd = t & 1;
  const int32_t up = static_cast<int32_t>(rest > 0.5f) | (static_cast<int32_t>(rest == 0.5f) & odd);
  const int32_t down =
      static_cast<int32_t>(rest < -0.5f) | (static_cast<int32_t>(rest == -0.5f) & odd);
  return t + up - down + zero_point;
}

// The range of a quantized dtype (u8, i8; i32 for DequantizeLinear's input).
struct QuantRange {
  int32_t lo = 0, hi = 255;
};
QuantRange quant_range(DType dtype);

// Element c of a parameter buffer (one value: element 0), as f32 / as an integer (u8, i8, i32);
// an absent zero point (null buffer or null data) is 0.
float scale_at(const ConstBuffer& scale, int64_t c);
int32_t zero_point_at(const ConstBuffer* zero_point, int64_t c);

// Requantization of integer accumulators into a u8 or i8 output, with per-channel multipliers and
// optional int32 bias (QLinearConv, QLinearMatMul, the CPU int8 fast paths).
struct Requantization {
  std::vector<float> multipliers;  // one per channel
  std::vector<int32_t> bias;       // empty, or one per channel
  int32_t zero_point = 0;
  QuantRange range;
  DType dtype = DType::kU8;
  int64_t channels = 1, inner = 1;
};
// From the operands' buffers: a_scale and y_scale per tensor, b_scale per tensor or one per
// channel, y_zero_point per tensor (its dtype is the output's), bias null or one per channel.
Requantization make_requantization(const ConstBuffer& a_scale, const ConstBuffer& b_scale,
                                   const ConstBuffer& y_scale, const ConstBuffer& y_zero_point,
                                   const ConstBuffer* bias, int64_t channels, int64_t inner);
// y[i] = requantized acc[i], for the `count` elements of y.
void requantize(const Requantization& r, const int64_t* acc, const MutableBuffer& y);
void requantize(const Requantization& r, const int32_t* acc, const MutableBuffer& y);

// Per-tensor QuantizeLinear / DequantizeLinear over `n` contiguous elements, as the kernels
// compute them (the CPU backend's element-wise fast paths, which run them in any dense layout).
// y_dtype / x_dtype: u8 or i8 (x_dtype also i32).
void quantize_per_tensor(const float* x, DType y_dtype, void* y, int64_t n, float scale,
                         int32_t zero_point);
void dequantize_per_tensor(DType x_dtype, const void* x, float* y, int64_t n, float scale,
                           int32_t zero_point);

}  // namespace kiln::kernels
