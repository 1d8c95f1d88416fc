// Resize (opset 13): separable N-D interpolation. Each output coordinate maps to a source
// coordinate per axis (coordinate_transformation_mode); the output element is the weighted sum
// over the per-axis taps (nearest 1, linear 2, cubic 4) of the input, neighbours beyond the edges
// clamped to it. Taps and weights depend only on dims and attributes, so make()
// computes them once. The arithmetic follows the ONNX reference
// (onnx/backend/test/case/node/resize.py) in float64 coordinates, except for the "resized length"
// of align_corners, pytorch_half_pixel and tf_crop_and_resize, where kiln matches ONNX Runtime and
// PyTorch rather than the reference: it is the output dim (the reference takes scale * input
// length, a fraction when the scale does not divide evenly, e.g. 0.5 at odd sizes), and
// pytorch_half_pixel maps an output of length 1 to coordinate 0 (the reference: -0.5). Two ONNX
// backend cases built from the reference differ for this (docs/conformance.md).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/resize_plan.h"

namespace kiln::kernels {
namespace {

using Mode = ResizeMode;
enum class Coord {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
  kTfHalfPixelForNN,
};
enum class Rounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct Params {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  Rounding rounding = Rounding::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

template <typename E>
struct Named {
  std::string_view name;
  E value;
};

template <typename E, size_t N>
StatusOr<E> read_choice(const Attributes& a, const std::string& attribute, const char* fallback,
                        const Named<E> (&choices)[N]) {
  KILN_ASSIGN_OR_RETURN(std::string value, a.get_string(attribute, fallback));
  for (const Named<E>& c : choices) {
    if (c.name == value) return c.value;
  }
  return unimplemented("attribute '{}' value '{}' is not supported", attribute, value);
}

constexpr Named<Mode> kModes[] = {
    {"nearest", Mode::kNearest}, {"linear", Mode::kLinear}, {"cubic", Mode::kCubic}};
// tf_half_pixel_for_nn is Resize-11's; the version converter keeps it on older models.
constexpr Named<Coord> kCoords[] = {
    {"half_pixel", Coord::kHalfPixel},
    {"pytorch_half_pixel", Coord::kPytorchHalfPixel},
    {"align_corners", Coord::kAlignCorners},
    {"asymmetric", Coord::kAsymmetric},
    {"tf_crop_and_resize", Coord::kTfCropAndResize},
    {"tf_half_pixel_for_nn", Coord::kTfHalfPixelForNN},
};
constexpr Named<Rounding> kRoundings[] = {
    {"round_prefer_floor", Rounding::kRoundPreferFloor},
    {"round_prefer_ceil", Rounding::kRoundPreferCeil},
    {"floor", Rounding::kFloor},
    {"ceil", Rounding::kCeil},
};

StatusOr<Params> read_resize_params(const Attributes& a) {
  KILN_RETURN_IF_ERROR(check_known_attributes(
      a, {"coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
          "extrapolation_value", "mode", "nearest_mode"}));
  Params p;
  KILN_ASSIGN_OR_RETURN(p.mode, read_choice(a, "mode", "nearest", kModes));
  KILN_ASSIGN_OR_RETURN(p.coord,
                        read_choice(a, "coordinate_transformation_mode", "half_pixel", kCoords));
  KILN_ASSIGN_OR_RETURN(p.rounding,
                        read_choice(a, "nearest_mode", "round_prefer_floor", kRoundings));
  KILN_ASSIGN_OR_RETURN(p.cubic_a, a.get_float("cubic_coeff_a", -0.75));
  if (!std::isfinite(p.cubic_a)) {
    return invalid_argument("attribute 'cubic_coeff_a' must be finite, got {}", p.cubic_a);
  }
  KILN_ASSIGN_OR_RETURN(int64_t exclude, a.get_int("exclude_outside", 0));
  if (exclude != 0 && exclude != 1) {
    return invalid_argument("attribute 'exclude_outside' must be 0 or 1, got {}", exclude);
  }
  p.exclude_outside = exclude == 1;
  KILN_ASSIGN_OR_RETURN(p.extrapolation, a.get_float("extrapolation_value", 0.0));
  return p;
}

// Output dims far beyond any real tensor are refused before anyone allocates them.
constexpr double kMaxDim = 1ull << 40;
constexpr int64_t kMaxElements = int64_t{1} << 40;

bool is_empty_vector(const ValueType* t) {
  return t != nullptr && t->shape.size() == 1 && t->shape[0] == DimExpr(0);
}

// floor(in * scale) as an expression; `axis` names it in errors.
StatusOr<DimExpr> scaled_dim(const DimExpr& in, double scale, size_t axis) {
  if (!(scale > 0) || !std::isfinite(scale)) {
    return invalid_argument("input 'scales' element {} must be positive and finite, got {}", axis,
                            scale);
  }
  if (auto v = in.constant_value()) {
    const double out = std::floor(static_cast<double>(*v) * scale);
    if (!(out <= kMaxDim)) {
      return invalid_argument("scale {} on axis {} (size {}) gives output size {}, too large",
                              scale, axis, *v, out);
    }
    return DimExpr(static_cast<int64_t>(out));
  }
  if (scale == 1) return in;
  if (scale == std::floor(scale) && scale <= kMaxDim) {
    return in * DimExpr(static_cast<int64_t>(scale));
  }
  const double inverse = 1 / scale;
  if (inverse == std::floor(inverse) && inverse <= kMaxDim) {
    // scale is exactly 1/k: floor(in * scale) == floor(in / k) for every in.
    return in.floor_div(static_cast<int64_t>(inverse));
  }
  // A rounded reciprocal (float(1/3)) on a dim the model proves divisible by k: floor(k*q * scale)
  // is q when k * scale is in [1, 1 + 2^-22] and q < 2^22. Beyond that, planning on the bound
  // shapes recomputes floor(in * scale) and reports the mismatch.
  const double k = std::round(inverse);
  if (k >= 2 && k <= kMaxDim && k * scale >= 1 && k * scale - 1 <= 0x1p-22) {
    if (auto q = in.exact_div(DimExpr(static_cast<int64_t>(k)))) return *q;
  }
  return unimplemented(
      "scale {} on axis {} of symbolic size '{}': floor({} * {}) is only expressible for an "
      "integer scale or the reciprocal of one dividing the dim (give 'sizes' instead)",
      scale, axis, in.to_string(), in.to_string(), scale);
}

Status check_output(const Shape& out) {
  if (!is_static(out)) return ok_status();
  int64_t count = 1;
  for (const DimExpr& d : out) {
    const int64_t v = *d.constant_value();
    if (v < 0) return invalid_argument("output dims {} are negative", shape_to_string(out));
    if (v != 0 && count > kMaxElements / v) {
      return invalid_argument("output dims {} have too many elements", shape_to_string(out));
    }
    count *= v;
  }
  return ok_status();
}

Status check_data_type(const ValueType& x, const Params& p, std::string_view name) {
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, name, all_dtypes()));
  if (p.mode != Mode::kNearest && !is_float(x.dtype)) {
    return unimplemented("mode '{}' on dtype {} is not supported (only 'nearest' is)",
                         p.mode == Mode::kLinear ? "linear" : "cubic", dtype_name(x.dtype));
  }
  if (x.shape.empty()) {
    return invalid_argument("{} must have rank >= 1, got a scalar", input_label(0, name));
  }
  return ok_status();
}

constexpr size_t kScales = kResizeScales;
constexpr size_t kSizes = 3;

// The output shape from `scales` or `sizes`.
StatusOr<Shape> output_shape(const InferArgs& args, const Shape& in) {
  const ValueType* scales_type = optional_input(args, kScales);
  const ValueType* sizes_type = optional_input(args, kSizes);
  // An empty tensor stands for an absent input (exporters write one for the unused of the two).
  if (is_empty_vector(scales_type)) scales_type = nullptr;
  if (is_empty_vector(sizes_type)) sizes_type = nullptr;
  const std::string scales_label = input_label(kScales, "scales");
  const std::string sizes_label = input_label(kSizes, "sizes");
  if (scales_type != nullptr && sizes_type != nullptr) {
    return invalid_argument("only one of {} and {} may be given", scales_label, sizes_label);
  }
  if (scales_type == nullptr && sizes_type == nullptr) {
    return invalid_argument("one of {} and {} is required", scales_label, sizes_label);
  }
  Shape out;
  if (scales_type != nullptr) {
    KILN_ASSIGN_OR_RETURN(auto scales, constant_floats(args, kScales, "scales"));
    if (!scales) return internal_error("{} vanished", scales_label);
    if (scales->size() != in.size()) {
      return invalid_argument("{} must have {} elements (the rank of input 0), got {}",
                              scales_label, in.size(), scales->size());
    }
    for (size_t a = 0; a < in.size(); ++a) {
      KILN_ASSIGN_OR_RETURN(DimExpr d, scaled_dim(in[a], (*scales)[a], a));
      out.push_back(std::move(d));
    }
  } else {
    KILN_ASSIGN_OR_RETURN(auto sizes, input_dim_values(args, kSizes, "sizes"));
    if (!sizes) return internal_error("{} vanished", sizes_label);
    if (sizes->size() != in.size()) {
      return invalid_argument("{} must have {} elements (the rank of input 0), got {}", sizes_label,
                              in.size(), sizes->size());
    }
    for (size_t a = 0; a < in.size(); ++a) {
      const DimExpr& d = (*sizes)[a];
      auto v = d.constant_value();
      if (v && (*v < 0 || static_cast<double>(*v) > kMaxDim)) {
        return invalid_argument("{} element {} must be in [0, 2^40], got {}", sizes_label, a, *v);
      }
      if (v && *v > 0 && in[a] == DimExpr(0)) {
        return invalid_argument("{} element {} is {} but axis {} of the input is empty",
                                sizes_label, a, *v, a);
      }
      out.push_back(d);
    }
  }
  KILN_RETURN_IF_ERROR(check_output(out));
  return out;
}

using AxisTaps = ResizeAxisTaps;

// The coordinate of output index x in the input; `resized` is the output length.
double source_coordinate(const Params& p, double x, double in, double scale, double resized,
                         double roi_start, double roi_end) {
  switch (p.coord) {
    case Coord::kHalfPixel: return (x + 0.5) / scale - 0.5;
    case Coord::kPytorchHalfPixel: return resized == 1 ? 0.0 : (x + 0.5) / scale - 0.5;
    case Coord::kAlignCorners: return resized == 1 ? 0.0 : x * (in - 1) / (resized - 1);
    case Coord::kAsymmetric: return x / scale;
    case Coord::kTfHalfPixelForNN: return (x + 0.5) / scale;
    case Coord::kTfCropAndResize: {
      const double span = roi_end - roi_start;
      const double c = resized == 1 ? span * (in - 1) / 2 : x * span * (in - 1) / (resized - 1);
      return c + roi_start * (in - 1);
    }
  }
  return 0;
}

// `resized`: the output length (ONNX Runtime's; the reference would take scale * in).
AxisTaps axis_taps(const Params& p, int64_t in, int64_t out, int64_t stride, double scale,
                   double resized, double roi_start, double roi_end) {
  AxisTaps ax;
  const auto din = static_cast<double>(in);
  const bool crop = p.coord == Coord::kTfCropAndResize;
  if (crop) ax.outside.assign(static_cast<size_t>(out), 0);
  // Taps of every output index, uncompacted: up to 4.
  std::vector<std::array<int64_t, 4>> idx(static_cast<size_t>(out));
  std::vector<std::array<double, 4>> w(static_cast<size_t>(out));
  std::vector<int> count(static_cast<size_t>(out), 0);
  int64_t most = 1;
  for (int64_t o = 0; o < out; ++o) {
    double xo =
        source_coordinate(p, static_cast<double>(o), din, scale, resized, roi_start, roi_end);
    if (crop && !(xo >= 0 && xo <= din - 1)) {
      ax.outside[o] = 1;
      xo = 0;
    }
    // Valid scales keep xo within [-0.5, in]; the clamp only guards the conversion below.
    xo = std::clamp(xo, -4.0, din + 4);
    // ratio in (0, 1]: an integral coordinate counts as the right end of [base, base + 1].
    const double fl = std::floor(xo);
    const double ratio = xo == fl ? 1.0 : xo - fl;
    const int64_t base = static_cast<int64_t>(fl) - (xo == fl ? 1 : 0);
    std::array<int64_t, 4> ti{};
    std::array<double, 4> tw{};
    int n = 0;
    if (p.mode == Mode::kNearest) {
      bool right = true;
      if (ratio != 1) {
        switch (p.rounding) {
          case Rounding::kRoundPreferFloor: right = ratio > 0.5; break;
          case Rounding::kRoundPreferCeil: right = ratio >= 0.5; break;
          case Rounding::kFloor: right = false; break;
          case Rounding::kCeil: right = true; break;
        }
      }
      ti[0] = right ? base + 1 : base;
      tw[0] = 1;
      n = 1;
    } else if (p.mode == Mode::kLinear) {
      ti = {base, base + 1, 0, 0};
      tw = {1 - ratio, ratio, 0, 0};
      n = 2;
    } else {
      const double a = p.cubic_a;
      const double r1 = ratio + 1, r2 = 1 - ratio, r3 = (1 - ratio) + 1;
      ti = {base - 1, base, base + 1, base + 2};
      tw = {((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a,
            ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1, ((a + 2) * r2 - (a + 3)) * r2 * r2 + 1,
            ((a * r3 - 5 * a) * r3 + 8 * a) * r3 - 4 * a};
      n = 4;
    }
    // Nearest ignores exclude_outside: renormalizing one tap only changes which edge value is
    // read, and the clamp below already reads the edge.
    if (p.exclude_outside && p.mode != Mode::kNearest) {
      double sum = 0;
      for (int t = 0; t < n; ++t) {
        if (ti[t] < 0 || ti[t] >= in) tw[t] = 0;
        sum += tw[t];
      }
      if (sum != 0) {
        for (int t = 0; t < n; ++t) tw[t] /= sum;
      }
    }
    // Drop zero weights (an integral coordinate, an identity axis): fewer taps, same sum.
    int kept = 0;
    for (int t = 0; t < n; ++t) {
      if (tw[t] == 0 && !(t == n - 1 && kept == 0)) continue;
      idx[o][kept] = std::clamp<int64_t>(ti[t], 0, in - 1) * stride;
      w[o][kept] = tw[t];
      ++kept;
    }
    count[o] = kept;
    most = std::max<int64_t>(most, kept);
  }
  ax.taps = most;
  ax.offset.assign(static_cast<size_t>(out * most), 0);
  ax.weight.assign(static_cast<size_t>(out * most), 0.0);
  for (int64_t o = 0; o < out; ++o) {
    for (int t = 0; t < most; ++t) {
      // Padding taps read the first tap's element with weight 0.
      ax.offset[o * most + t] = idx[o][t < count[o] ? t : 0];
      if (t < count[o]) ax.weight[o * most + t] = w[o][t];
    }
  }
  ax.weight_f.assign(ax.weight.begin(), ax.weight.end());
  return ax;
}

// `v` in compute type C; integers saturate (NaN is 0) so a hostile extrapolation_value is no UB.
template <typename C>
C from_double(double v) {
  if constexpr (std::is_same_v<C, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<C>) {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<C>::lowest())) {
      return std::numeric_limits<C>::lowest();
    }
    if (v >= static_cast<double>(std::numeric_limits<C>::max())) {
      return std::numeric_limits<C>::max();
    }
    return static_cast<C>(v);
  } else {
    return static_cast<C>(v);
  }
}

class ResizeKernel : public Kernel {
  // Member templates first: clang 14 leaves those defined after a generic lambda that
  // calls them uninstantiated (undefined references at link time).
 private:
  // Row r (all axes but the last) as coordinates; true when some coordinate is outside the crop.
  bool row_coords(int64_t r, std::vector<int64_t>& coord) const {
    bool outside = false;
    for (size_t a = axes_.size() - 1; a-- > 0;) {
      coord[a] = r % out_[a];
      r /= out_[a];
      if (!axes_[a].outside.empty() && axes_[a].outside[coord[a]]) outside = true;
    }
    return outside;
  }

