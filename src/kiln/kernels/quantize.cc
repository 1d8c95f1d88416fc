// Linear quantization (quantize.h for the numerics): QuantizeLinear and DequantizeLinear (per
// tensor, or per slice along `axis` when the scale is 1-D; opsets 10 and 13 upgrade to 17
// unchanged) and DynamicQuantizeLinear (u8; scale and zero point from the input's range extended
// to include 0, as ONNX Runtime computes them).
//
// Batch invariance: every element is computed alone, except DynamicQuantizeLinear's range, which
// is by definition over the whole tensor.
#include "kiln/kernels/quantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {

// ---------------------------------------------------------------------------------------------
// Shared arithmetic (quantize.h)

bool is_per_tensor(const Shape& shape) {
  return shape.empty() || (shape.size() == 1 && shape[0] == DimExpr(1));
}

namespace {

Status check_parameter_shape(const ValueType& v, size_t index, std::string_view name,
                             const DimExpr* per, std::string_view per_what) {
  if (is_per_tensor(v.shape)) return ok_status();
  if (per != nullptr && v.shape.size() == 1) {
    return check_dims_equal(
        v.shape[0], *per, fmt::format("{} dim 0 (one per {})", input_label(index, name), per_what));
  }
  return invalid_argument("{} must be a scalar{}, got shape {}", input_label(index, name),
                          per != nullptr ? fmt::format(" or have one value per {}", per_what) : "",
                          shape_to_string(v.shape));
}

}  // namespace

Status check_quant_scale(const ValueType& scale, size_t index, std::string_view name,
                         const DimExpr* per, std::string_view per_what) {
  KILN_RETURN_IF_ERROR(check_dtype(scale, index, name, {DType::kF32}));
  return check_parameter_shape(scale, index, name, per, per_what);
}

Status check_quant_zero_point(const ValueType& zero_point, size_t index, std::string_view name,
                              DType dtype, std::string_view dtype_from, const DimExpr* per,
                              std::string_view per_what) {
  KILN_RETURN_IF_ERROR(check_same_dtype(zero_point, index, name, dtype, dtype_from));
  return check_parameter_shape(zero_point, index, name, per, per_what);
}

QuantRange quant_range(DType dtype) {
  switch (dtype) {
    case DType::kI8: return {-128, 127};
    case DType::kI32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default: return {0, 255};
  }
}

float scale_at(const ConstBuffer& scale, int64_t c) {
  return scale.as<float>()[scale.element_count() == 1 ? 0 : c];
}

int32_t zero_point_at(const ConstBuffer* zero_point, int64_t c) {
  if (zero_point == nullptr || zero_point->data == nullptr) return 0;
  const int64_t i = zero_point->element_count() == 1 ? 0 : c;
  switch (zero_point->dtype) {
    case DType::kU8: return zero_point->as<uint8_t>()[i];
    case DType::kI8: return zero_point->as<int8_t>()[i];
    case DType::kI32: return zero_point->as<int32_t>()[i];
    default: return 0;
  }
}

Requantization make_requantization(const ConstBuffer& a_scale, const ConstBuffer& b_scale,
                                   const ConstBuffer& y_scale, const ConstBuffer& y_zero_point,
                                   const ConstBuffer* bias, int64_t channels, int64_t inner) {
  Requantization r;
  r.channels = std::max<int64_t>(channels, 1);
  r.inner = std::max<int64_t>(inner, 1);
  r.dtype = y_zero_point.dtype;
  r.range = quant_range(r.dtype);
  r.zero_point = zero_point_at(&y_zero_point, 0);
  const float a = scale_at(a_scale, 0);
  const float y = scale_at(y_scale, 0);
  for (int64_t c = 0; c < r.channels; ++c) r.multipliers.push_back(a * scale_at(b_scale, c) / y);
  if (bias != nullptr && bias->data != nullptr) {
    const int32_t* b = bias->as<int32_t>();
    r.bias.assign(b, b + r.channels);
  }
  return r;
}

