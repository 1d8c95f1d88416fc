// GlobalAveragePool on an f32 X [N, C, spatial...] stored with channel runs (channel_runs.h:
// channels last, or plain), written plain [N, C, 1, ...]: kiln's own kernel, because oneDNN 2.6's
// pooling splits its work over samples and channel blocks only, so a global pool of one sample
// ran on one thread, reading from both cores the pixels the conv before it had written there
// (EfficientNet-B0 at batch 1: 47-50 us for 144x56x56 at 2 threads, 20 us on one thread).
//
// Channels last: the pixels of a sample split into fixed chunks of about 16K floats; each chunk's
// per-channel sums (pixel after pixel, one lane per channel) are independent jobs over the team,
// and the chunks' sums are then added in chunk order and divided by the pixel count. Plain: each
// channel's run of pixels is one job, summed in 16 interleaved partial sums (element i into
// partial i % 16, each in order), the partials added in order, then divided. Either way every
// result depends only on its sample's values and the shape, never on the batch size, the team
// size or the ISA (docs/architecture.md invariant 4). NaN and Inf propagate as IEEE sums do.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/hal/cpu/channel_runs.h"
#include "kiln/hal/cpu/step.h"

namespace kiln::hal::cpu {

class GlobalAverageStep : public Step {
 public:
  // Pixels per chunk for `channels` channels (channels last): the chunks' partial sums take
  // `samples` * chunk_count * channels floats of `partials`.
  static int64_t chunk_pixels(int64_t channels);
  static int64_t partial_floats(const ChannelRuns& runs, int64_t samples);

  // `samples`: X's dim 0. `partials`: workspace of partial_floats() floats.
  GlobalAverageStep(std::string label, ChannelRuns runs, int64_t samples, BufferRef x,
                    BufferRef partials, BufferRef y)
      : label_(std::move(label)),
        runs_(runs),
        samples_(samples),
        x_(x),
        partials_(partials),
        y_(y) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  ChannelRuns runs_;
  int64_t samples_;
  BufferRef x_, partials_, y_;
};

}  // namespace kiln::hal::cpu
