// Windowed ops over [N, C, spatial...] tensors: Conv (with kiln's fused residual and activation),
// ConvInteger, QLinearConv, ConvTranspose, MaxPool (with Indices), AveragePool, LpPool and the
// global pools. Windowed ops take 1 to 3 spatial dims, padded in front to 3 so one loop nest serves
// all; the global pools take any rank >= 3.
//
// Batch invariance: every output element is reduced by one thread in a fixed order (input
// channel, then kernel taps or input positions, row-major), whatever the batch size or thread
// count; work is split over independent output planes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "kiln/kernels/activation.h"
#include "kiln/kernels/conv_geometry.h"
#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/op_attributes.h"
#include "kiln/kernels/quantize.h"

namespace kiln::kernels {
namespace {

constexpr int64_t kMaxSpatial = 3;
using Dims3 = std::array<int64_t, 3>;

// The spatial dims of a windowed op, right-aligned in 3 (missing leading dims have size 1).
struct Grid {
  Dims3 in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1},
      pad_begin{0, 0, 0}, pad_end{0, 0, 0};
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_volume() const { return kernel[0] * kernel[1] * kernel[2]; }
};

Grid make_grid(const ConcreteWindow& w, std::span<const int64_t> in_spatial,
               std::span<const int64_t> out_spatial) {
  Grid grid;
  const size_t r = w.spatial_rank();
  for (size_t i = 0; i < r; ++i) {
    const size_t j = kMaxSpatial - r + i;
    grid.in[j] = in_spatial[i];
    grid.out[j] = out_spatial[i];
    grid.kernel[j] = w.kernel[i];
    grid.stride[j] = w.strides[i];
    grid.dilation[j] = w.dilations[i];
    grid.pad_begin[j] = w.pads_begin[i];
    grid.pad_end[j] = w.pads_end[i];
  }
  return grid;
}

// Runs body(i) for i in [0, n) over the OpenMP threads when the total work is large enough to pay
// for them. Each i is independent.
template <typename Body>
void parallel_jobs(int64_t n, int64_t work_per_job, Body&& body) {
  if (n <= 1 || n * std::max<int64_t>(work_per_job, 1) < 32768) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < n; ++i) body(i);
}

// Output positions [lo, hi) whose input index o * stride + offset lies in [0, in).
std::pair<int64_t, int64_t> valid_range(int64_t offset, int64_t stride, int64_t in, int64_t out) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = in - offset <= 0 ? 0 : (in - 1 - offset) / stride + 1;
  return {std::min(lo, out), std::min(hi, out)};
}

// Element values of a buffer in compute type Acc (a copy; kernels that need no conversion read
// the buffer directly).
template <typename Acc, typename T>
std::vector<Acc> widen(const ConstBuffer& b) {
  const int64_t n = b.element_count();
  std::vector<Acc> out(static_cast<size_t>(n));
  const T* p = b.as<T>();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Acc>(load(p, i));
  return out;
}

// Shared by the 1-to-3-D ops: X has rank 3 to 5.
Status check_spatial_input(const ValueType& x, std::string_view name) {
  return check_rank_range(x, 0, name, 3, 2 + kMaxSpatial);
}

// ---------------------------------------------------------------------------------------------
// Conv and ConvInteger

struct ConvShape {
  WindowGeometry geometry;
  int64_t group = 1;
  Shape out;
};

// Where X and W are among the node's inputs (Conv: input 0 'X', input 1 'W'; ConvInteger: 'x',
// 'w'; QLinearConv: input 0 'x', input 3 'w'), for the shape rule's errors and make's dims.
struct ConvOperands {
  std::string_view x = "X";
  size_t w_index = 1;
  std::string_view w = "W";
};

// The kernel dims of W ([M, C/group, k...]): must be constants.
StatusOr<std::vector<int64_t>> weight_kernel(const ValueType& w, const ConvOperands& names = {}) {
  std::vector<int64_t> kernel;
  for (size_t i = 2; i < w.shape.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(
        int64_t k,
        require_constant_dim(w.shape[i],
                             fmt::format("{} dim {}", input_label(names.w_index, names.w), i)));
    kernel.push_back(k);
  }
  return kernel;
}

StatusOr<int64_t> read_group(const Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(int64_t group, attributes.get_int("group", 1));
  if (group < 1) return invalid_argument("attribute 'group' must be >= 1, got {}", group);
  return group;
}

StatusOr<ConvShape> infer_conv_shape(const Attributes& attributes, const ValueType& x,
                                     const ValueType& w, const ConvOperands& names = {}) {
  const std::string w_label = input_label(names.w_index, names.w);
  KILN_RETURN_IF_ERROR(check_rank(w, names.w_index, names.w, static_cast<int64_t>(x.shape.size())));
  ConvShape s;
  KILN_ASSIGN_OR_RETURN(s.group, read_group(attributes));
  WindowOptions options;
  KILN_ASSIGN_OR_RETURN(options.kernel_from_weights, weight_kernel(w, names));
  KILN_ASSIGN_OR_RETURN(s.geometry, parse_window_geometry(attributes, x.shape.size() - 2, options));
  const DimExpr& out_channels = w.shape[0];
  KILN_RETURN_IF_ERROR(check_dims_equal(
      x.shape[1], w.shape[1] * DimExpr(s.group),
      fmt::format("{} dim 1 (channels; {} dim 1 {} * attribute 'group' {})",
                  input_label(0, names.x), w_label, w.shape[1].to_string(), s.group)));
  if (s.group > 1) {
    KILN_ASSIGN_OR_RETURN(
        int64_t m,
        require_constant_dim(out_channels, fmt::format("{} dim 0 (output channels)", w_label)));
    if (m % s.group != 0) {
      return invalid_argument(
          "{} dim 0 (output channels) = {} must be divisible by attribute 'group' = {}", w_label, m,
          s.group);
    }
  }
  KILN_ASSIGN_OR_RETURN(Shape spatial,
                        window_output_dims(s.geometry, std::span(x.shape).subspan(2)));
  s.out = {x.shape[0], out_channels};
  s.out.insert(s.out.end(), spatial.begin(), spatial.end());
  return s;
}

Status check_output_shaped(const ValueType& v, size_t index, std::string_view name,
                           const Shape& out) {
  if (v.shape.size() != out.size()) {
    return invalid_argument("{} must have the output shape {}, got {}", input_label(index, name),
                            shape_to_string(out), shape_to_string(v.shape));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    KILN_RETURN_IF_ERROR(
        check_dims_equal(v.shape[i], out[i],
                         fmt::format("{} dim {} (output shape {})", input_label(index, name), i,
                                     shape_to_string(out))));
  }
  return ok_status();
}