namespace {

// One run of `n` sums that all use `bias` and `m` (stride 0) or one each (stride 1): as ONNX
// Runtime, the int32 sum (with the bias, wrapping) converted to f32, times the multiplier.
// Plain restrict pointers and values, so the compiler vectorizes it.
template <typename Q, typename Acc>
inline __attribute__((always_inline)) void requantize_loop(
    const Acc* __restrict a, Q* __restrict out, int64_t n, const int32_t* __restrict bias,
    const float* __restrict m, int64_t stride, int32_t zero_point, int32_t lo, int32_t hi) {
  for (int64_t i = 0; i < n; ++i) {
    const auto sum = static_cast<int32_t>(static_cast<uint32_t>(static_cast<int32_t>(a[i])) +
                                          static_cast<uint32_t>(bias[i * stride]));
    out[i] = static_cast<Q>(
        quantize_scaled(static_cast<float>(sum) * m[i * stride], zero_point, lo, hi));
  }
}

// The element loops below also exist compiled for AVX2 (twice the lanes of the baseline's SSE2),
// taken when the CPU has it: the same IEEE operations in the same order, so the same results.
bool have_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

template <typename Q, typename Acc>
__attribute__((target("avx2"))) void requantize_loop_avx2(
    const Acc* __restrict a, Q* __restrict out, int64_t n, const int32_t* __restrict bias,
    const float* __restrict m, int64_t stride, int32_t zero_point, int32_t lo, int32_t hi) {
  requantize_loop(a, out, n, bias, m, stride, zero_point, lo, hi);
}

template <typename Q, typename Acc>
void requantize_run(const Acc* __restrict a, Q* __restrict out, int64_t n,
                    const int32_t* __restrict bias, const float* __restrict m, int64_t stride,
                    int32_t zero_point, int32_t lo, int32_t hi) {
  if (have_avx2()) {
    requantize_loop_avx2(a, out, n, bias, m, stride, zero_point, lo, hi);
  } else {
    requantize_loop(a, out, n, bias, m, stride, zero_point, lo, hi);
  }
}

// Row-major [rows, channels, inner]: every channel's `inner` elements in turn. Channels-last
// sums (inner 1: the CPU fast path's, QLinearMatMul's) run a row of channels at a time.
template <typename Q, typename Acc>
void requantize_into(const Requantization& r, const Acc* acc, Q* y, int64_t count) {
  const int64_t channels = r.channels, inner = r.inner, row_size = channels * inner;
  const int64_t rows = count / row_size;
  std::vector<int32_t> zeros;
  if (r.bias.empty()) zeros.assign(static_cast<size_t>(channels), 0);
  const int32_t* bias = r.bias.empty() ? zeros.data() : r.bias.data();
  const float* m = r.multipliers.data();
  const int32_t zero_point = r.zero_point, lo = r.range.lo, hi = r.range.hi;
  auto row = [&](int64_t n) {
    const Acc* a = acc + n * row_size;
    Q* out = y + n * row_size;
    if (inner == 1) {
      requantize_run(a, out, channels, bias, m, 1, zero_point, lo, hi);
      return;
    }
    for (int64_t c = 0; c < channels; ++c) {
      requantize_run(a + c * inner, out + c * inner, inner, bias + c, m + c, 0, zero_point, lo, hi);
    }
  };
  if (rows <= 1 || count < 65536) {
    for (int64_t n = 0; n < rows; ++n) row(n);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) row(n);
}

template <typename Acc>
void requantize_any(const Requantization& r, const Acc* acc, const MutableBuffer& y) {
  const int64_t count = y.element_count();
  if (r.dtype == DType::kI8) {
    requantize_into(r, acc, y.as<int8_t>(), count);
  } else {
    requantize_into(r, acc, y.as<uint8_t>(), count);
  }
}

}  // namespace

void requantize(const Requantization& r, const int64_t* acc, const MutableBuffer& y) {
  requantize_any(r, acc, y);
}
void requantize(const Requantization& r, const int32_t* acc, const MutableBuffer& y) {
  requantize_any(r, acc, y);
}

namespace {

// ---------------------------------------------------------------------------------------------
// QuantizeLinear and DequantizeLinear: input 0 'x', input 1 the scale, input 2 the zero point.

// The axis of per-axis parameters; nullopt for per-tensor ones (then `axis` is not read against
// the rank, as in ONNX Runtime).
StatusOr<std::optional<int64_t>> parameter_axis(const Attributes& attributes, size_t rank,
                                                const Shape& scale) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, attributes.get_int("axis", 1));
  if (is_per_tensor(scale)) return std::optional<int64_t>();
  KILN_ASSIGN_OR_RETURN(int64_t a, normalize_axis(axis, static_cast<int64_t>(rank),
                                                  "attribute 'axis' (of a 1-D scale)"));
  return std::optional<int64_t>(a);
}

