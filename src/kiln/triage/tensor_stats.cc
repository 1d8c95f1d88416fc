#include "kiln/triage/tensor_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln::triage {

TensorStats compute_stats(const Tensor& tensor) {
  TensorStats stats;
  stats.count = tensor.element_count();
  if (tensor.empty_storage()) return stats;
  double sum = 0;
  int64_t finite = 0;
  auto add = [&](double x) {
    if (std::isnan(x)) {
      ++stats.nan;
    } else if (std::isinf(x)) {
      ++stats.inf;
    } else {
      stats.min = finite == 0 ? x : std::min(stats.min, x);
      stats.max = finite == 0 ? x : std::max(stats.max, x);
      sum += x;
      ++finite;
    }
  };
  // f32 is the common case by far; the generic path (f16 and bf16 included) reads through double
  // per element.
  if (tensor.dtype() == DType::kF32) {
    for (float x : tensor.values<float>()) add(x);
  } else {
    for (int64_t i = 0; i < stats.count; ++i) add(element_as_double(tensor, i));
  }
  if (finite > 0) stats.mean = sum / static_cast<double>(finite);
  stats.max_abs = std::max(std::abs(stats.min), std::abs(stats.max));
  return stats;
}

std::string format_stats(const TensorStats& stats) {
  return fmt::format("NaN {}/{}, Inf {}/{}, min {:.6g}, max {:.6g}, mean {:.6g}", stats.nan,
                     stats.count, stats.inf, stats.count, stats.min, stats.max, stats.mean);
}

}  // namespace kiln::triage