  template <typename T>
  void run_nearest(const T* x, T* y) const {
    const size_t rank = axes_.size();
    const int64_t width = out_[rank - 1];
    const int64_t rows = total_ / width;
    const AxisTaps& last = axes_[rank - 1];
    T extrapolated{};
    store(&extrapolated, 0, from_double<compute_t<T>>(p_.extrapolation));
#pragma omp parallel if (total_ >= 32768)
    {
      std::vector<int64_t> coord(rank);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        T* row = y + r * width;
        if (row_coords(r, coord)) {
          std::fill(row, row + width, extrapolated);
          continue;
        }
        int64_t base = 0;
        for (size_t a = 0; a + 1 < rank; ++a) base += axes_[a].offset[coord[a]];
        for (int64_t o = 0; o < width; ++o) {
          row[o] =
              !last.outside.empty() && last.outside[o] ? extrapolated : x[base + last.offset[o]];
        }
      }
    }
  }

  template <typename C>
  C weight(const AxisTaps& ax, int64_t i) const {
    if constexpr (std::is_same_v<C, double>)
      return ax.weight[i];
    else
      return ax.weight_f[i];
  }

  template <typename T>
  void run_weighted(const T* x, T* y) const {
    using C = compute_t<T>;
    const size_t rank = axes_.size();
    const int64_t width = out_[rank - 1];
    const int64_t rows = total_ / width;
    const AxisTaps& last = axes_[rank - 1];
    const int64_t lt = last.taps;
    const C extrapolated = from_double<C>(p_.extrapolation);
#pragma omp parallel if (total_ * outer_taps_ * axes_.back().taps >= 16384)
    {
      std::vector<int64_t> coord(rank);
      std::vector<int64_t> off(static_cast<size_t>(outer_taps_));
      std::vector<C> wt(static_cast<size_t>(outer_taps_));
      std::vector<C> acc(static_cast<size_t>(width));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t row = r * width;
        if (row_coords(r, coord)) {
          for (int64_t o = 0; o < width; ++o) store(y, row + o, extrapolated);
          continue;
        }
        // The outer axes' taps as one list: offsets summed, weights multiplied.
        int64_t n = 1;
        off[0] = 0;
        wt[0] = C(1);
        for (size_t a = 0; a + 1 < rank; ++a) {
          const AxisTaps& ax = axes_[a];
          const int64_t k = ax.taps;
          const int64_t first = coord[a] * k;
          // In place, from the back: slot i*k+t >= i, and slots above i are already expanded.
          for (int64_t i = n; i-- > 0;) {
            const int64_t o0 = off[i];
            const C w0 = wt[i];
            for (int64_t t = k; t-- > 0;) {
              off[i * k + t] = o0 + ax.offset[first + t];
              wt[i * k + t] = w0 * weight<C>(ax, first + t);
            }
          }
          n *= k;
        }
        // acc[o] = sum over outer taps i of wt[i] * (sum over t of w_t * x), both sums in tap
        // order; the output index is the inner loop so consecutive outputs' sums overlap.
        std::fill(acc.begin(), acc.end(), C(0));
        for (int64_t i = 0; i < n; ++i) {
          const T* xi = x + off[i];
          const C wi = wt[i];
          if (lt == 2) {  // linear's two taps, unrolled: the common case
            for (int64_t o = 0; o < width; ++o) {
              const int64_t* lo = &last.offset[o * 2];
              C s = 0;
              s += weight<C>(last, o * 2) * load(xi, lo[0]);
              s += weight<C>(last, o * 2 + 1) * load(xi, lo[1]);
              acc[o] += wi * s;
            }
            continue;
          }
          for (int64_t o = 0; o < width; ++o) {
            const int64_t* lo = &last.offset[o * lt];
            C s = 0;
            for (int64_t t = 0; t < lt; ++t) s += weight<C>(last, o * lt + t) * load(xi, lo[t]);
            acc[o] += wi * s;
          }
        }
        for (int64_t o = 0; o < width; ++o) {
          const bool outside = !last.outside.empty() && last.outside[o];
          store(y, row + o, outside ? extrapolated : acc[o]);
        }
      }
    }
  }

  Params p_;
  std::vector<AxisTaps> axes_;
  ConcreteShape out_;
  int64_t total_ = 0;
  int64_t outer_taps_ = 1;

 public:
  ResizeKernel(Params p, std::vector<AxisTaps> axes, ConcreteShape out)
      : p_(p), axes_(std::move(axes)), out_(std::move(out)) {
    total_ = product(out_);
    for (size_t a = 0; a + 1 < axes_.size(); ++a) outer_taps_ *= axes_[a].taps;
  }

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    if (total_ == 0) return ok_status();
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if (p_.mode == Mode::kNearest) {
        run_nearest<T>(in[0].as<T>(), out[0].as<T>());
        return ok_status();
      }
      if constexpr (is_float_storage_v<T>) {
        run_weighted<T>(in[0].as<T>(), out[0].as<T>());
        return ok_status();
      } else {
        return internal_error("Resize has no interpolating {} instance", dtype_name(in[0].dtype));
      }
    });
  }
};

