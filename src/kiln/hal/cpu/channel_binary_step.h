// y = x op s for an f32 x [N, C, ...] stored in a channels-last or plain layout (channel_runs.h),
// or a plain x [N, ..., C] whose channels are its last dim (runs of the channels-innermost order),
// and s holding one value per sample and channel ([N, C, 1, ...] or [1, C, 1, ...]: a
// squeeze-and-excitation block's scale, a per-channel bias), in x's layout. oneDNN's binary kernel
// for that broadcast next to a channels-last x is its generic one (EfficientNet-B0's 16 scales
// took ~0.29 ms at batch 1). One IEEE operation per element, so the result is the bits of any
// correct kernel for Add, Sub, Mul and Div; the work splits over the team in one piece a thread
// (for_each_channel_span). y may be x itself (each element is read before it is written): the
// builder writes over x where nothing reads it later.
#pragma once

#include <string>

#include "kiln/hal/cpu/channel_runs.h"
#include "kiln/hal/cpu/plain_kernels.h"
#include "kiln/hal/cpu/step.h"

namespace kiln::hal::cpu {

class ChannelBinaryStep : public Step {
 public:
  // `samples`: x's dim 0; `per_sample`: s has one row of C values per sample (else one row).
  ChannelBinaryStep(std::string label, BinaryOp op, ChannelRuns runs, int64_t samples,
                    bool per_sample, BufferRef x, BufferRef s, BufferRef y)
      : label_(std::move(label)),
        op_(op),
        runs_(runs),
        samples_(samples),
        per_sample_(per_sample),
        x_(x),
        s_(s),
        y_(y) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  BinaryOp op_;
  ChannelRuns runs_;
  int64_t samples_;
  bool per_sample_;
  BufferRef x_, s_, y_;
};

}  // namespace kiln::hal::cpu
