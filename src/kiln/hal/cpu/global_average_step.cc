#include "kiln/hal/cpu/global_average_step.h"

#include <algorithm>
#include <array>

#include "kiln/hal/cpu/cpu_isa.h"

namespace kiln::hal::cpu {
namespace {

constexpr int64_t kChunkFloats = 16384;  // about one chunk of pixels, channels last
constexpr int kLanes = 16;               // interleaved partial sums of a plain run

// acc[c] += row[c] for each of `channels` channels of `pixels` rows `channels` apart, pixel after
// pixel: one lane per channel, which the compiler vectorizes across channels for the function's
// target without reordering any lane's sum.
inline __attribute__((always_inline)) void sum_rows(const float* x, int64_t pixels,
                                                    int64_t channels, float* acc) {
  std::fill(acc, acc + channels, 0.0f);
  for (int64_t p = 0; p < pixels; ++p) {
    const float* row = x + p * channels;
    for (int64_t c = 0; c < channels; ++c) acc[c] += row[c];
  }
}

// The sum of one run of n floats: element i into partial i % kLanes, in order, then the partials
// added in lane order.
inline __attribute__((always_inline)) float sum_run(const float* x, int64_t n) {
  std::array<float, kLanes> lanes{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += x[i + j];
  }
  for (int j = 0; i + j < n; ++j) lanes[j] += x[i + j];
  float total = 0.0f;
  for (int j = 0; j < kLanes; ++j) total += lanes[j];
  return total;
}

__attribute__((target("avx512f,avx2"))) void sum_rows_avx512(const float* x, int64_t pixels,
                                                             int64_t channels, float* acc) {
  sum_rows(x, pixels, channels, acc);
}
__attribute__((target("avx2"))) void sum_rows_avx2(const float* x, int64_t pixels, int64_t channels,
                                                   float* acc) {
  sum_rows(x, pixels, channels, acc);
}
__attribute__((target("avx512f,avx2"))) float sum_run_avx512(const float* x, int64_t n) {
  return sum_run(x, n);
}
__attribute__((target("avx2"))) float sum_run_avx2(const float* x, int64_t n) {
  return sum_run(x, n);
}

}  // namespace

int64_t GlobalAverageStep::chunk_pixels(int64_t channels) {
  return std::max<int64_t>(1, kChunkFloats / std::max<int64_t>(1, channels));
}

int64_t GlobalAverageStep::partial_floats(const ChannelRuns& runs, int64_t samples) {
  if (runs.order != ChannelRuns::Order::kChannelInnermost || samples <= 0) return 0;
  const int64_t pixels = runs.runs / samples, chunk = chunk_pixels(runs.channels);
  return samples * ((pixels + chunk - 1) / chunk) * runs.channels;
}

Status GlobalAverageStep::run(const ExecContext& ctx) {
  const auto* x = reinterpret_cast<const float*>(ctx.resolve(x_));
  auto* y = reinterpret_cast<float*>(ctx.resolve(y_));
  static const Isa isa = best_isa();
  const int64_t channels = runs_.channels;
  if (samples_ <= 0 || channels <= 0) return ok_status();
  if (runs_.order == ChannelRuns::Order::kChannelOuter) {
    // runs_.runs = N * C runs of runs_.run pixels each, in [n][c] order: y's order.
    const int64_t n = runs_.run, count = runs_.runs;
    auto sum = isa == Isa::kAvx512 ? sum_run_avx512 : sum_run_avx2;
    const float divisor = static_cast<float>(n);
#pragma omp parallel for schedule(static) if (count * n > kChunkFloats)
    for (int64_t r = 0; r < count; ++r) y[r] = sum(x + r * n, n) / divisor;
    return ok_status();
  }
  const int64_t pixels = runs_.runs / samples_, chunk = chunk_pixels(channels);
  const int64_t chunks = (pixels + chunk - 1) / chunk, jobs = samples_ * chunks;
  auto* partials = reinterpret_cast<float*>(ctx.resolve(partials_));
  auto rows = isa == Isa::kAvx512 ? sum_rows_avx512 : sum_rows_avx2;
#pragma omp parallel for schedule(static) if (jobs > 1)
  for (int64_t j = 0; j < jobs; ++j) {
    const int64_t n = j / chunks, first = j % chunks * chunk;
    rows(x + (n * pixels + first) * channels, std::min(chunk, pixels - first), channels,
         partials + j * channels);
  }
  const float divisor = static_cast<float>(pixels);
  for (int64_t n = 0; n < samples_; ++n) {
    const float* first = partials + n * chunks * channels;
    float* out = y + n * channels;
    std::copy(first, first + channels, out);
    for (int64_t k = 1; k < chunks; ++k) {
      const float* part = first + k * channels;
      for (int64_t c = 0; c < channels; ++c) out[c] += part[c];
    }
    for (int64_t c = 0; c < channels; ++c) out[c] /= divisor;
  }
  return ok_status();
}

}  // namespace kiln::hal::cpu
