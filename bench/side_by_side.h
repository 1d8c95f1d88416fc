// Timing helpers of the side-by-side kernel benchmarks (gemm_kernel_bench, winograd_conv_bench):
// one call's wall time, and the median of a run's times.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace kiln::bench {

// The median of `v` (the upper one of an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Milliseconds `f()` takes.
template <class F>
double time_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace kiln::bench
