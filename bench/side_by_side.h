// Timing helpers of the side-by-side kernel benchmarks (gemm_kernel_bench, winograd_conv_bench):
// one call's wall time, the median of a run's times, and a reader that evicts the caches.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include <unistd.h>

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

// Reads twice the last-level cache, at least 64 MiB (the cache's size from sysconf, where the
// system tells it), so that the next timed run finds its operands in memory, as a model's layer
// finds weights larger than the caches: a fixed 64 MiB left most of them in a 260 MiB cache (an
// Intel Xeon VM), where BERT-base's 768 x 768 product at batch 1 took 0.50 ms against 0.59-0.60
// with 640 MiB read. Read, not written: no dirty lines to write back while the next run is timed.
// With `enabled` false, evict() does nothing.
class CacheEvictor {
 public:
  explicit CacheEvictor(bool enabled)
      : junk_(enabled ? bytes_to_read() / sizeof(float) : 0, 1.0f) {}
  void evict() {
    float sum = 0.0f;
    for (size_t i = 0; i < junk_.size(); i += 16) sum += junk_[i];
    sink_ = sink_ + sum;
  }
  // How the runs find the caches, for a benchmark's header: "flushed (520 MiB read)" or "kept".
  std::string between_runs() const {
    if (junk_.empty()) return "kept";
    return "flushed (" + std::to_string((junk_.size() * sizeof(float)) >> 20) + " MiB read)";
  }

 private:
  static size_t bytes_to_read() {
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return std::max<size_t>(size_t{64} << 20, llc > 0 ? 2 * static_cast<size_t>(llc) : 0);
  }

  std::vector<float> junk_;
  volatile float sink_ = 0.0f;
};

}  // namespace kiln::bench
