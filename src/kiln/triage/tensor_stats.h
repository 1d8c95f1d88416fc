// Summary statistics of one tensor, for trace summaries and triage reports: how many elements are
// NaN or infinite, and the min, max and mean of the finite ones.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/base/tensor.h"

namespace kiln::triage {

struct TensorStats {
  int64_t count = 0;
  int64_t nan = 0, inf = 0;
  // Over finite elements; 0 when there are none.
  double min = 0, max = 0, mean = 0;
  double max_abs = 0;

  int64_t nonfinite() const { return nan + inf; }
};

// Any dtype (bool counts as 0/1; f16 and bf16 widen exactly; i64/u64 beyond 2^53 round).
TensorStats compute_stats(const Tensor& tensor);

// "NaN 0/802816, Inf 0/802816, min -3.1, max 12.5, mean 0.42"
std::string format_stats(const TensorStats& stats);

}  // namespace kiln::triage
