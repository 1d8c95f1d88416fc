// Which oneDNN convs run their activation as a guarded post-op (finite_guard.h), and what the
// guard checks: the conv builder's side of finite_guard.h.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/hal/cpu/conv_common.h"
#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/kernels/activation.h"

namespace kiln::hal::cpu {

class ProgramBuilder;

// Appends the eltwise post-op computing `a` as kiln's rule (kernels/activation.h) does for every
// value but NaN and -0, which a guarded conv never makes: relu; clip between bounds that hold 0,
// neither of them -0 (max(+0, -0) gives -0 where kiln's rule keeps +0); leaky relu with alpha > 0
// (oneDNN's blend of x and alpha x keeps NaN and the sign of 0). False, appending nothing, for
// the others.
bool append_activation_post_op(dnnl::post_ops& ops, const kernels::FusedActivation& a);

// How a guarded conv checks its input: against `bound` (conv_input_bound), and without reading it
// in a run where value `vouched_by` is marked (ProgramBuilder::vouch).
struct InputGuard {
  float bound;
  int32_t vouched_by;
};

// The input guard of the conv being built (`src_layout` and `dst_layout` with the batch), when its
// activation may run inside the primitive: f32 data, an activation append_activation_post_op
// takes, constant weights and a constant bias (without a bias a sum of -0 products may be -0),
// and what the check reads no larger than the output. The check reads the input unless its
// producer vouches for it within the bound, and a residual added before the activation always: a
// conv that shrinks its input, or adds such a residual to an output no larger than its input
// (ResNet's last 1x1 conv of a block, no faster fused), keeps kiln's pass, which reads and writes
// the output. A residual added after the activation needs no check (its sum keeps a NaN).
std::optional<InputGuard> input_guard(const ProgramBuilder& b, const ConvParams& p,
                                      const dnnl_desc& src_layout, const dnnl_desc& dst_layout);

// The bound a guarded conv's output keeps when its fused path ran: a clip's larger bound in
// magnitude, where both are finite; for relu, kGuardedSumBound (finite_guard.h: no pre-activation
// sum of a guarded conv reaches it), which a max pool reading it needs (pool_op.cc) and only a
// conv with tiny weights can use; nullopt for leaky relu.
std::optional<float> output_bound(const kernels::FusedActivation& a);

}  // namespace kiln::hal::cpu
