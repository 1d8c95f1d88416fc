// Timing helpers of the side-by-side kernel benchmarks (gemm_kernel_bench, winograd_conv_bench,
// attention_bench): one call's wall time, the median of a run's times, and a reader that evicts
// the caches.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <omp.h>
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
// Every thread of the calling thread's OpenMP team reads all of it, each from its own starting
// point: each core's own caches lose their lines too (read on one thread, the other core's L2
// kept its part of the operands), and the team is awake when the timed run starts, as it is
// between a model's dispatches. (Read on one thread, the team's other threads fell asleep while it
// read: kiln's gemm on ResNet-50's 1x1 products at batch 1 then timed 0.04-0.06 ms slower, 15-25%
// of the product, from the wake-up alone; Zen 5, 2 threads.) With `enabled` false, evict() does
// nothing.
class CacheEvictor {
 public:
  explicit CacheEvictor(bool enabled)
      : junk_(enabled ? bytes_to_read() / sizeof(float) : 0, 1.0f) {}
  void evict() {
    const float* junk = junk_.data();
    const int64_t lines = static_cast<int64_t>(junk_.size() / 16);
    float sum = 0.0f;
#pragma omp parallel reduction(+ : sum)
    {
      const int64_t start = lines * omp_get_thread_num() / omp_get_num_threads();
      for (int64_t line = start; line < lines; ++line) sum += junk[line * 16];
      for (int64_t line = 0; line < start; ++line) sum += junk[line * 16];
    }
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