// The values of constant input `index`, or nullopt when absent or empty; an error when present
// but not constant.
using Floats = std::optional<std::vector<double>>;
StatusOr<Floats> make_floats(const MakeArgs& args, size_t index, std::string_view name) {
  if (index >= args.inputs.size() || !args.inputs[index]) return Floats();
  const Tensor* t = index < args.constants.size() ? args.constants[index] : nullptr;
  if (t == nullptr) {
    if (args.inputs[index]->shape == Shape{DimExpr(0)}) return Floats();
    return unimplemented("{} must be a constant", input_label(index, name));
  }
  if (t->element_count() == 0) return Floats();
  std::vector<double> v(static_cast<size_t>(t->element_count()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = element_as_double(*t, static_cast<int64_t>(i));
  return Floats(std::move(v));
}

StatusOr<std::unique_ptr<Kernel>> make_resize(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(Params p, read_resize_params(args.attributes));
  const ConcreteShape out = args.output_dims(0);
  Floats scales, roi;
  if (product(out) > 0) {
    KILN_ASSIGN_OR_RETURN(scales, make_floats(args, kScales, "scales"));
    if (p.coord == Coord::kTfCropAndResize) {
      KILN_ASSIGN_OR_RETURN(roi, make_floats(args, kResizeRoi, "roi"));
    }
  }
  KILN_ASSIGN_OR_RETURN(ResizePlan plan,
                        plan_resize(args.attributes, args.input_dims(0), out, scales, roi));
  return std::unique_ptr<Kernel>(std::make_unique<ResizeKernel>(p, std::move(plan.axes), out));
}

Status infer_resize(InferArgs& args) {
  KILN_ASSIGN_OR_RETURN(Params p, read_resize_params(args.attributes));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 4));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_RETURN_IF_ERROR(check_data_type(x, p, "X"));
  if (p.coord == Coord::kTfCropAndResize) {
    KILN_ASSIGN_OR_RETURN(auto roi, constant_floats(args, 1, "roi"));
    if (!roi || roi->size() != 2 * x.shape.size()) {
      return invalid_argument(
          "input 1 'roi' must have {} elements (2 * rank) for "
          "'tf_crop_and_resize', got {}",
          2 * x.shape.size(), roi ? roi->size() : 0);
    }
  }
  KILN_ASSIGN_OR_RETURN(Shape out, output_shape(args, x.shape));
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

// Multiply-adds: an estimate of at least two taps on each of two axes per output element (what
// interpolation costs; nearest costs less).
double resize_multiply_adds(const Attributes&, std::span<const ConcreteShape* const>,
                            std::span<const ConcreteShape* const> out) {
  const ConcreteShape* y = dims_at(out, 0);
  return y == nullptr ? 0 : 4 * product_as_double(*y);
}

}  // namespace