Status infer_conv(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(
      args.attributes, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides",
                        kActivationAttribute, kActivationMinAttribute, kActivationMaxAttribute,
                        kActivationAlphaAttribute, kResidualAfterActivationAttribute}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 4));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", float_dtypes()));
  KILN_RETURN_IF_ERROR(check_spatial_input(x, "X"));
  KILN_ASSIGN_OR_RETURN(ValueType w, required_input(args, 1, "W"));
  KILN_RETURN_IF_ERROR(check_same_dtype(w, 1, "W", x.dtype, "input 0 'X'"));
  KILN_ASSIGN_OR_RETURN(ConvShape s, infer_conv_shape(args.attributes, x, w));
  if (const ValueType* b = optional_input(args, 2)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*b, 2, "B", x.dtype, "input 0 'X'"));
    KILN_RETURN_IF_ERROR(check_rank(*b, 2, "B", 1));
    KILN_RETURN_IF_ERROR(
        check_dims_equal(b->shape[0], w.shape[0], "input 2 'B' dim 0 (input 1 'W' dim 0)"));
  }
  if (const ValueType* residual = optional_input(args, 3)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*residual, 3, "residual", x.dtype, "input 0 'X'"));
    KILN_RETURN_IF_ERROR(check_output_shaped(*residual, 3, "residual", s.out));
  }
  KILN_ASSIGN_OR_RETURN(FusedActivation activation, read_fused_activation(args.attributes));
  KILN_RETURN_IF_ERROR(reject_gelu(activation));
  KILN_ASSIGN_OR_RETURN(const bool after,
                        read_residual_after_activation(args.attributes, activation));
  if (after && optional_input(args, 3) == nullptr) {
    return invalid_argument("attribute '{}' needs input 3 'residual'",
                            kResidualAfterActivationAttribute);
  }
  args.outputs = {ValueType{x.dtype, std::move(s.out)}};
  return ok_status();
}

// A zero point: a scalar or [1], or (when `per_channel` is given) [per_channel].
Status check_zero_point(const ValueType& z, size_t index, std::string_view name,
                        const DimExpr* per_channel) {
  if (z.shape.empty() || (z.shape.size() == 1 && z.shape[0] == DimExpr(1))) return ok_status();
  if (per_channel != nullptr && z.shape.size() == 1) {
    return check_dims_equal(
        z.shape[0], *per_channel,
        fmt::format("{} dim 0 (one per output channel)", input_label(index, name)));
  }
  return invalid_argument("{} must be a scalar{}, got shape {}", input_label(index, name),
                          per_channel != nullptr ? " or have one value per output channel" : "",
                          shape_to_string(z.shape));
}

Status infer_conv_integer(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(
      args.attributes, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 4));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "x"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "x", {DType::kU8, DType::kI8}));
  KILN_RETURN_IF_ERROR(check_spatial_input(x, "x"));
  KILN_ASSIGN_OR_RETURN(ValueType w, required_input(args, 1, "w"));
  KILN_RETURN_IF_ERROR(check_dtype(w, 1, "w", {DType::kU8, DType::kI8}));
  KILN_ASSIGN_OR_RETURN(ConvShape s, infer_conv_shape(args.attributes, x, w, {"x", 1, "w"}));
  if (const ValueType* z = optional_input(args, 2)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*z, 2, "x_zero_point", x.dtype, "input 0 'x'"));
    KILN_RETURN_IF_ERROR(check_zero_point(*z, 2, "x_zero_point", nullptr));
  }
  if (const ValueType* z = optional_input(args, 3)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*z, 3, "w_zero_point", w.dtype, "input 1 'w'"));
    KILN_RETURN_IF_ERROR(check_zero_point(*z, 3, "w_zero_point", &w.shape[0]));
  }
  args.outputs = {ValueType{DType::kI32, std::move(s.out)}};
  return ok_status();
}

struct ConvDims {
  Grid grid;
  int64_t batch = 0, channels = 0, out_channels = 0, c_per_group = 0, group = 1;
  FusedActivation activation;              // Conv only
  bool residual_after_activation = false;  // Conv only
};

StatusOr<ConvDims> make_conv_dims(const MakeArgs& args, size_t w_index = 1) {
  const ConcreteShape x = args.input_dims(0);
  const ConcreteShape w = args.input_dims(w_index);
  const ConcreteShape y = args.output_dims(0);
  KILN_ASSIGN_OR_RETURN(ConvAttributes a, read_conv_attributes(args.attributes, x, w));
  ConvDims d;
  d.grid = make_grid(a.window, std::span(x).subspan(2), std::span(y).subspan(2));
  d.group = a.group;
  d.activation = a.activation;
  d.residual_after_activation = a.residual_after_activation;
  d.batch = x[0];
  d.channels = x[1];
  d.out_channels = w[0];
  d.c_per_group = w[1];
  return d;
}

// y[n, m, o] = sum over (c, kd, kh, kw) of x * w, in that order; y is fully written.
template <typename Acc>
void conv_core(const ConvDims& d, const Acc* x, const Acc* w, Acc* y) {
  const Grid& g = d.grid;
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane(), k_volume = g.kernel_volume();
  const int64_t m_per_group = d.out_channels / d.group;
  std::array<std::vector<std::pair<int64_t, int64_t>>, 3> ranges;
  for (size_t a = 0; a < 3; ++a) {
    for (int64_t k = 0; k < g.kernel[a]; ++k) {
      ranges[a].push_back(
          valid_range(k * g.dilation[a] - g.pad_begin[a], g.stride[a], g.in[a], g.out[a]));
    }
  }
  parallel_jobs(d.batch * d.out_channels, out_plane * d.c_per_group * k_volume, [&](int64_t job) {
    const int64_t n = job / d.out_channels;
    const int64_t m = job % d.out_channels;
    const int64_t grp = m / m_per_group;
    Acc* acc = y + job * out_plane;
    std::fill(acc, acc + out_plane, Acc(0));
    for (int64_t c = 0; c < d.c_per_group; ++c) {
      const Acc* xc = x + (n * d.channels + grp * d.c_per_group + c) * in_plane;
      const Acc* wc = w + (m * d.c_per_group + c) * k_volume;
      for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
        for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
          for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
            const Acc wv = wc[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
            const auto [d_lo, d_hi] = ranges[0][kd];
            const auto [h_lo, h_hi] = ranges[1][kh];
            const auto [w_lo, w_hi] = ranges[2][kw];
            for (int64_t od = d_lo; od < d_hi; ++od) {
              const int64_t id = od * g.stride[0] + kd * g.dilation[0] - g.pad_begin[0];
              for (int64_t oh = h_lo; oh < h_hi; ++oh) {
                const int64_t ih = oh * g.stride[1] + kh * g.dilation[1] - g.pad_begin[1];
                const int64_t base =
                    (id * g.in[1] + ih) * g.in[2] + kw * g.dilation[2] - g.pad_begin[2];
                Acc* row = acc + (od * g.out[1] + oh) * g.out[2];
                const int64_t sw = g.stride[2];
                for (int64_t ow = w_lo; ow < w_hi; ++ow) row[ow] += wv * xc[base + ow * sw];
              }
            }
          }
        }
      }
    }
  });
}

