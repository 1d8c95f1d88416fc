// How the elements of an f32 value of rank >= 2 with channels at dim 1 ([N, C, ...]) meet their
// channels in a layout: the per-channel kernels (batch_norm_step.h, channel_binary_step.h) walk
// rows of consecutive channels (channels-last) or runs of one channel (plain), and leave other
// layouts to oneDNN.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/hal/cpu/parallel_pieces.h"

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

// Walks the elements [0, runs.runs * runs.run) in one piece a thread (parallel_pieces.h),
// calling span(first, count, run, within) for each part of a piece that stays inside one run:
// elements [first, first + count) of run `run`, starting `within` floats into it (so one channel
// in the outer order, consecutive channels from `within` in the innermost one). The per-channel
// kernels compute each element alone, so the split changes no bits.
template <typename Span>
void for_each_channel_span(const ChannelRuns& runs, Span&& span) {
  const int64_t run = runs.run;
  parallel_pieces(runs.runs * run, [&](int64_t begin, int64_t count) {
    const int64_t end = begin + count;
    for (int64_t i = begin; i < end;) {
      const int64_t within = i % run, part = std::min(end - i, run - within);
      span(i, part, i / run, within);
      i += part;
    }
  });
}

}  // namespace kiln::hal::cpu