StatusOr<ResizePlan> plan_resize(const Attributes& attributes, const ConcreteShape& in,
                                 const ConcreteShape& out,
                                 const std::optional<std::vector<double>>& scales,
                                 const std::optional<std::vector<double>>& roi) {
  KILN_ASSIGN_OR_RETURN(Params p, read_resize_params(attributes));
  ResizePlan plan;
  plan.mode = p.mode;
  plan.extrapolation = p.extrapolation;
  if (product(out) == 0) return plan;
  const size_t rank = in.size();
  if (p.coord == Coord::kTfCropAndResize && (!roi || roi->size() != 2 * rank)) {
    return invalid_argument(
        "input 1 'roi' must have {} elements for "
        "'tf_crop_and_resize', got {}",
        2 * rank, roi ? roi->size() : 0);
  }
  const bool crop = p.coord == Coord::kTfCropAndResize;
  if (scales && scales->size() != rank) {
    return invalid_argument("{} must have {} elements, got {}", input_label(kScales, "scales"),
                            rank, scales->size());
  }
  const std::vector<int64_t> strides = row_major_strides(in);
  plan.axes.resize(rank);
  for (size_t a = 0; a < rank; ++a) {
    const double scale =
        scales ? (*scales)[a] : static_cast<double>(out[a]) / static_cast<double>(in[a]);
    const auto resized = static_cast<double>(out[a]);
    plan.axes[a] = axis_taps(p, in[a], out[a], strides[a], scale, resized, crop ? (*roi)[a] : 0.0,
                             crop ? (*roi)[a + rank] : 1.0);
  }
  return plan;
}

void register_resize_kernels(std::vector<OpDef>& table) {
  // roi, scales and sizes: inputs 1, 2, 3.
  table.push_back(OpDef{.op_type = "Resize",
                        .infer = infer_resize,
                        .make = make_resize,
                        .compile_time_inputs = 0b1110,
                        .multiply_adds = resize_multiply_adds});
  // No Upsample: the ONNX version converter turns it into Resize (kiln imports to opset 10 or
  // later), with the importer keeping its asymmetric / floor semantics.
}

}  // namespace kiln::kernels