class ConvKernel : public Kernel {
 public:
  ConvKernel(ConvDims dims, FusedActivation activation)
      : d_(std::move(dims)), activation_(activation) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (is_float_storage_v<T>) {
        using C = compute_t<T>;
        const bool has_bias = in.size() > 2 && in[2].data != nullptr;
        const bool has_residual = in.size() > 3 && in[3].data != nullptr;
        const int64_t out_plane = d_.grid.out_plane();
        const int64_t total = out[0].element_count();
        auto epilogue = [&](C* y) {
          if (!has_bias && !has_residual && activation_.kind == FusedActivation::Kind::kNone) {
            return;
          }
          for (int64_t i = 0; i < total; ++i) {
            C v = y[i];
            if (has_bias) v += load(in[2].as<T>(), (i / out_plane) % d_.out_channels);
            if (has_residual && !d_.residual_after_activation) v += load(in[3].as<T>(), i);
            v = activation_.apply(v);
            if (has_residual && d_.residual_after_activation) {
              // Rounded to T first, as the activation node's output is before the Add.
              T rounded;
              store(&rounded, 0, v);
              v = load(&rounded, 0) + load(in[3].as<T>(), i);
            }
            y[i] = v;
          }
        };
        if constexpr (std::is_same_v<T, C>) {
          T* y = out[0].as<T>();
          conv_core<C>(d_, in[0].as<T>(), in[1].as<T>(), y);
          epilogue(y);
        } else {
          const std::vector<C> x = widen<C, T>(in[0]);
          const std::vector<C> w = widen<C, T>(in[1]);
          std::vector<C> y(static_cast<size_t>(total));
          conv_core<C>(d_, x.data(), w.data(), y.data());
          epilogue(y.data());
          for (int64_t i = 0; i < total; ++i) store(out[0].as<T>(), i, y[i]);
        }
        return ok_status();
      } else {
        return internal_error("Conv has no {} instance", dtype_name(in[0].dtype));
      }
    });
  }

 private:
  ConvDims d_;
  FusedActivation activation_;
};

StatusOr<std::unique_ptr<Kernel>> make_conv(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(ConvDims dims, make_conv_dims(args));
  const FusedActivation activation = dims.activation;
  return std::unique_ptr<Kernel>(std::make_unique<ConvKernel>(std::move(dims), activation));
}

// The exact integer accumulators of ConvInteger and QLinearConv: sum of (x - x_zero_point) *
// (w - w_zero_point) (padding contributes 0, as if padded with the zero point).
std::vector<int64_t> conv_integer_sums(const ConvDims& d, const ConstBuffer& x,
                                       const ConstBuffer* x_zero, const ConstBuffer& w,
                                       const ConstBuffer* w_zero, int64_t total) {
  const std::vector<int64_t> xc = centered(x, x_zero, 1);
  const std::vector<int64_t> wc = centered(w, w_zero, d.c_per_group * d.grid.kernel_volume());
  std::vector<int64_t> y(static_cast<size_t>(total));
  conv_core<int64_t>(d, xc.data(), wc.data(), y.data());
  return y;
}

class ConvIntegerKernel : public Kernel {
 public:
  explicit ConvIntegerKernel(ConvDims dims) : d_(std::move(dims)) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const ConstBuffer* xz = in.size() > 2 ? &in[2] : nullptr;
    const ConstBuffer* wz = in.size() > 3 ? &in[3] : nullptr;
    const int64_t total = out[0].element_count();
    const std::vector<int64_t> y = conv_integer_sums(d_, in[0], xz, in[1], wz, total);
    int32_t* dst = out[0].as<int32_t>();
    for (int64_t i = 0; i < total; ++i) dst[i] = static_cast<int32_t>(y[i]);
    return ok_status();
  }

 private:
  ConvDims d_;
};

StatusOr<std::unique_ptr<Kernel>> make_conv_integer(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(ConvDims dims, make_conv_dims(args));
  return std::unique_ptr<Kernel>(std::make_unique<ConvIntegerKernel>(std::move(dims)));
}