// Checks the scale (input 1) and zero point (input 2, optional; its dtype checked by the caller)
// against x: both per tensor, or both [x.shape[axis]].
Status check_linear_parameters(const InferArgs& args, const ValueType& x,
                               std::string_view scale_name, std::string_view zero_name) {
  KILN_ASSIGN_OR_RETURN(ValueType scale, required_input(args, 1, scale_name));
  KILN_RETURN_IF_ERROR(check_dtype(scale, 1, scale_name, {DType::kF32}));
  if (scale.shape.size() > 1) {
    return invalid_argument("{} must be a scalar or 1-D, got shape {}", input_label(1, scale_name),
                            shape_to_string(scale.shape));
  }
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> axis,
                        parameter_axis(args.attributes, x.shape.size(), scale.shape));
  const DimExpr* per = axis ? &x.shape[static_cast<size_t>(*axis)] : nullptr;
  const std::string per_what =
      axis ? fmt::format("index of input 0 'x' dim {} (attribute 'axis')", *axis) : "";
  KILN_RETURN_IF_ERROR(check_quant_scale(scale, 1, scale_name, per, per_what));
  if (const ValueType* z = optional_input(args, 2)) {
    if (is_per_tensor(z->shape) != is_per_tensor(scale.shape)) {
      return invalid_argument("{} must have the shape of {} {}, got {}", input_label(2, zero_name),
                              input_label(1, scale_name), shape_to_string(scale.shape),
                              shape_to_string(z->shape));
    }
    if (per != nullptr) {
      KILN_RETURN_IF_ERROR(check_quant_zero_point(*z, 2, zero_name, z->dtype, "", per, per_what));
    }
  }
  return ok_status();
}

Status infer_quantize_linear(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"axis"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "x"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "x", {DType::kF32, DType::kI32}));
  DType out = DType::kU8;
  if (const ValueType* z = optional_input(args, 2)) {
    KILN_RETURN_IF_ERROR(check_dtype(*z, 2, "y_zero_point", {DType::kU8, DType::kI8}));
    out = z->dtype;
  }
  KILN_RETURN_IF_ERROR(check_linear_parameters(args, x, "y_scale", "y_zero_point"));
  args.outputs = {ValueType{out, x.shape}};
  return ok_status();
}

Status infer_dequantize_linear(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"axis"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "x"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "x", {DType::kU8, DType::kI8, DType::kI32}));
  if (const ValueType* z = optional_input(args, 2)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*z, 2, "x_zero_point", x.dtype, "input 0 'x'"));
  }
  KILN_RETURN_IF_ERROR(check_linear_parameters(args, x, "x_scale", "x_zero_point"));
  args.outputs = {ValueType{DType::kF32, x.shape}};
  return ok_status();
}

// Element i of x uses parameter (i / inner) % channels.
struct ParameterLayout {
  int64_t channels = 1, inner = 1;
};

StatusOr<ParameterLayout> parameter_layout(const MakeArgs& args) {
  const ConcreteShape x = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(
      std::optional<int64_t> axis,
      parameter_axis(args.attributes, x.size(), shape_from_concrete(args.input_dims(1))));
  ParameterLayout p;
  if (axis) {
    p.channels = x[static_cast<size_t>(*axis)];
    p.inner = product(std::span(x).subspan(static_cast<size_t>(*axis) + 1));
  }
  return p;
}

template <typename Body>
void parallel_elements(int64_t n, Body&& body) {
  if (n < 65536) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

// Calls body(begin, end, c) over runs of elements that share parameter channel c (a whole
// per-tensor tensor, or one channel's `inner` elements), cut into pieces of at most kPiece
// elements; in parallel over the pieces when the tensor is large. The loop over a run has
// hoisted parameters and no index arithmetic, so it vectorizes.
template <typename Body>
void for_channel_runs(int64_t n, const ParameterLayout& p, Body&& body) {
  constexpr int64_t kPiece = 16384;
  const int64_t run = p.channels == 1 ? n : p.inner;
  if (n <= 0 || run <= 0) return;
  const int64_t pieces = (run + kPiece - 1) / kPiece;
  const int64_t tasks = n / run * pieces;
  auto task = [&](int64_t t) {
    const int64_t r = t / pieces;
    const int64_t begin = r * run + t % pieces * kPiece;
    body(begin, std::min(begin + kPiece, (r + 1) * run), p.channels == 1 ? 0 : r % p.channels);
  };
  if (n < 65536) {
    for (int64_t t = 0; t < tasks; ++t) task(t);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t) task(t);
}

// Each channel's scale (input 1) and zero point (input 2, 0 when absent) of a Quantize- or
// DequantizeLinear.
std::pair<std::vector<float>, std::vector<int32_t>> channel_parameters(
    std::span<const ConstBuffer> in, const ParameterLayout& p) {
  const ConstBuffer* zero = in.size() > 2 ? &in[2] : nullptr;
  std::vector<float> scales;
  std::vector<int32_t> zeros;
  for (int64_t c = 0; c < p.channels; ++c) {
    scales.push_back(scale_at(in[1], c));
    zeros.push_back(zero_point_at(zero, c));
  }
  return {std::move(scales), std::move(zeros)};
}

// One run of elements with the same parameters, as separate functions with restrict pointers:
// the u8/i8 stores may otherwise alias anything, and the loops would not vectorize.
template <typename X, typename Q>
inline __attribute__((always_inline)) void quantize_loop(const X* __restrict x, Q* __restrict y,
                                                         int64_t n, float scale, int32_t zero,
                                                         int32_t lo, int32_t hi) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<Q>(quantize_scaled(static_cast<float>(x[i]) / scale, zero, lo, hi));
  }
}

