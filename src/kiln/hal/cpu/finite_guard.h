// A conv's relu or clip inside oneDNN's primitive (an eltwise post-op) wherever its inputs show
// that no pre-activation value can be NaN, kiln's ActivationStep after the plain primitive
// elsewhere (docs/architecture.md, "NaN and the fused activation").
//
// oneDNN 2.6 computes relu and clip as max(x, bound): a NaN comes out as the bound
// (activation_step.h). kiln therefore applies them itself, in a pass after the conv, and that
// pass costs: MobileNetV2 at batch 1 on 2 threads ran 10-17% faster with its 35 passes left out,
// each pass pulling the lines the other core's part of the conv wrote. But a conv's pre-activation
// value is NaN only where an input or weight is NaN or infinite, or where a sum overflows. The
// weights and bias are constants, checked once when the plan is made; so the step checks the
// conv's input (and the residual the sum post-op adds) on every run: when each value is finite
// and small enough that no partial sum can overflow (conv_input_bound), the primitive with the
// post-op runs; otherwise the plain primitive and kiln's pass. For every element that is not
// NaN before the activation, the two give the same bits (max and min are exact; the builder
// checks that the primitive with the post-op sums as the plain one does, conv_batch_probe.h), so
// which path ran never shows in the output: a NaN in one sample leaves every other sample's bits
// as they are.
//
// The check is one vectorized read of the input. The builder uses the guard only where that read
// is no larger than the output (an expanding 1x1 conv reads a sixth of what it writes; a depthwise
// conv reads what it writes, where the pass would read and write it), or where the input's
// producer vouches for it: a guarded clip whose fused path ran marks its output as within its
// bounds (ProgramBuilder::vouch), and the check then needs no read. A guarded relu vouches with
// kGuardedSumBound; oneDNN's f32 max pool guards its NaN passes the same way (pool_op.cc); kiln's
// own max pool (max_pool_step.h) and BatchNormalization check what they write as they write it
// and vouch, the latter with kNormalizedBound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/tensor.h"
#include "kiln/hal/cpu/step.h"

namespace kiln::hal::cpu {

// A buffer the guard reads: `count` floats, each of which must be finite with |x| <= bound. When
// `vouched_by` names a value that ExecContext::vouched marks in this run, the check holds without
// the read: the builder sets it only where that value's producer guarantees the bound.
struct FiniteBound {
  BufferRef buffer;
  size_t count = 0;
  float bound = 0.0f;
  int32_t vouched_by = -1;
};

// The largest magnitude a residual added by the sum post-op may have: 2^120.
inline constexpr float kResidualBound = 0x1p120f;
// A bound on every sum of a conv whose checks held (bias and residual included): 2^123, above the
// 2^122 conv_input_bound keeps each sum below, so also on a relu of it.
inline constexpr float kGuardedSumBound = 0x1p123f;
// The bound kiln's BatchNormalization checks its output against and vouches with
// (batch_norm_step.h): 2^64, far above any activation a model computes, and within
// conv_input_bound for every conv whose per-channel sums of |w| stay below 2^56.
inline constexpr float kNormalizedBound = 0x1p64f;

// Whether each of the `count` floats at `x` is finite with |x| <= bound (false for NaN and
// infinities whatever the bound). Splits the read over the calling thread's OpenMP team.
bool all_within(const float* x, int64_t count, float bound);

// The bound on a conv's inputs under which no partial sum of an output (in any order, bias and a
// residual within kResidualBound included) can overflow: 2^120 / max over output channels of
// sum |w|, so each sum stays below 2^122 even with rounding. nullopt (no fused activation) when a
// weight or bias is not finite, a bias is -0 (oneDNN's relu and clip give +0 for a -0 sum where
// kiln's rule keeps -0; a sum starts from +0 otherwise, so it is -0 only through a -0 bias) or
// larger than 2^120. `weights`: f32 [out_channels, ...] row-major; `bias`: f32 or null.
std::optional<float> conv_input_bound(const Tensor& weights, const Tensor* bias);

// Runs `fused` when every check holds, else `fallback`: the steps of one dispatch that compute
// the same bits wherever the checks hold (see the header comment). `otherwise` names the fallback
// for describe(). With `vouches` >= 0 the step marks that value in ExecContext::vouched when the
// fused path ran, and clears the mark when the fallback ran: a clip's output then holds values
// within its bounds only, which spares the next guarded conv its read (ProgramBuilder::vouch).
class GuardedStep : public Step {
 public:
  GuardedStep(std::vector<FiniteBound> checks, std::vector<std::unique_ptr<Step>> fused,
              std::vector<std::unique_ptr<Step>> fallback, std::string otherwise,
              int32_t vouches = -1);
  Status run(const ExecContext& ctx) override;
  // The fused path's first step, then ", else " and `otherwise`.
  std::string describe() const override;
  bool same_bits_at_any_team_size() const override;
  size_t primitive_count() const override;

 private:
  bool checks_hold(const ExecContext& ctx) const;

  std::vector<FiniteBound> checks_;
  std::vector<std::unique_ptr<Step>> fused_, fallback_;
  std::string otherwise_;
  int32_t vouches_;
};

}  // namespace kiln::hal::cpu
