#include "kiln/kernels/conv_geometry.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln::kernels {
namespace {

StatusOr<AutoPad> parse_auto_pad(const Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(std::string text, attributes.get_string("auto_pad", "NOTSET"));
  if (text == "NOTSET" || text.empty()) return AutoPad::kNotSet;
  if (text == "SAME_UPPER") return AutoPad::kSameUpper;
  if (text == "SAME_LOWER") return AutoPad::kSameLower;
  if (text == "VALID") return AutoPad::kValid;
  return invalid_argument(
      "attribute 'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got \"{}\"", text);
}

const char* auto_pad_name(AutoPad p) {
  switch (p) {
    case AutoPad::kNotSet: return "NOTSET";
    case AutoPad::kSameUpper: return "SAME_UPPER";
    case AutoPad::kSameLower: return "SAME_LOWER";
    case AutoPad::kValid: return "VALID";
  }
  return "?";
}

Status check_spatial_count(const WindowGeometry& g, std::span<const DimExpr> input_spatial) {
  if (input_spatial.size() != g.spatial_rank()) {
    return internal_error("window geometry has {} spatial dims, input has {}", g.spatial_rank(),
                          input_spatial.size());
  }
  return ok_status();
}

}  // namespace

StatusOr<std::vector<int64_t>> ints_of_size(const Attributes& attributes, const char* name,
                                            size_t size, int64_t fallback, int64_t min_value) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                        attributes.get_ints(name, std::vector<int64_t>(size, fallback)));
  if (values.size() != size) {
    return invalid_argument("attribute '{}' must have {} values, got {}", name, size,
                            values.size());
  }
  for (int64_t v : values) {
    if (v < min_value || v > kMaxWindowAttribute) {
      return invalid_argument("attribute '{}' values must be in [{}, {}], got [{}]", name,
                              min_value, kMaxWindowAttribute, fmt::join(values, ","));
    }
  }
  return values;
}

StatusOr<WindowGeometry> parse_window_geometry(const Attributes& attributes, size_t spatial_rank,
                                               const WindowOptions& options) {
  WindowGeometry g;
  if (attributes.has("kernel_shape")) {
    KILN_ASSIGN_OR_RETURN(g.kernel, ints_of_size(attributes, "kernel_shape", spatial_rank, 1, 1));
    if (options.kernel_from_weights && *options.kernel_from_weights != g.kernel) {
      return invalid_argument(
          "attribute 'kernel_shape' [{}] does not match the spatial dims [{}] "
          "of input 1 'W'",
          fmt::join(g.kernel, ","), fmt::join(*options.kernel_from_weights, ","));
    }
  } else if (options.kernel_from_weights) {
    g.kernel = *options.kernel_from_weights;
    for (int64_t k : g.kernel) {
      if (k < 1) {
        return invalid_argument("input 1 'W' spatial dims must be >= 1, got [{}]",
                                fmt::join(g.kernel, ","));
      }
    }
  } else {
    return invalid_argument("attribute 'kernel_shape' is required");
  }
  KILN_ASSIGN_OR_RETURN(g.strides, ints_of_size(attributes, "strides", spatial_rank, 1, 1));
  if (options.allow_dilations) {
    KILN_ASSIGN_OR_RETURN(g.dilations, ints_of_size(attributes, "dilations", spatial_rank, 1, 1));
  } else {
    if (attributes.has("dilations")) {
      KILN_ASSIGN_OR_RETURN(auto d, ints_of_size(attributes, "dilations", spatial_rank, 1, 1));
      if (std::any_of(d.begin(), d.end(), [](int64_t v) { return v != 1; })) {
        return unimplemented("attribute 'dilations' other than 1 is not supported for this op");
      }
    }
    g.dilations.assign(spatial_rank, 1);
  }
  KILN_ASSIGN_OR_RETURN(g.pads, ints_of_size(attributes, "pads", 2 * spatial_rank, 0, 0));
  KILN_ASSIGN_OR_RETURN(g.auto_pad, parse_auto_pad(attributes));
  if (g.auto_pad != AutoPad::kNotSet) {
    if (std::any_of(g.pads.begin(), g.pads.end(), [](int64_t p) { return p != 0; })) {
      return invalid_argument("attribute 'pads' [{}] cannot be combined with auto_pad = {}",
                              fmt::join(g.pads, ","), auto_pad_name(g.auto_pad));
    }
  }
  KILN_ASSIGN_OR_RETURN(int64_t ceil_mode, attributes.get_int("ceil_mode", 0));
  if (ceil_mode != 0 && ceil_mode != 1) {
    return invalid_argument("attribute 'ceil_mode' must be 0 or 1, got {}", ceil_mode);
  }
  if (ceil_mode == 1 && !options.allow_ceil_mode) {
    return invalid_argument("attribute 'ceil_mode' is not valid for this op");
  }
  g.ceil_mode = ceil_mode == 1;
  return g;
}