// QLinearConv: x (0), x_scale (1), x_zero_point (2), w (3), w_scale (4), w_zero_point (5),
// y_scale (6), y_zero_point (7), B (8, optional i32 [M]). ConvInteger's sums, plus the bias,
// requantized (quantize.h) to y_zero_point's dtype. w_scale and w_zero_point are per tensor or
// per output channel; the others per tensor.
Status infer_qlinear_conv(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(
      args.attributes, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 8, 9));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "x"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "x", {DType::kU8, DType::kI8}));
  KILN_RETURN_IF_ERROR(check_spatial_input(x, "x"));
  KILN_ASSIGN_OR_RETURN(ValueType w, required_input(args, 3, "w"));
  KILN_RETURN_IF_ERROR(check_dtype(w, 3, "w", {DType::kU8, DType::kI8}));
  KILN_ASSIGN_OR_RETURN(ConvShape s, infer_conv_shape(args.attributes, x, w, {"x", 3, "w"}));
  const DimExpr& m = w.shape[0];
  KILN_ASSIGN_OR_RETURN(ValueType x_scale, required_input(args, 1, "x_scale"));
  KILN_RETURN_IF_ERROR(check_quant_scale(x_scale, 1, "x_scale", nullptr, ""));
  KILN_ASSIGN_OR_RETURN(ValueType x_zero, required_input(args, 2, "x_zero_point"));
  KILN_RETURN_IF_ERROR(
      check_quant_zero_point(x_zero, 2, "x_zero_point", x.dtype, "input 0 'x'", nullptr, ""));
  KILN_ASSIGN_OR_RETURN(ValueType w_scale, required_input(args, 4, "w_scale"));
  KILN_RETURN_IF_ERROR(check_quant_scale(w_scale, 4, "w_scale", &m, "output channel"));
  KILN_ASSIGN_OR_RETURN(ValueType w_zero, required_input(args, 5, "w_zero_point"));
  KILN_RETURN_IF_ERROR(check_quant_zero_point(w_zero, 5, "w_zero_point", w.dtype, "input 3 'w'", &m,
                                              "output channel"));
  KILN_ASSIGN_OR_RETURN(ValueType y_scale, required_input(args, 6, "y_scale"));
  KILN_RETURN_IF_ERROR(check_quant_scale(y_scale, 6, "y_scale", nullptr, ""));
  KILN_ASSIGN_OR_RETURN(ValueType y_zero, required_input(args, 7, "y_zero_point"));
  KILN_RETURN_IF_ERROR(check_dtype(y_zero, 7, "y_zero_point", {DType::kU8, DType::kI8}));
  KILN_RETURN_IF_ERROR(
      check_quant_zero_point(y_zero, 7, "y_zero_point", y_zero.dtype, "", nullptr, ""));
  if (const ValueType* b = optional_input(args, 8)) {
    KILN_RETURN_IF_ERROR(check_dtype(*b, 8, "B", {DType::kI32}));
    KILN_RETURN_IF_ERROR(check_rank(*b, 8, "B", 1));
    KILN_RETURN_IF_ERROR(check_dims_equal(b->shape[0], m, "input 8 'B' dim 0 (input 3 'w' dim 0)"));
  }
  args.outputs = {ValueType{y_zero.dtype, std::move(s.out)}};
  return ok_status();
}

class QLinearConvKernel : public Kernel {
 public:
  explicit QLinearConvKernel(ConvDims dims) : d_(std::move(dims)) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t total = out[0].element_count();
    const std::vector<int64_t> acc = conv_integer_sums(d_, in[0], &in[2], in[3], &in[5], total);
    const ConstBuffer* bias = in.size() > 8 ? &in[8] : nullptr;
    const Requantization r =
        make_requantization(in[1], in[4], in[6], in[7], bias, d_.out_channels, d_.grid.out_plane());
    requantize(r, acc.data(), out[0]);
    return ok_status();
  }

 private:
  ConvDims d_;
};

StatusOr<std::unique_ptr<Kernel>> make_qlinear_conv(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(ConvDims dims, make_conv_dims(args, 3));
  return std::unique_ptr<Kernel>(std::make_unique<QLinearConvKernel>(std::move(dims)));
}

// ---------------------------------------------------------------------------------------------
// ConvTranspose: X [N, C, in...], W [C, M/group, k...], Y [N, M, out...]. Per spatial dim the
// full (unpadded) output has F = stride * (in - 1) + output_padding + k_eff positions, and
// y[o] = full[o + pad_begin] (zero outside the full output). Pads come from `pads`, auto_pad
// (total max(0, k_eff - stride) as in ONNX shape inference; SAME_UPPER puts the odd pad at the
// end) or `output_shape` (total F - out, SAME_UPPER: begin = total / 2, else
// begin = total - total / 2; a negative total pads zeros at the end).

struct TransposeGeometry {
  std::vector<int64_t> kernel, strides, dilations, output_padding, pads;  // pads: begins, ends
  std::optional<std::vector<int64_t>> output_shape;
  AutoPad auto_pad = AutoPad::kNotSet;
};

StatusOr<TransposeGeometry> parse_transpose_geometry(const Attributes& a, size_t r,
                                                     const std::vector<int64_t>& w_kernel) {
  TransposeGeometry g;
  g.kernel = w_kernel;
  if (a.has("kernel_shape")) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> k, ints_of_size(a, "kernel_shape", r, 1, 1));
    if (k != w_kernel) {
      return invalid_argument(
          "attribute 'kernel_shape' [{}] does not match the spatial dims [{}] of input 1 'W'",
          fmt::join(k, ","), fmt::join(w_kernel, ","));
    }
  }
  for (int64_t k : g.kernel) {
    if (k < 1) {
      return invalid_argument("input 1 'W' spatial dims must be >= 1, got [{}]",
                              fmt::join(g.kernel, ","));
    }
  }
  KILN_ASSIGN_OR_RETURN(g.strides, ints_of_size(a, "strides", r, 1, 1));
  KILN_ASSIGN_OR_RETURN(g.dilations, ints_of_size(a, "dilations", r, 1, 1));
  KILN_ASSIGN_OR_RETURN(g.output_padding, ints_of_size(a, "output_padding", r, 0, 0));
  for (size_t i = 0; i < r; ++i) {
    if (g.output_padding[i] >= std::max(g.strides[i], g.dilations[i])) {
      return invalid_argument(
          "attribute 'output_padding' [{}] must be less than the stride or the dilation of each "
          "dim",
          fmt::join(g.output_padding, ","));
    }
  }
  KILN_ASSIGN_OR_RETURN(g.pads, ints_of_size(a, "pads", 2 * r, 0, 0));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, a.get_string("auto_pad", "NOTSET"));
  if (auto_pad == "SAME_UPPER") {
    g.auto_pad = AutoPad::kSameUpper;
  } else if (auto_pad == "SAME_LOWER") {
    g.auto_pad = AutoPad::kSameLower;
  } else if (auto_pad == "VALID") {
    g.auto_pad = AutoPad::kValid;
  } else if (auto_pad != "NOTSET" && !auto_pad.empty()) {
    return invalid_argument(
        "attribute 'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got \"{}\"",
        auto_pad);
  }
  if (g.auto_pad != AutoPad::kNotSet &&
      std::any_of(g.pads.begin(), g.pads.end(), [](int64_t p) { return p != 0; })) {
    return invalid_argument("attribute 'pads' [{}] cannot be combined with auto_pad = {}",
                            fmt::join(g.pads, ","), auto_pad);
  }
  if (a.has("output_shape")) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, a.get_ints("output_shape", {}));
    // Some exporters give [N, C, spatial...]; only the spatial dims matter.
    if (shape.size() == r + 2) shape.erase(shape.begin(), shape.begin() + 2);
    if (shape.size() != r) {
      return invalid_argument("attribute 'output_shape' must have {} values, got {}", r,
                              shape.size());
    }
    for (int64_t v : shape) {
      if (v < 1) {
        return invalid_argument("attribute 'output_shape' values must be >= 1, got [{}]",
                                fmt::join(shape, ","));
      }
    }
    g.output_shape = std::move(shape);
  }
  return g;
}

