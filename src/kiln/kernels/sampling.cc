// GridSample (opset 16): samples a 4-D input [N, C, H, W] at the normalized (x, y) locations of
// grid [N, H_out, W_out, 2] (x along W, y along H, -1 and 1 the outer edges, or the corner
// pixels' centers with align_corners), with ONNX Runtime's semantics:
//   - mode bilinear (four taps), nearest (rounds half to even, like the ONNX reference's
//     nearbyint) or bicubic (sixteen taps, A = -0.75);
//   - padding_mode zeros (taps outside read 0), border (taps outside read the nearest edge pixel)
//     or reflection (taps outside read the pixel mirrored at the borders, -0.5 and W - 0.5, or
//     the corner pixels' centers with align_corners). Padding applies to each tap, not to the
//     sampling location, as in ONNX Runtime and PyTorch's bicubic mode.
// Sampling locations are computed in the grid's precision, interpolation in double. A NaN grid
// coordinate gives NaN; an
// infinite one reads the padding (zeros or the border) and gives NaN under reflection. An input
// with no pixels (H or W 0) gives zeros.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {
namespace {

enum class SampleMode { kBilinear, kNearest, kBicubic };
enum class Padding { kZeros, kBorder, kReflection };

struct GridSampleParams {
  SampleMode mode = SampleMode::kBilinear;
  Padding padding = Padding::kZeros;
  bool align_corners = false;
};

StatusOr<GridSampleParams> read_grid_sample(const Attributes& a) {
  GridSampleParams p;
  KILN_ASSIGN_OR_RETURN(std::string mode, a.get_string("mode", "bilinear"));
  if (mode == "bilinear") {
    p.mode = SampleMode::kBilinear;
  } else if (mode == "nearest") {
    p.mode = SampleMode::kNearest;
  } else if (mode == "bicubic") {
    p.mode = SampleMode::kBicubic;
  } else {
    return invalid_argument("attribute 'mode' must be 'bilinear', 'nearest' or 'bicubic', got '{}'",
                            mode);
  }
  KILN_ASSIGN_OR_RETURN(std::string padding, a.get_string("padding_mode", "zeros"));
  if (padding == "zeros") {
    p.padding = Padding::kZeros;
  } else if (padding == "border") {
    p.padding = Padding::kBorder;
  } else if (padding == "reflection") {
    p.padding = Padding::kReflection;
  } else {
    return invalid_argument(
        "attribute 'padding_mode' must be 'zeros', 'border' or 'reflection', got '{}'", padding);
  }
  KILN_ASSIGN_OR_RETURN(int64_t align, a.get_int("align_corners", 0));
  if (align != 0 && align != 1) {
    return invalid_argument("attribute 'align_corners' must be 0 or 1, got {}", align);
  }
  p.align_corners = align == 1;
  return p;
}

Status infer_grid_sample(InferArgs& args) {
  KILN_RETURN_IF_ERROR(
      check_known_attributes(args.attributes, {"mode", "padding_mode", "align_corners"}));
  KILN_RETURN_IF_ERROR(read_grid_sample(args.attributes).status());
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_ASSIGN_OR_RETURN(ValueType grid, required_input(args, 1, "grid"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", float_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(grid, 1, "grid", float_dtypes()));
  KILN_RETURN_IF_ERROR(check_rank(x, 0, "X", 4));
  KILN_RETURN_IF_ERROR(check_rank(grid, 1, "grid", 4));
  KILN_RETURN_IF_ERROR(check_dims_equal(grid.shape[3], DimExpr(2), "input 1 'grid' dim 3"));
  KILN_RETURN_IF_ERROR(
      check_dims_equal(grid.shape[0], x.shape[0], "input 1 'grid' dim 0 (the batch of 'X')"));
  args.outputs = {ValueType{x.dtype, Shape{x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]}}};
  return ok_status();
}

// x reflected into [low, high] (the borders mirror it); low when the range is empty.
double reflect(double x, double low, double high) {
  const double range = high - low;
  if (!(range > 0)) return low;
  if (x >= low && x <= high) return x;
  const bool below = x < low;
  const double dx = below ? low - x : x - high;
  const double flips = std::floor(dx / range);
  const double r = dx - flips * range;
  const bool even = std::fmod(flips, 2.0) == 0;
  if (below) return even ? low + r : high - r;
  return even ? high - r : low + r;
}

// Cubic convolution weights for the taps at -1, 0, 1, 2 from a fraction t in [0, 1).
std::array<double, 4> cubic_weights(double t) {
  constexpr double a = -0.75;
  const double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
  return {((a * x0 - 5 * a) * x0 + 8 * a) * x0 - 4 * a, ((a + 2) * x1 - (a + 3)) * x1 * x1 + 1,
          ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1, ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a};
}

class GridSampleKernel : public Kernel {
 public:
  GridSampleKernel(GridSampleParams p, ConcreteShape x_dims, ConcreteShape y_dims)
      : p_(p), x_(std::move(x_dims)), y_(std::move(y_dims)) {
    // The coordinate range inside the map per axis (0: x along W, 1: y along H).
    for (int axis = 0; axis < 2; ++axis) {
      const auto size = static_cast<double>(x_[3 - axis]);
      low_[axis] = p_.align_corners ? 0 : -0.5;
      high_[axis] = p_.align_corners ? size - 1 : size - 0.5;
    }
  }

 private:
  // Pixel (r, c) of `plane`, with taps outside the map read as the padding mode says.
  template <typename T>
  double pixel(const T* plane, int64_t r, int64_t c) const {
    const int64_t h = x_[2], w = x_[3];
    if (p_.padding == Padding::kZeros) {
      if (r < 0 || r >= h || c < 0 || c >= w) return 0;
    } else if (p_.padding == Padding::kBorder) {
      r = std::clamp<int64_t>(r, 0, h - 1);
      c = std::clamp<int64_t>(c, 0, w - 1);
    } else {
      const double r_reflected = reflect(static_cast<double>(r), low_[1], high_[1]);
      const double c_reflected = reflect(static_cast<double>(c), low_[0], high_[0]);
      r = std::clamp<int64_t>(static_cast<int64_t>(r_reflected), 0, h - 1);
      c = std::clamp<int64_t>(static_cast<int64_t>(c_reflected), 0, w - 1);
    }
    return static_cast<double>(load(plane, r * w + c));
  }

  // The source coordinate along an axis of `size` pixels for normalized `v`. Padding applies to
  // each tap (pixel()), not to this coordinate; it is only brought near the map where that changes
  // no tap's value, so that it converts to an integer: beyond 8 pixels out every tap reads the
  // same padding (zeros, border), and reflection repeats every 2 * range pixels (a whole number).
  // The location itself is computed in the grid's precision (float for f32, as ONNX Runtime and
  // the ONNX reference do), so that nearest picks the same pixel at a rounding tie.
  template <typename C>
  double source(C v, int64_t size, int axis) const {
    C located = p_.align_corners ? (v + 1) / 2 * static_cast<C>(size - 1)
                                 : ((v + 1) * static_cast<C>(size) - 1) / 2;
    if (p_.mode == SampleMode::kNearest) located = std::nearbyint(located);
    const auto s = static_cast<double>(located);
    if (s >= low_[axis] && s <= high_[axis]) return s;
    if (p_.padding != Padding::kReflection) {
      return std::clamp(s, -8.0, static_cast<double>(size) + 8);
    }
    const double period = 2 * (high_[axis] - low_[axis]);
    if (!(period > 0)) return low_[axis];
    if (std::isinf(s)) return std::numeric_limits<double>::quiet_NaN();
    return s - period * std::floor((s - low_[axis]) / period);
  }

  template <typename T>
  double sample(const T* plane, double x, double y) const {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<double>::quiet_NaN();
    if (p_.mode == SampleMode::kNearest) {
      return pixel(plane, static_cast<int64_t>(y), static_cast<int64_t>(x));
    }
    const double fx = std::floor(x), fy = std::floor(y);
    const auto x1 = static_cast<int64_t>(fx), y1 = static_cast<int64_t>(fy);
    const double dx = x - fx, dy = y - fy;
    if (p_.mode == SampleMode::kBilinear) {
      return (1 - dy) * ((1 - dx) * pixel(plane, y1, x1) + dx * pixel(plane, y1, x1 + 1)) +
             dy * ((1 - dx) * pixel(plane, y1 + 1, x1) + dx * pixel(plane, y1 + 1, x1 + 1));
    }
    const std::array<double, 4> wx = cubic_weights(dx), wy = cubic_weights(dy);
    double sum = 0;
    for (int i = 0; i < 4; ++i) {
      double row = 0;
      for (int j = 0; j < 4; ++j) row += wx[j] * pixel(plane, y1 - 1 + i, x1 - 1 + j);
      sum += wy[i] * row;
    }
    return sum;
  }

  template <typename T, typename G>
  void compute(const T* x, const G* grid, T* y) const {
    const int64_t channels = x_[1], h = x_[2], w = x_[3];
    const int64_t oh = y_[2], ow = y_[3];
    if (h == 0 || w == 0) {  // no pixel to read: every tap is padding, read as 0
      for (int64_t i = 0; i < product(y_); ++i) store(y, i, compute_t<T>(0));
      return;
    }
    parallel_for(y_[0] * oh * ow, [&](int64_t t) {
      const int64_t n = t / (oh * ow), hw = t % (oh * ow);
      const double sx = source(load(grid, t * 2), w, 0);
      const double sy = source(load(grid, t * 2 + 1), h, 1);
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = x + (n * channels + c) * h * w;
        store(y, (n * channels + c) * oh * ow + hw,
              static_cast<compute_t<T>>(sample(plane, sx, sy)));
      }
    });
  }

 public:
  // After the member templates it instantiates: clang instantiates them from this generic
  // lambda only when their definitions come first.
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (is_float_storage_v<T>) {
        return visit_dtype(in[1].dtype, [&]<typename G>() -> Status {
          if constexpr (is_float_storage_v<G>) {
            compute<T, G>(in[0].as<T>(), in[1].as<G>(), out[0].as<T>());
            return ok_status();
          } else {
            return internal_error("GridSample has no {} grid instance", dtype_name(in[1].dtype));
          }
        });
      } else {
        return internal_error("GridSample has no {} instance", dtype_name(in[0].dtype));
      }
    });
  }

 private:
  GridSampleParams p_;
  ConcreteShape x_, y_;
  double low_[2] = {0, 0}, high_[2] = {0, 0};
};

StatusOr<std::unique_ptr<Kernel>> make_grid_sample(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(GridSampleParams p, read_grid_sample(args.attributes));
  return std::unique_ptr<Kernel>(
      std::make_unique<GridSampleKernel>(p, args.input_dims(0), args.output_dims(0)));
}

double grid_sample_multiply_adds(const Attributes& attributes,
                                 std::span<const ConcreteShape* const>,
                                 std::span<const ConcreteShape* const> out) {
  const ConcreteShape* y = dims_at(out, 0);
  if (y == nullptr) return 0;
  auto p = read_grid_sample(attributes);
  const double taps = p.ok() && p->mode == SampleMode::kBicubic ? 16 : 4;
  return taps * product_as_double(*y);
}

}  // namespace

void register_sampling_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{.op_type = "GridSample",
                        .infer = infer_grid_sample,
                        .make = make_grid_sample,
                        .since_version = 16,
                        .multiply_adds = grid_sample_multiply_adds});
}

}  // namespace kiln::kernels