StatusOr<Shape> window_output_dims(const WindowGeometry& g,
                                   std::span<const DimExpr> input_spatial) {
  KILN_RETURN_IF_ERROR(check_spatial_count(g, input_spatial));
  size_t r = g.spatial_rank();
  Shape out;
  for (size_t i = 0; i < r; ++i) {
    const DimExpr& in = input_spatial[i];
    int64_t s = g.strides[i];
    int64_t k_eff = g.effective_kernel(i);
    DimExpr dim;
    switch (g.auto_pad) {
      case AutoPad::kSameUpper:
      case AutoPad::kSameLower: dim = in.ceil_div(s); break;
      case AutoPad::kValid: dim = (in - DimExpr(k_eff)).floor_div(s) + DimExpr(1); break;
      case AutoPad::kNotSet: {
        DimExpr span = in + DimExpr(g.pads[i] + g.pads[r + i] - k_eff);
        if (!g.ceil_mode) {
          dim = span.floor_div(s) + DimExpr(1);
          break;
        }
        dim = span.ceil_div(s) + DimExpr(1);
        // Below this stride no ceil-mode window can start in the end padding, for any `in`.
        if (s <= k_eff - g.pads[r + i]) break;
        auto out = dim.constant_value();
        auto size = in.constant_value();
        if (out && size) {
          if ((*out - 1) * s >= *size + g.pads[i]) dim = DimExpr(*out - 1);
          break;
        }
        // A last window starting in the end padding is dropped: windows start at 0, s, 2s, ...
        // below in + pad begin, so there are at most ceil((in + pad begin) / s). With the end pad
        // below the kernel extent the two counts differ by at most the one dropped window.
        if (g.pads[r + i] >= k_eff) {
          return unimplemented(
              "attribute 'ceil_mode' = 1 with end pad {} >= kernel extent {} on symbolic spatial "
              "dim {} ('{}')",
              g.pads[r + i], k_eff, i, in.to_string());
        }
        dim = DimExpr::min(dim, (in + DimExpr(g.pads[i])).ceil_div(s));
        break;
      }
    }
    if (auto value = dim.constant_value(); value && *value < 1) {
      return invalid_argument(
          "spatial dim {}: input size {} with kernel {} (dilation {}), stride {} and pads {},{} "
          "gives output size {}; must be >= 1",
          i, in.to_string(), g.kernel[i], g.dilations[i], s, g.pads[i], g.pads[r + i], *value);
    }
    out.push_back(dim);
  }
  return out;
}

StatusOr<std::vector<int64_t>> explicit_pads(const WindowGeometry& g,
                                             std::span<const DimExpr> input_spatial) {
  KILN_RETURN_IF_ERROR(check_spatial_count(g, input_spatial));
  size_t r = g.spatial_rank();
  if (g.auto_pad == AutoPad::kNotSet) return g.pads;
  std::vector<int64_t> pads(2 * r, 0);
  if (g.auto_pad == AutoPad::kValid) return pads;
  for (size_t i = 0; i < r; ++i) {
    const DimExpr& in = input_spatial[i];
    int64_t s = g.strides[i];
    DimExpr total =
        (in.ceil_div(s) - DimExpr(1)) * DimExpr(s) + DimExpr(g.effective_kernel(i)) - in;
    auto value = total.constant_value();
    if (!value) {
      return unimplemented(
          "attribute 'auto_pad' = {}: the padding of spatial dim {} depends on the value of "
          "symbolic dim '{}' (total pad {}); give explicit 'pads' or a static dim",
          auto_pad_name(g.auto_pad), i, in.to_string(), total.to_string());
    }
    int64_t t = std::max<int64_t>(0, *value);
    int64_t small = t / 2;
    int64_t large = t - small;
    pads[i] = g.auto_pad == AutoPad::kSameUpper ? small : large;
    pads[r + i] = g.auto_pad == AutoPad::kSameUpper ? large : small;
  }
  return pads;
}

int64_t ConcreteWindow::output_size(size_t i, int64_t in) const {
  const int64_t span = in + pads_begin[i] + pads_end[i] - effective_kernel(i);
  if (span < 0) return 0;
  const int64_t stride = strides[i];
  if (!ceil_mode) return span / stride + 1;
  const int64_t out = (span + stride - 1) / stride + 1;
  return (out - 1) * stride >= in + pads_begin[i] ? out - 1 : out;
}

StatusOr<ConcreteWindow> resolve_window(const WindowGeometry& g,
                                        std::span<const int64_t> input_spatial) {
  const Shape spatial =
      shape_from_concrete(ConcreteShape(input_spatial.begin(), input_spatial.end()));
  KILN_RETURN_IF_ERROR(window_output_dims(g, spatial).status());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, explicit_pads(g, spatial));
  const auto r = static_cast<ptrdiff_t>(g.spatial_rank());
  ConcreteWindow w{g.kernel,
                   g.strides,
                   g.dilations,
                   std::vector<int64_t>(pads.begin(), pads.begin() + r),
                   std::vector<int64_t>(pads.begin() + r, pads.end()),
                   g.ceil_mode && g.auto_pad == AutoPad::kNotSet};
  return w;
}

}  // namespace kiln::kernels
