// Resize's plan (kernels/resize.cc): the per-axis source taps that the definition's kernel
// computes at make() from the attributes, the dims and the constant scales/roi, exposed so that
// a backend (the Vulkan one: hal/vulkan/resize_ops.cc) runs exactly the same coordinate math.
// The output element at coordinates (o_0, ..., o_{r-1}) is the extrapolation value when any axis
// marks o_a outside; else for nearest x[sum_a offset_a[o_a]]; else, with the outer axes' taps
// expanded in axis order (offsets summed, weights multiplied left to right from 1, axis 0 most
// significant in the list), acc = sum over that list of w_i * (sum over the last axis's taps t of
// weight_t * x[off_i + offset_t]), every sum from 0 in tap order, in f32 for f32 data.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln::kernels {

// One axis's taps: for output index o, taps [o*taps, (o+1)*taps) of `offset` (input index times
// the axis's row-major stride) and `weight` (padding taps read the first tap with weight 0).
struct ResizeAxisTaps {
  int64_t taps = 1;
  std::vector<int64_t> offset;
  std::vector<double> weight;
  std::vector<float> weight_f;
  // tf_crop_and_resize: 1 where the coordinate falls outside the input (extrapolation_value).
  std::vector<uint8_t> outside;
};

enum class ResizeMode { kNearest, kLinear, kCubic };

struct ResizePlan {
  ResizeMode mode = ResizeMode::kNearest;
  double extrapolation = 0;
  std::vector<ResizeAxisTaps> axes;  // empty when the output has no element
};

// Input indices of Resize's optional operands.
inline constexpr size_t kResizeRoi = 1;
inline constexpr size_t kResizeScales = 2;

// The plan of a Resize from `in` to `out` dims. `scales` and `roi`: the values of those constant
// inputs, nullopt when absent or empty (roi is read for tf_crop_and_resize only). Errors: the
// attributes' (as the definition reports them), roi or scales of the wrong length.
StatusOr<ResizePlan> plan_resize(const Attributes& attributes, const ConcreteShape& in,
                                 const ConcreteShape& out,
                                 const std::optional<std::vector<double>>& scales,
                                 const std::optional<std::vector<double>>& roi);

}  // namespace kiln::kernels