// Compiled for AVX2 too (8 divisions per instruction instead of 4; see have_avx2).
template <typename X, typename Q>
__attribute__((target("avx2"))) void quantize_loop_avx2(const X* __restrict x, Q* __restrict y,
                                                        int64_t n, float scale, int32_t zero,
                                                        int32_t lo, int32_t hi) {
  quantize_loop(x, y, n, scale, zero, lo, hi);
}

template <typename X, typename Q>
void quantize_run(const X* __restrict x, Q* __restrict y, int64_t n, float scale, int32_t zero,
                  QuantRange range) {
  if (have_avx2()) {
    quantize_loop_avx2(x, y, n, scale, zero, range.lo, range.hi);
  } else {
    quantize_loop(x, y, n, scale, zero, range.lo, range.hi);
  }
}

template <typename Q>
inline __attribute__((always_inline)) void dequantize_loop(const Q* __restrict x,
                                                           float* __restrict y, int64_t n,
                                                           float scale, int32_t zero) {
  // int32 data minus its zero point can leave int32: int64 there.
  using Wide = std::conditional_t<sizeof(Q) < 4, int32_t, int64_t>;
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<Wide>(x[i]) - zero) * scale;
}

template <typename Q>
__attribute__((target("avx2"))) void dequantize_loop_avx2(const Q* __restrict x,
                                                          float* __restrict y, int64_t n,
                                                          float scale, int32_t zero) {
  dequantize_loop(x, y, n, scale, zero);
}

template <typename Q>
void dequantize_run(const Q* __restrict x, float* __restrict y, int64_t n, float scale,
                    int32_t zero) {
  if (have_avx2()) {
    dequantize_loop_avx2(x, y, n, scale, zero);
  } else {
    dequantize_loop(x, y, n, scale, zero);
  }
}

// Quantizes n elements of x (f32 or i32) into y (u8 or s8, `y_dtype`), each run of elements with
// its channel's scale and zero point (scales[c], zeros[c]; one of each per tensor).
template <typename X>
void quantize_into(const X* x, DType y_dtype, void* y, int64_t n, const ParameterLayout& p,
                   const float* scales, const int32_t* zeros) {
  const QuantRange range = quant_range(y_dtype);
  for_channel_runs(n, p, [&](int64_t begin, int64_t end, int64_t c) {
    if (y_dtype == DType::kI8) {
      quantize_run(x + begin, static_cast<int8_t*>(y) + begin, end - begin, scales[c], zeros[c],
                   range);
    } else {
      quantize_run(x + begin, static_cast<uint8_t*>(y) + begin, end - begin, scales[c], zeros[c],
                   range);
    }
  });
}

// Dequantizes n elements of x (u8, s8 or i32, `x_dtype`) into y, as quantize_into.
void dequantize_from(DType x_dtype, const void* x, float* y, int64_t n, const ParameterLayout& p,
                     const float* scales, const int32_t* zeros) {
  auto run = [&]<typename Q>(const Q* q) {
    for_channel_runs(n, p, [&](int64_t begin, int64_t end, int64_t c) {
      dequantize_run(q + begin, y + begin, end - begin, scales[c], zeros[c]);
    });
  };
  switch (x_dtype) {
    case DType::kU8: run(static_cast<const uint8_t*>(x)); break;
    case DType::kI8: run(static_cast<const int8_t*>(x)); break;
    default: run(static_cast<const int32_t*>(x)); break;
  }
}

