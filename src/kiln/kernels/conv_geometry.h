// Window geometry shared by Conv, MaxPool and AveragePool: parsing of kernel_shape / strides /
// dilations / pads / auto_pad / ceil_mode, symbolic output spatial dims, and resolution of auto_pad
// into explicit pads.
//
// The compiler canonicalizes these nodes before handing them to a backend
// (passes::canonicalize_window_attributes, src/kiln/passes/canonical_windows.h) so that
// backends normally see auto_pad = NOTSET with explicit `pads`; the portable kernels accept
// auto_pad too.
//
// Output size per spatial dim i (in = input dim, k_eff = dilation * (kernel - 1) + 1):
//   NOTSET, floor mode: floor((in + pad_begin + pad_end - k_eff) / stride) + 1
//   NOTSET, ceil mode:  ceil((in + pad_begin + pad_end - k_eff) / stride) + 1
//   SAME_UPPER/LOWER:   ceil(in / stride)
//   VALID:              floor((in - k_eff) / stride) + 1
// ceil_mode only affects NOTSET. As in ONNX (reference implementation and ONNX Runtime) and
// PyTorch, a last ceil-mode window that would start in the end padding is dropped: the output is
// one less when (out - 1) * stride >= in + pad_begin. That can only happen when
// stride > k_eff - pad_end; in that case the size depends on the value of `in`, so a symbolic
// `in` is an Unimplemented error (never a size that is wrong for some values).
// SAME pads: total = max(0, (out - 1) * stride + k_eff - in); SAME_UPPER puts the extra odd pad at
// the end, SAME_LOWER at the beginning.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"
#include "kiln/shape/shape.h"

namespace kiln::kernels {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

// Largest kernel_shape, strides, dilations or pads value accepted: output-size arithmetic on any
// real dim cannot overflow below it. Larger values are an InvalidArgument naming the attribute.
inline constexpr int64_t kMaxWindowAttribute = 2147483647;

// Integer-list attribute `name` of exactly `size` values (`fallback` each when absent), every one
// in [min_value, kMaxWindowAttribute]; errors name the attribute.
StatusOr<std::vector<int64_t>> ints_of_size(const Attributes& attributes, const char* name,
                                            size_t size, int64_t fallback, int64_t min_value);

struct WindowGeometry {
  std::vector<int64_t> kernel;     // kernel extent per spatial dim, before dilation
  std::vector<int64_t> strides;    // >= 1
  std::vector<int64_t> dilations;  // >= 1
  // [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}], >= 0; all zero unless auto_pad is kNotSet.
  std::vector<int64_t> pads;
  AutoPad auto_pad = AutoPad::kNotSet;
  bool ceil_mode = false;

  size_t spatial_rank() const { return kernel.size(); }
  int64_t effective_kernel(size_t i) const { return dilations[i] * (kernel[i] - 1) + 1; }
};

struct WindowOptions {
  // Kernel dims from the weights (Conv); nullopt makes the kernel_shape attribute required.
  std::optional<std::vector<int64_t>> kernel_from_weights;
  bool allow_dilations = true;
  bool allow_ceil_mode = false;
};

// Parses the window attributes for `spatial_rank` dims. Errors name the attribute and say what
// was expected ("attribute 'strides' must have 2 values, got 3"). Non-zero `pads` together with
// an auto_pad other than NOTSET is an error.
StatusOr<WindowGeometry> parse_window_geometry(const Attributes& attributes, size_t spatial_rank,
                                               const WindowOptions& options);

// Output spatial dims for the input spatial dims (symbolic). Error when a dim that is constant
// gives an output size < 1 (the window does not fit), and Unimplemented for the ceil_mode case
// above.
StatusOr<Shape> window_output_dims(const WindowGeometry& geometry,
                                   std::span<const DimExpr> input_spatial);

// Explicit pads [begins..., ends...] equivalent to the geometry for these input spatial dims.
// For SAME_*, Unimplemented naming 'auto_pad' when the pads depend on a symbolic dim (they do
// not when the total pad is constant, e.g. stride 1).
StatusOr<std::vector<int64_t>> explicit_pads(const WindowGeometry& geometry,
                                             std::span<const DimExpr> input_spatial);

// A window for concrete input dims, as kernels and backends run it: auto_pad resolved into
// explicit pads by explicit_pads (the compiler's rule).
struct ConcreteWindow {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
  bool ceil_mode = false;

  size_t spatial_rank() const { return kernel.size(); }
  int64_t effective_kernel(size_t i) const { return dilations[i] * (kernel[i] - 1) + 1; }
  // Output size of spatial dim i for input size `in`: the concrete form of window_output_dims
  // (a ceil-mode window that would start in the end padding is dropped); 0 when the window does
  // not fit.
  int64_t output_size(size_t i, int64_t in) const;
};

// The geometry resolved for concrete input spatial dims; every output size is checked >= 1 (the
// error names the dim, as window_output_dims does).
StatusOr<ConcreteWindow> resolve_window(const WindowGeometry& geometry,
                                        std::span<const int64_t> input_spatial);

}  // namespace kiln::kernels
