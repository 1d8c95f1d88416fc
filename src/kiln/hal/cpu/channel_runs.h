// How the elements of an f32 value of rank >= 2 with channels at dim 1 ([N, C, ...]) meet their
// channels in a layout: the per-channel kernels (batch_norm_step.h, channel_binary_step.h) walk
// rows of consecutive channels (channels-last) or runs of one channel (plain), and leave other
// layouts to oneDNN.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "kiln/hal/cpu/dnnl_util.h"

namespace kiln::hal::cpu {

// How X's elements meet their channels in memory.
struct ChannelRuns {
  enum class Order : uint8_t {
    kChannelInnermost,  // rows of `channels` consecutive floats, channel j at row[j]
    kChannelOuter,      // runs of `run` floats of one channel; run r belongs to channel r % C
  };
  Order order = Order::kChannelInnermost;
  int64_t channels = 0;
  int64_t runs = 0;  // rows (kChannelInnermost) or runs (kChannelOuter)
  int64_t run = 0;   // floats per run (kChannelOuter); `channels` for kChannelInnermost
};

// The channel runs of an f32 value of rank >= 2 stored in `layout` (dim 1 = channels), or
// nullopt where the layout is none of the two orders above. In either order the samples (dim 0)
// are outermost: sample n holds runs [n * runs / N, (n + 1) * runs / N).
std::optional<ChannelRuns> channel_runs(const dnnl_desc& layout);

// Splits the elements [0, runs.runs * runs.run) over the OpenMP team: one contiguous piece per
// thread, of equal sizes (in whole vectors of 16 floats), fewer pieces where the value has fewer
// than `min_piece` floats a thread; calls span(first, count, run, within) for each part of a piece
// that stays inside one run: elements [first, first + count) of run `run`, starting `within`
// floats into it (so one channel in the outer order, consecutive channels from `within` in the
// innermost one). The per-channel kernels compute each element alone, so the split changes no
// bits. (Fixed jobs of 16384 floats handed out statically gave a ResNet-50 v2 14x14 stage's
// 200704-float BatchNormalization 7 jobs on one core and 6 on the other; equal halves took it from
// 75 to 66 us, Zen 5, 2 threads.)
template <typename Span>
void for_each_channel_span(const ChannelRuns& runs, int64_t min_piece, Span&& span) {
  constexpr int64_t kVector = 16;
  const int64_t run = runs.run, total = runs.runs * run;
  const int64_t pieces =
      std::clamp<int64_t>(total / std::max<int64_t>(min_piece, 1), 1, omp_get_max_threads());
  auto bound = [&](int64_t j) {
    return j == pieces ? total : total * j / pieces / kVector * kVector;
  };
#pragma omp parallel for schedule(static) if (pieces > 1)
  for (int64_t j = 0; j < pieces; ++j) {
    const int64_t end = bound(j + 1);
    for (int64_t i = bound(j); i < end;) {
      const int64_t within = i % run, count = std::min(end - i, run - within);
      span(i, count, i / run, within);
      i += count;
    }
  }
}

}  // namespace kiln::hal::cpu
