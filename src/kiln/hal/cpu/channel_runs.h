// How the elements of an f32 value of rank >= 2 with channels at dim 1 ([N, C, ...]) meet their
// channels in a layout: the per-channel kernels (batch_norm_step.h, channel_binary_step.h) walk
// rows of consecutive channels (channels-last) or runs of one channel (plain), and leave other
// layouts to oneDNN.
#pragma once

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

}  // namespace kiln::hal::cpu
