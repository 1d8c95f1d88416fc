// Whether one oneDNN convolution over a whole batch gives each sample the bits the one-sample
// convolution gives it (docs/architecture.md invariant 4), found out by running both once.
//
// oneDNN's brgconv kernels (AVX-512) choose their blocking of output positions from the whole
// problem, and where an image has few positions a block may span images and sum in another order
// (a 3x3 conv with 3x4 outputs rounds sample 0 differently at batch 2 than alone, by up to 3e-4).
// Whether a given pair of primitives does so is a property of their shapes and this machine's
// kernels, not of the data: a kernel's order of operations never depends on the values. So the
// builder runs the batched primitive and the one-sample primitive, once, on the same random
// inputs (weights, bias, a residual when the sum post-op reads one, and distinct random samples),
// and takes the batched one only where every sample's output is bit for bit the one-sample
// output. Random values make sums in another order round differently, so a difference shows.
// Only a batched primitive whose layouts are the one-sample ones with a batch is tried (one
// buffer serves both runs, no reorder): the cost is one run of the dispatch at twice its work,
// when its plan is made.
#pragma once

#include <cstdint>

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/kernels/activation.h"

namespace kiln::hal::cpu {

// `single` and `batched`: the same convolution (attributes and post-ops included) at batch 1 and
// at `batch`; `has_bias` whether they take a bias. False also where they compute in another type
// than f32, their layouts differ beyond the batch, or running them fails. Runs on
// the calling thread's OpenMP team, as the dispatch's steps will.
bool batched_conv_matches_per_sample(const dnnl::engine& engine,
                                     const dnnl::convolution_forward::primitive_desc& single,
                                     const dnnl::convolution_forward::primitive_desc& batched,
                                     int64_t batch, bool has_bias);

// The same question across team sizes (docs/architecture.md invariant 8): whether `pd`, made
// under the calling thread's OpenMP team size, gives the bits `full` (the same convolution with
// the same layouts, made under `full_team` threads) gives, each run once on its own team size on
// the same random inputs. brgconv sizes its blocking from the team, and where a block covers
// few output positions the sums may run in another order. False also for data types other than
// f32 and where the layouts differ or running fails.
bool conv_gives_full_team_bits(const dnnl::engine& engine,
                               const dnnl::convolution_forward::primitive_desc& pd,
                               const dnnl::convolution_forward::primitive_desc& full, int full_team,
                               bool has_bias);

// The same question for a fused activation (finite_guard.h): whether `fused` (the convolution
// `plain` with `activation` appended to its post-ops, the same layouts) gives the bits `plain`
// followed by kiln's rule for `activation` gives, each run once on the same random inputs: that
// is, whether the primitive with the post-op sums in the plain one's order. With
// `residual_after_activation`, `plain` has no sum and `fused` ends with one (kiln's residual
// after the activation): `fused` on a destination holding a random residual against `plain`,
// the activation, then the residual added. False also for data types other than f32 and where
// the layouts differ or running fails.
bool fused_activation_matches(const dnnl::engine& engine,
                              const dnnl::convolution_forward::primitive_desc& plain,
                              const dnnl::convolution_forward::primitive_desc& fused, bool has_bias,
                              const kernels::FusedActivation& activation,
                              bool residual_after_activation = false);

}  // namespace kiln::hal::cpu