// Output spatial dims and the pads [begins..., ends...] for these input spatial dims (the pads
// are needed only when `pads_out` is non-null).
StatusOr<Shape> transpose_output(const TransposeGeometry& g, std::span<const DimExpr> in,
                                 std::vector<int64_t>* pads_out) {
  const size_t r = g.kernel.size();
  Shape out;
  std::vector<int64_t> pads(2 * r, 0);
  for (size_t i = 0; i < r; ++i) {
    const int64_t k_eff = g.dilations[i] * (g.kernel[i] - 1) + 1;
    const int64_t s = g.strides[i];
    const DimExpr full = (in[i] - DimExpr(1)) * DimExpr(s) + DimExpr(g.output_padding[i] + k_eff);
    DimExpr dim;
    if (g.output_shape) {
      dim = DimExpr((*g.output_shape)[i]);
      if (pads_out != nullptr) {
        KILN_ASSIGN_OR_RETURN(int64_t f, require_constant_dim(full, "the full output size"));
        const int64_t total = std::max<int64_t>(0, f - (*g.output_shape)[i]);
        pads[i] = g.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
        pads[r + i] = total - pads[i];
      }
    } else {
      int64_t begin = g.pads[i], end = g.pads[r + i];
      if (g.auto_pad == AutoPad::kSameUpper || g.auto_pad == AutoPad::kSameLower) {
        const int64_t total = std::max<int64_t>(0, k_eff - s);
        const int64_t small = total / 2;
        begin = g.auto_pad == AutoPad::kSameUpper ? small : total - small;
        end = total - begin;
      } else if (g.auto_pad == AutoPad::kValid) {
        begin = end = 0;
      }
      pads[i] = begin;
      pads[r + i] = end;
      dim = full - DimExpr(begin + end);
    }
    if (auto v = dim.constant_value(); v && *v < 1) {
      return invalid_argument(
          "spatial dim {}: input size {} with kernel {} (dilation {}), stride {}, output padding "
          "{} and pads {},{} gives output size {}; must be >= 1",
          i, in[i].to_string(), g.kernel[i], g.dilations[i], s, g.output_padding[i], pads[i],
          pads[r + i], *v);
    }
    out.push_back(dim);
  }
  if (pads_out != nullptr) *pads_out = std::move(pads);
  return out;
}

Status infer_conv_transpose(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(
      args.attributes, {"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                        "output_shape", "pads", "strides"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", float_dtypes()));
  KILN_RETURN_IF_ERROR(check_spatial_input(x, "X"));
  KILN_ASSIGN_OR_RETURN(ValueType w, required_input(args, 1, "W"));
  KILN_RETURN_IF_ERROR(check_same_dtype(w, 1, "W", x.dtype, "input 0 'X'"));
  KILN_RETURN_IF_ERROR(check_rank(w, 1, "W", static_cast<int64_t>(x.shape.size())));
  KILN_ASSIGN_OR_RETURN(int64_t group, read_group(args.attributes));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, weight_kernel(w));
  KILN_ASSIGN_OR_RETURN(TransposeGeometry g,
                        parse_transpose_geometry(args.attributes, x.shape.size() - 2, kernel));
  KILN_RETURN_IF_ERROR(
      check_dims_equal(w.shape[0], x.shape[1], "input 1 'W' dim 0 (input 0 'X' dim 1, channels)"));
  if (group > 1) {
    KILN_ASSIGN_OR_RETURN(int64_t c,
                          require_constant_dim(x.shape[1], "input 0 'X' dim 1 (channels)"));
    if (c % group != 0) {
      return invalid_argument(
          "input 0 'X' dim 1 (channels) = {} must be divisible by attribute 'group' = {}", c,
          group);
    }
  }
  const DimExpr out_channels = w.shape[1] * DimExpr(group);
  if (const ValueType* b = optional_input(args, 2)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*b, 2, "B", x.dtype, "input 0 'X'"));
    KILN_RETURN_IF_ERROR(check_rank(*b, 2, "B", 1));
    KILN_RETURN_IF_ERROR(check_dims_equal(
        b->shape[0], out_channels, "input 2 'B' dim 0 (input 1 'W' dim 1 * attribute 'group')"));
  }
  KILN_ASSIGN_OR_RETURN(Shape spatial, transpose_output(g, std::span(x.shape).subspan(2), nullptr));
  Shape out{x.shape[0], out_channels};
  out.insert(out.end(), spatial.begin(), spatial.end());
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