class QuantizeLinearKernel : public Kernel {
 public:
  explicit QuantizeLinearKernel(ParameterLayout p) : p_(p) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const auto parameters = channel_parameters(in, p_);
    const std::vector<float>& scales = parameters.first;
    const std::vector<int32_t>& zeros = parameters.second;
    const int64_t n = out[0].element_count();
    if (in[0].dtype == DType::kI32) {
      quantize_into(in[0].as<int32_t>(), out[0].dtype, out[0].data, n, p_, scales.data(),
                    zeros.data());
    } else {
      quantize_into(in[0].as<float>(), out[0].dtype, out[0].data, n, p_, scales.data(),
                    zeros.data());
    }
    return ok_status();
  }

 private:
  ParameterLayout p_;
};

StatusOr<std::unique_ptr<Kernel>> make_quantize_linear(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(ParameterLayout p, parameter_layout(args));
  return std::unique_ptr<Kernel>(std::make_unique<QuantizeLinearKernel>(p));
}

class DequantizeLinearKernel : public Kernel {
 public:
  explicit DequantizeLinearKernel(ParameterLayout p) : p_(p) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const auto parameters = channel_parameters(in, p_);
    const std::vector<float>& scales = parameters.first;
    const std::vector<int32_t>& zeros = parameters.second;
    dequantize_from(in[0].dtype, in[0].data, out[0].as<float>(), out[0].element_count(), p_,
                    scales.data(), zeros.data());
    return ok_status();
  }

 private:
  ParameterLayout p_;
};

StatusOr<std::unique_ptr<Kernel>> make_dequantize_linear(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(ParameterLayout p, parameter_layout(args));
  return std::unique_ptr<Kernel>(std::make_unique<DequantizeLinearKernel>(p));
}

// ---------------------------------------------------------------------------------------------
// DynamicQuantizeLinear: x (f32) -> y (u8), y_scale (f32 scalar), y_zero_point (u8 scalar).
// min and max of x extended to include 0; scale = (max - min) / 255 (1 when max == min, as ONNX
// Runtime, so an all-zero input quantizes to zeros rather than dividing by zero); zero point =
// saturate(round_half_even(0 - min / scale)). A NaN in x makes the scale NaN (and so y and the
// zero point 0).

Status infer_dynamic_quantize_linear(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 3, 3));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "x"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "x", {DType::kF32}));
  args.outputs = {ValueType{DType::kU8, x.shape}, ValueType{DType::kF32, {}},
                  ValueType{DType::kU8, {}}};
  return ok_status();
}

class DynamicQuantizeLinearKernel : public Kernel {
 public:
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const float* x = in[0].as<float>();
    const int64_t n = in[0].element_count();
    float lo = 0, hi = 0;
    bool nan = false;
    for (int64_t i = 0; i < n; ++i) {
      nan = nan || std::isnan(x[i]);
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    if (nan) scale = std::numeric_limits<float>::quiet_NaN();
    const int32_t zero = quantize_scaled(0.0f - lo / scale, 0, 0, 255);
    uint8_t* y = out[0].as<uint8_t>();
    parallel_elements(n, [&](int64_t i) {
      y[i] = static_cast<uint8_t>(quantize_scaled(x[i] / scale, zero, 0, 255));
    });
    out[1].as<float>()[0] = scale;
    out[2].as<uint8_t>()[0] = static_cast<uint8_t>(zero);
    return ok_status();
  }
};

StatusOr<std::unique_ptr<Kernel>> make_dynamic_quantize_linear(const MakeArgs&) {
  return std::unique_ptr<Kernel>(std::make_unique<DynamicQuantizeLinearKernel>());
}

}  // namespace

void quantize_per_tensor(const float* x, DType y_dtype, void* y, int64_t n, float scale,
                         int32_t zero_point) {
  quantize_into(x, y_dtype, y, n, ParameterLayout{}, &scale, &zero_point);
}

void dequantize_per_tensor(DType x_dtype, const void* x, float* y, int64_t n, float scale,
                           int32_t zero_point) {
  dequantize_from(x_dtype, x, y, n, ParameterLayout{}, &scale, &zero_point);
}

void register_quantize_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"DequantizeLinear", infer_dequantize_linear, make_dequantize_linear});
  table.push_back(
      OpDef{"DynamicQuantizeLinear", infer_dynamic_quantize_linear, make_dynamic_quantize_linear});
  table.push_back(OpDef{"QuantizeLinear", infer_quantize_linear, make_quantize_linear});
}

}  // namespace kiln::kernels
