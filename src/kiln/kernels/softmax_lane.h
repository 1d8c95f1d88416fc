// Softmax of one lane, as the reference and portable kernels compute it (Softmax and LogSoftmax's
// definitions, normalize.cc, and MatMul's fused kiln_softmax, linalg.cc): in double, the maximum
// first (a NaN once seen stays the maximum, so a lane with a NaN is NaN throughout), then the sum
// of exp(x - max) in index order, then each exp(x - max) / sum. `value(k)` reads element k as a
// double; `put(k, r)` stores result r for element k (rounding it to the storage type once).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln::kernels {

struct SoftmaxStats {
  double max = 0, sum = 0;  // the lane's maximum and the sum of exp(x - max)
};

template <typename Value>
SoftmaxStats softmax_stats(int64_t n, Value value) {
  SoftmaxStats s{-std::numeric_limits<double>::infinity(), 0.0};
  for (int64_t k = 0; k < n; ++k) {
    const double c = value(k);
    if (c > s.max || std::isnan(c)) s.max = c;
  }
  for (int64_t k = 0; k < n; ++k) s.sum += std::exp(value(k) - s.max);
  return s;
}

template <typename Value, typename Put>
void softmax_lane(int64_t n, Value value, Put put) {
  const SoftmaxStats s = softmax_stats(n, value);
  for (int64_t k = 0; k < n; ++k) put(k, std::exp(value(k) - s.max) / s.sum);
}

}  // namespace kiln::kernels