class ConvTransposeKernel : public Kernel {
  // Member templates first: clang 14 leaves those defined after a generic lambda that
  // calls them uninstantiated (undefined references at link time).
 private:
  // Scatter form, one output plane per job: input channel, then input position, then kernel tap.
  template <typename C>
  void core(const C* x, const C* w, const C* bias, C* y) const {
    const Grid& g = g_;
    const int64_t in_plane = g.in_plane(), out_plane = g.out_plane(), k_volume = g.kernel_volume();
    const int64_t c_per_group = channels_ / group_;
    const int64_t m_per_group = out_channels_ / group_;
    parallel_jobs(batch_ * out_channels_, c_per_group * in_plane * k_volume, [&](int64_t job) {
      const int64_t n = job / out_channels_;
      const int64_t m = job % out_channels_;
      const int64_t grp = m / m_per_group;
      const int64_t mm = m % m_per_group;
      C* acc = y + job * out_plane;
      std::fill(acc, acc + out_plane, C(0));
      for (int64_t cc = 0; cc < c_per_group; ++cc) {
        const int64_t c = grp * c_per_group + cc;
        const C* xc = x + (n * channels_ + c) * in_plane;
        const C* wc = w + (c * m_per_group + mm) * k_volume;
        for (int64_t id = 0; id < g.in[0]; ++id) {
          for (int64_t ih = 0; ih < g.in[1]; ++ih) {
            for (int64_t iw = 0; iw < g.in[2]; ++iw) {
              const C xv = xc[(id * g.in[1] + ih) * g.in[2] + iw];
              for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
                const int64_t od = id * g.stride[0] + kd * g.dilation[0] - g.pad_begin[0];
                if (od < 0 || od >= g.out[0]) continue;
                for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
                  const int64_t oh = ih * g.stride[1] + kh * g.dilation[1] - g.pad_begin[1];
                  if (oh < 0 || oh >= g.out[1]) continue;
                  const C* wk = wc + (kd * g.kernel[1] + kh) * g.kernel[2];
                  C* row = acc + (od * g.out[1] + oh) * g.out[2];
                  for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                    const int64_t ow = iw * g.stride[2] + kw * g.dilation[2] - g.pad_begin[2];
                    if (ow < 0 || ow >= g.out[2]) continue;
                    row[ow] += xv * wk[kw];
                  }
                }
              }
            }
          }
        }
      }
      if (bias != nullptr) {
        for (int64_t i = 0; i < out_plane; ++i) acc[i] += bias[m];
      }
    });
  }

  Grid g_;
  int64_t batch_, channels_, out_channels_, group_;

 public:
  ConvTransposeKernel(Grid grid, int64_t batch, int64_t channels, int64_t out_channels,
                      int64_t group)
      : g_(grid), batch_(batch), channels_(channels), out_channels_(out_channels), group_(group) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (is_float_storage_v<T>) {
        using C = compute_t<T>;
        const bool has_bias = in.size() > 2 && in[2].data != nullptr;
        const int64_t total = out[0].element_count();
        if constexpr (std::is_same_v<T, C>) {
          core<C>(in[0].as<T>(), in[1].as<T>(), has_bias ? in[2].as<T>() : nullptr, out[0].as<T>());
        } else {
          const std::vector<C> x = widen<C, T>(in[0]);
          const std::vector<C> w = widen<C, T>(in[1]);
          const std::vector<C> b = has_bias ? widen<C, T>(in[2]) : std::vector<C>();
          std::vector<C> y(static_cast<size_t>(total));
          core<C>(x.data(), w.data(), has_bias ? b.data() : nullptr, y.data());
          for (int64_t i = 0; i < total; ++i) store(out[0].as<T>(), i, y[i]);
        }
        return ok_status();
      } else {
        return internal_error("ConvTranspose has no {} instance", dtype_name(in[0].dtype));
      }
    });
  }
};

StatusOr<std::unique_ptr<Kernel>> make_conv_transpose(const MakeArgs& args) {
  const ConcreteShape x = args.input_dims(0);
  const ConcreteShape w = args.input_dims(1);
  const ConcreteShape y = args.output_dims(0);
  const size_t r = x.size() - 2;
  KILN_ASSIGN_OR_RETURN(int64_t group, read_group(args.attributes));
  KILN_ASSIGN_OR_RETURN(
      TransposeGeometry tg,
      parse_transpose_geometry(args.attributes, r, std::vector<int64_t>(w.begin() + 2, w.end())));
  std::vector<int64_t> pads;
  const Shape x_spatial = shape_from_concrete(ConcreteShape(x.begin() + 2, x.end()));
  KILN_RETURN_IF_ERROR(transpose_output(tg, x_spatial, &pads).status());
  const auto half = static_cast<ptrdiff_t>(r);
  const ConcreteWindow window{tg.kernel,
                              tg.strides,
                              tg.dilations,
                              std::vector<int64_t>(pads.begin(), pads.begin() + half),
                              std::vector<int64_t>(pads.begin() + half, pads.end()),
                              false};
  Grid grid = make_grid(window, std::span(x).subspan(2), std::span(y).subspan(2));
  return std::unique_ptr<Kernel>(
      std::make_unique<ConvTransposeKernel>(grid, x[0], x[1], y[1], group));
}

// ---------------------------------------------------------------------------------------------
// MaxPool, AveragePool, LpPool

enum class Pool { kMax, kAverage, kLp };

Status infer_pool(InferArgs& args, Pool kind) {
  switch (kind) {
    case Pool::kMax:
      KILN_RETURN_IF_ERROR(check_known_attributes(
          args.attributes, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                            "storage_order", "strides"}));
      break;
    case Pool::kAverage:
      KILN_RETURN_IF_ERROR(check_known_attributes(
          args.attributes, {"auto_pad", "ceil_mode", "count_include_pad", "dilations",
                            "kernel_shape", "pads", "strides"}));
      break;
    case Pool::kLp:
      KILN_RETURN_IF_ERROR(check_known_attributes(
          args.attributes, {"auto_pad", "kernel_shape", "p", "pads", "strides"}));
      break;
  }
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1, kind == Pool::kMax ? 2 : 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  if (kind == Pool::kMax) {
    KILN_RETURN_IF_ERROR(check_dtype(
        x, 0, "X", {DType::kF16, DType::kBF16, DType::kF32, DType::kF64, DType::kI8, DType::kU8}));
  } else {
    KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", float_dtypes()));
  }
  KILN_RETURN_IF_ERROR(check_spatial_input(x, "X"));
  if (kind == Pool::kAverage) {
    KILN_ASSIGN_OR_RETURN(int64_t include, args.attributes.get_int("count_include_pad", 0));
    if (include != 0 && include != 1) {
      return invalid_argument("attribute 'count_include_pad' must be 0 or 1, got {}", include);
    }
  } else if (kind == Pool::kMax) {
    KILN_ASSIGN_OR_RETURN(int64_t order, args.attributes.get_int("storage_order", 0));
    if (order != 0 && order != 1) {
      return invalid_argument("attribute 'storage_order' must be 0 or 1, got {}", order);
    }
  } else {
    KILN_ASSIGN_OR_RETURN(int64_t p, args.attributes.get_int("p", 2));
    if (p < 1) return invalid_argument("attribute 'p' must be >= 1, got {}", p);
  }
  WindowOptions options;
  options.allow_ceil_mode = kind != Pool::kLp;
  options.allow_dilations = kind != Pool::kLp;
  KILN_ASSIGN_OR_RETURN(WindowGeometry g,
                        parse_window_geometry(args.attributes, x.shape.size() - 2, options));
  KILN_ASSIGN_OR_RETURN(Shape spatial, window_output_dims(g, std::span(x.shape).subspan(2)));
  Shape out{x.shape[0], x.shape[1]};
  out.insert(out.end(), spatial.begin(), spatial.end());
  args.outputs = {ValueType{x.dtype, out}};
  if (args.output_count > 1) args.outputs.push_back(ValueType{DType::kI64, out});
  return ok_status();
}

// The most negative finite value of storage type T (f16: -65504, bf16: -0x1.fep127).
template <typename T>
double lowest_finite() {
  if constexpr (std::is_same_v<T, Half>) {
    return -65504.0;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return -0x1.fep127;
  } else {
    return static_cast<double>(std::numeric_limits<T>::lowest());
  }
}

