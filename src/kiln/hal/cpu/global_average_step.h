// GlobalAveragePool of an f32 X [N, C, spatial...] stored plain, channels last or blocked by
// channels (nChw8c, nChw16c), written plain [N, C, 1, ...]: kiln's own kernel, because oneDNN
// 2.6's pooling splits its work over samples and channel blocks only, so a global pool of one
// sample ran on one thread, reading from both cores the pixels the conv before it had written
// there (EfficientNet-B0 at batch 1: 47-50 us for 144x56x56 at 2 threads, 20 us on one thread,
// and the squeeze-and-excitation scale after it 4x slower for the moved lines).
//
// Each channel's pixels split into fixed chunks of chunk_pixels(C) pixels; a chunk's sum adds its
// pixels in order, the chunks' sums are added in chunk order, and the total is divided by the
// pixel count. That order depends only on C and the pixel count: every layout, batch size, team
// size and ISA gives the same bits (docs/architecture.md invariant 4). The jobs (sample, group of
// channels, chunk) run over the team; a group is the channels stored side by side (all of them
// channels last, a block when blocked, 16 runs of a plain layout, summed side by side). NaN and
// Inf propagate as IEEE sums do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/hal/cpu/step.h"

namespace kiln::hal::cpu {

// Where pixel p of channel c of sample n is, in floats: n * sample_stride + (c / group) *
// group_stride + (c % group) * channel_stride + p * pixel_stride.
struct PlaneWalk {
  int64_t samples = 0, channels = 0, pixels = 0;
  int64_t group = 1;
  int64_t sample_stride = 0, group_stride = 0, channel_stride = 0, pixel_stride = 0;
};

// The walk of an f32 layout of rank >= 3 whose spatial dims are stored in order and dense: plain,
// channels last, or one inner block of channels; nullopt for others.
std::optional<PlaneWalk> plane_walk(const dnnl_desc& layout);

class GlobalAverageStep : public Step {
 public:
  // Pixels per chunk for `channels` channels: about 16K floats.
  static int64_t chunk_pixels(int64_t channels);
  // Floats of the workspace the chunks' sums take.
  static int64_t partial_floats(const PlaneWalk& walk);

  // `partials`: a workspace of partial_floats(walk) floats.
  GlobalAverageStep(std::string label, PlaneWalk walk, BufferRef x, BufferRef partials, BufferRef y)
      : label_(std::move(label)), walk_(walk), x_(x), partials_(partials), y_(y) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  PlaneWalk walk_;
  BufferRef x_, partials_, y_;
};

}  // namespace kiln::hal::cpu
