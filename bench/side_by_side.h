// Timing helpers of the side-by-side kernel benchmarks (gemm_kernel_bench, winograd_conv_bench):
// one call's wall time, the median of a run's times, and a reader that evicts the caches.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
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

// Reads 64 MiB (more than the last-level cache) so that the next timed run finds its operands in
// memory, as a model's layer finds its weights. Read, not written: no dirty lines to write back
// while the next run is timed. With `enabled` false, evict() does nothing.
class CacheEvictor {
 public:
  explicit CacheEvictor(bool enabled) : junk_(enabled ? size_t{16} << 20 : 0, 1.0f) {}
  void evict() {
    float sum = 0.0f;
    for (size_t i = 0; i < junk_.size(); i += 16) sum += junk_[i];
    sink_ = sink_ + sum;
  }

 private:
  std::vector<float> junk_;
  volatile float sink_ = 0.0f;
};

}  // namespace kiln::bench