class PoolKernel : public Kernel {
  // Member templates first: clang 14 leaves those defined after a generic lambda that
  // calls them uninstantiated (undefined references at link time).
 private:
  // Flat index of input position (d, h, w) in plane p, as MaxPool's Indices give it.
  int64_t flat_index(int64_t p, int64_t d, int64_t h, int64_t w) const {
    const Grid& g = g_;
    if (!column_major_) return p * g.in_plane() + (d * g.in[1] + h) * g.in[2] + w;
    return p * g.in_plane() + (w * g.in[1] + h) * g.in[0] + d;
  }

  template <typename T>
  void run_max(const T* x, T* y, int64_t* indices) const {
    using C = compute_t<T>;
    const Grid& g = g_;
    const int64_t in_plane = g.in_plane(), out_plane = g.out_plane();
    parallel_jobs(planes_, out_plane * g.kernel_volume(), [&](int64_t p) {
      const T* xp = x + p * in_plane;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            C best = std::numeric_limits<C>::lowest();
            if constexpr (std::is_floating_point_v<C>) best = -std::numeric_limits<C>::infinity();
            int64_t best_at = -1;
            bool nan = false;
            for (int64_t kd = 0; kd < g.kernel[0] && !nan; ++kd) {
              const int64_t id = od * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
              if (id < 0 || id >= g.in[0]) continue;
              for (int64_t kh = 0; kh < g.kernel[1] && !nan; ++kh) {
                const int64_t ih = oh * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
                if (ih < 0 || ih >= g.in[1]) continue;
                for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                  const int64_t iw = ow * g.stride[2] - g.pad_begin[2] + kw * g.dilation[2];
                  if (iw < 0 || iw >= g.in[2]) continue;
                  const C v = load(xp, (id * g.in[1] + ih) * g.in[2] + iw);
                  bool take = v > best || best_at < 0;
                  if constexpr (std::is_floating_point_v<C>) {
                    // NaN propagates, as in numpy's max.
                    if (std::isnan(v)) {
                      take = nan = true;
                    }
                  }
                  if (take) {
                    best = v;
                    best_at = flat_index(p, id, ih, iw);
                  }
                  if (nan) break;
                }
              }
            }
            // A window with no tap inside the input (dilated taps straddling it, all in the
            // padding) gives the lowest finite value of the storage type, as ONNX Runtime and
            // oneDNN do (not -inf); its index stays -1.
            if (best_at < 0) best = static_cast<C>(lowest_finite<T>());
            const int64_t o = p * out_plane + (od * g.out[1] + oh) * g.out[2] + ow;
            store(y, o, best);
            if (indices != nullptr) indices[o] = best_at;
          }
        }
      }
    });
  }

  template <typename T>
  void run_sum(const T* x, T* y) const {
    using C = compute_t<T>;
    const Grid& g = g_;
    const int64_t in_plane = g.in_plane(), out_plane = g.out_plane();
    parallel_jobs(planes_, out_plane * g.kernel_volume(), [&](int64_t p) {
      const T* xp = x + p * in_plane;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const Dims3 o{od, oh, ow};
            // Taps inside the padded extent [-pad_begin, in + pad_end): count_include_pad
            // divides by their number (ceil_mode windows can overhang it).
            int64_t in_padded = 1;
            for (size_t a = 0; a < 3; ++a) {
              int64_t count = 0;
              for (int64_t k = 0; k < g.kernel[a]; ++k) {
                const int64_t i = o[a] * g.stride[a] - g.pad_begin[a] + k * g.dilation[a];
                if (i >= -g.pad_begin[a] && i < g.in[a] + g.pad_end[a]) ++count;
              }
              in_padded *= count;
            }
            C sum = 0;
            int64_t valid = 0;
            for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
              const int64_t id = od * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
              if (id < 0 || id >= g.in[0]) continue;
              for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
                const int64_t ih = oh * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
                if (ih < 0 || ih >= g.in[1]) continue;
                for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                  const int64_t iw = ow * g.stride[2] - g.pad_begin[2] + kw * g.dilation[2];
                  if (iw < 0 || iw >= g.in[2]) continue;
                  const C v = load(xp, (id * g.in[1] + ih) * g.in[2] + iw);
                  if (kind_ == Pool::kLp) {
                    sum += p_ == 1 ? std::fabs(v) : p_ == 2 ? v * v : std::pow(std::fabs(v), C(p_));
                  } else {
                    sum += v;
                  }
                  ++valid;
                }
              }
            }
            C result;
            if (kind_ == Pool::kLp) {
              result = p_ == 1 ? sum : p_ == 2 ? std::sqrt(sum) : std::pow(sum, C(1) / C(p_));
            } else {
              result = sum / static_cast<C>(include_pad_ ? in_padded : valid);
            }
            store(y, p * out_plane + (od * g.out[1] + oh) * g.out[2] + ow, result);
          }
        }
      }
    });
  }

  Pool kind_;
  Grid g_;
  int64_t planes_;
  bool include_pad_, column_major_;
  int64_t p_;

 public:
  PoolKernel(Pool kind, Grid grid, int64_t planes, bool include_pad, bool column_major, int64_t p)
      : kind_(kind),
        g_(grid),
        planes_(planes),
        include_pad_(include_pad),
        column_major_(column_major),
        p_(p) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (!std::is_same_v<T, Bool>) {
        int64_t* indices =
            out.size() > 1 && out[1].data != nullptr ? out[1].as<int64_t>() : nullptr;
        if (kind_ == Pool::kMax) {
          run_max<T>(in[0].as<T>(), out[0].as<T>(), indices);
          return ok_status();
        }
        if constexpr (is_float_storage_v<T>) {
          run_sum<T>(in[0].as<T>(), out[0].as<T>());
          return ok_status();
        }
      }
      return internal_error("pool has no {} instance", dtype_name(in[0].dtype));
    });
  }
};

