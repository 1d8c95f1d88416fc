// Conv dispatches run by Winograd F(2x2, 3x3) or F(4x4, 3x3) (winograd_conv.h) instead of
// oneDNN's direct kernel: 3x3, stride 1, no dilation, one group, constant weights, channel counts
// the kernel takes, any fused activation (SiLU and Mish as kiln's ActivationStep after the step,
// and a residual after them as a step of its own), where oneDNN itself would run a direct kernel
// of the ISA kiln's kernels run here (cpu_isa.h best_isa: its AVX2 jit kernel on nChw8c or NHWC
// data; its AVX-512 jit or brgconv kernel on nChw16c or NHWC data), so the Winograd step reads and
// writes the layouts oneDNN's neighbours use and adds no reorder. The choice, and the tile edge
// (winograd::preferred_tile), depend on the dispatch's concrete per-sample shapes and the machine
// only (docs/architecture.md invariant 1); each output's arithmetic does not depend on the batch
// (invariant 4, see winograd_conv.h). An F(4x4) step checks its input on every run and runs a
// sample holding a value that is not finite, or too large for its sums, by F(2x2) instead
// (winograd_conv_op.cc): the plan holds both tile edges' weights.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/hal/cpu/conv_common.h"
#include "kiln/hal/cpu/winograd_conv.h"

namespace kiln::hal::cpu {

class ProgramBuilder;

// The one-sample shape and layout Winograd runs the dispatch being built with, or nullopt where
// it does not run it. `direct` is oneDNN's one-sample direct convolution for it.
std::optional<winograd::Conv3x3> winograd_shape(
    const ProgramBuilder& b, const ConvParams& params,
    const dnnl::convolution_forward::primitive_desc& direct);
// Whether `steps` (a dispatch's step descriptions) hold activations in a layout Winograd takes
// over on this machine (nChw8c on AVX2; nChw16c or NHWC on AVX-512): for tests that check where
// it runs.
bool winograd_layout_in(std::string_view steps);
// Appends the dispatch's steps for `shape` (from winograd_shape).
Status build_winograd_conv(ProgramBuilder& b, const ConvParams& params,
                           const winograd::Conv3x3& shape);

}  // namespace kiln::hal::cpu
