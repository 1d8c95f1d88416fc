// kiln's own f32 BatchNormalization (inference) for the CPU backend: one pass over X that
// normalizes and, with kiln_activation relu, applies ReLU keeping NaN (activation_step.h), in the
// layout X already has.
//
// Each element is computed by one fixed sequence: a[c] = scale[c] / sqrt(var[c] + epsilon) (once
// per run and channel, in float), then y = fma(x - mean[c], a[c], shift[c]), then ReLU as
// max(0, y) with the bound first, so a NaN stays NaN and -0 stays -0 (FusedActivation::apply bit
// for bit). The AVX2 lanes and the scalar tail give the same bits, and each element is computed
// alone (the work splits over the OpenMP team in one piece a thread, for_each_channel_span), so a
// value depends neither on the thread count, the ISA, the batch size nor the element's position:
// batch invariance and dynamic == bound hold by construction.
// Non-finite inputs follow IEEE arithmetic (inf - mean stays inf; a NaN parameter makes its
// channel NaN), as the definition does.
//
// Vouching (finite_guard.h): built with `vouches` >= 0 (the value Y is), the step also checks each
// element it writes, in registers as it writes it, and marks Y in ExecContext::vouched when every
// one is finite with |y| <= kNormalizedBound, clearing the mark otherwise. A conv reading Y then
// fuses its activation without reading Y again (a ResNet v2 block's 1x1 conv after its
// pre-activation BatchNormalization + ReLU reads four times what it writes, too much to check).
//
// It serves the layouts a CPU dispatch hands BatchNormalization in practice: any dense layout
// where the channel dim is innermost (channels-last, e.g. acdb after a convolution, or [N, C]),
// and the ones where each (sample, channel) is one contiguous run of the remaining dims (plain
// NCHW). Blocked layouts (nChw16c), padded layouts and other permutations keep oneDNN's kernel
// (batch_norm_op.cc).
#pragma once

#include <cstdint>
#include <string>

#include "kiln/hal/cpu/channel_runs.h"
#include "kiln/hal/cpu/finite_guard.h"
#include "kiln/hal/cpu/step.h"

namespace kiln::hal::cpu {

// Y = BatchNormalization(X) (+ ReLU) over one value of `runs` shape; X and Y may be the same
// buffer. `coefficients` is workspace for `runs.channels` floats.
class BatchNormStep : public Step {
 public:
  struct Operands {
    BufferRef x, scale, shift, mean, var, y, coefficients;
  };
  BatchNormStep(std::string label, ChannelRuns runs, float epsilon, bool relu, Operands operands,
                int32_t vouches = -1)
      : label_(std::move(label)),
        runs_(runs),
        epsilon_(epsilon),
        relu_(relu),
        ops_(operands),
        vouches_(vouches) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  ChannelRuns runs_;
  float epsilon_;
  bool relu_;
  Operands ops_;
  int32_t vouches_;
};

}  // namespace kiln::hal::cpu