StatusOr<std::unique_ptr<Kernel>> make_pool(const MakeArgs& args, Pool kind) {
  const ConcreteShape x = args.input_dims(0);
  const ConcreteShape y = args.output_dims(0);
  PoolAttributes a;
  int64_t p = 2;
  if (kind == Pool::kLp) {
    WindowOptions options;
    options.allow_ceil_mode = false;
    options.allow_dilations = false;
    KILN_ASSIGN_OR_RETURN(WindowGeometry g,
                          parse_window_geometry(args.attributes, x.size() - 2, options));
    KILN_ASSIGN_OR_RETURN(a.window, resolve_window(g, std::span(x).subspan(2)));
    KILN_ASSIGN_OR_RETURN(p, args.attributes.get_int("p", 2));
  } else {
    KILN_ASSIGN_OR_RETURN(a, read_pool_attributes(kind == Pool::kMax ? "MaxPool" : "AveragePool",
                                                  args.attributes, x));
  }
  Grid grid = make_grid(a.window, std::span(x).subspan(2), std::span(y).subspan(2));
  return std::unique_ptr<Kernel>(std::make_unique<PoolKernel>(
      kind, grid, x[0] * x[1], a.count_include_pad, a.column_major_indices, p));
}

template <Pool kKind>
Status infer_pool_of(InferArgs& args) {
  return infer_pool(args, kKind);
}
template <Pool kKind>
StatusOr<std::unique_ptr<Kernel>> make_pool_of(const MakeArgs& args) {
  return make_pool(args, kKind);
}

// ---------------------------------------------------------------------------------------------
// GlobalAveragePool, GlobalMaxPool, GlobalLpPool: any rank >= 3, one value per (n, c) plane.

template <Pool kKind>
Status infer_global_pool(InferArgs& args) {
  if (kKind == Pool::kLp) {
    KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"p"}));
    KILN_ASSIGN_OR_RETURN(int64_t p, args.attributes.get_int("p", 2));
    if (p < 1) return invalid_argument("attribute 'p' must be >= 1, got {}", p);
  } else {
    KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  }
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", float_dtypes()));
  if (x.shape.size() < 3) {
    return invalid_argument("input 0 'X' must have rank >= 3 ([N, C, spatial...]), got {}",
                            shape_to_string(x.shape));
  }
  Shape out = x.shape;
  for (size_t i = 2; i < out.size(); ++i) out[i] = DimExpr(1);
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

template <Pool kKind>
class GlobalPoolKernel : public Kernel {
 public:
  explicit GlobalPoolKernel(int64_t p) : p_(p) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (is_float_storage_v<T>) {
        using C = compute_t<T>;
        const int64_t planes = in[0].dims[0] * in[0].dims[1];
        const int64_t plane = planes == 0 ? 0 : in[0].element_count() / planes;
        const T* x = in[0].as<T>();
        T* y = out[0].as<T>();
        parallel_jobs(planes, plane, [&](int64_t p) {
          const T* xp = x + p * plane;
          C acc = kKind == Pool::kMax ? -std::numeric_limits<C>::infinity() : C(0);
          for (int64_t i = 0; i < plane; ++i) {
            const C v = load(xp, i);
            if constexpr (kKind == Pool::kMax) {
              if (v > acc || std::isnan(v)) acc = std::isnan(acc) ? acc : v;
            } else if constexpr (kKind == Pool::kLp) {
              acc += p_ == 2 ? v * v : std::pow(std::fabs(v), C(p_));
            } else {
              acc += v;
            }
          }
          if constexpr (kKind == Pool::kAverage) acc /= static_cast<C>(plane);
          if constexpr (kKind == Pool::kLp) {
            acc = p_ == 2 ? std::sqrt(acc) : std::pow(acc, C(1) / C(p_));
          }
          store(y, p, acc);
        });
        return ok_status();
      } else {
        return internal_error("global pool has no {} instance", dtype_name(in[0].dtype));
      }
    });
  }

 private:
  int64_t p_;
};

template <Pool kKind>
StatusOr<std::unique_ptr<Kernel>> make_global_pool(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(int64_t p, args.attributes.get_int("p", 2));
  return std::unique_ptr<Kernel>(std::make_unique<GlobalPoolKernel<kKind>>(p));
}

// Multiply-adds: Conv, every output element over W's [C/group, k...]; ConvTranspose, every
// input element into W's [M/group, k...].
// Conv and ConvInteger have W at input 1, QLinearConv at input 3.
template <size_t WIndex>
double conv_multiply_adds(const Attributes&, std::span<const ConcreteShape* const> in,
                          std::span<const ConcreteShape* const> out) {
  const ConcreteShape* w = dims_at(in, WIndex);
  const ConcreteShape* y = dims_at(out, 0);
  if (w == nullptr || y == nullptr || w->size() < 2) return 0;
  return product_as_double(*y) * product_as_double(std::span(*w).subspan(1));
}
double conv_transpose_multiply_adds(const Attributes&, std::span<const ConcreteShape* const> in,
                                    std::span<const ConcreteShape* const>) {
  const ConcreteShape* x = dims_at(in, 0);
  const ConcreteShape* w = dims_at(in, 1);
  if (x == nullptr || w == nullptr || w->size() < 2) return 0;
  return product_as_double(*x) * product_as_double(std::span(*w).subspan(1));
}

}  // namespace

void register_spatial_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{.op_type = "Conv",
                        .infer = infer_conv,
                        .make = make_conv,
                        .multiply_adds = conv_multiply_adds<1>});
  table.push_back(OpDef{.op_type = "ConvInteger",
                        .infer = infer_conv_integer,
                        .make = make_conv_integer,
                        .multiply_adds = conv_multiply_adds<1>});
  table.push_back(OpDef{.op_type = "QLinearConv",
                        .infer = infer_qlinear_conv,
                        .make = make_qlinear_conv,
                        .multiply_adds = conv_multiply_adds<3>});
  table.push_back(OpDef{.op_type = "ConvTranspose",
                        .infer = infer_conv_transpose,
                        .make = make_conv_transpose,
                        .multiply_adds = conv_transpose_multiply_adds});
  table.push_back(OpDef{"MaxPool", infer_pool_of<Pool::kMax>, make_pool_of<Pool::kMax>});
  table.push_back(
      OpDef{"AveragePool", infer_pool_of<Pool::kAverage>, make_pool_of<Pool::kAverage>});
  table.push_back(OpDef{"LpPool", infer_pool_of<Pool::kLp>, make_pool_of<Pool::kLp>});
  table.push_back(OpDef{"GlobalAveragePool", infer_global_pool<Pool::kAverage>,
                        make_global_pool<Pool::kAverage>});
  table.push_back(
      OpDef{"GlobalMaxPool", infer_global_pool<Pool::kMax>, make_global_pool<Pool::kMax>});
  table.push_back(OpDef{"GlobalLpPool", infer_global_pool<Pool::kLp>, make_global_pool<Pool::kLp>});
}

}  // namespace kiln::kernels
