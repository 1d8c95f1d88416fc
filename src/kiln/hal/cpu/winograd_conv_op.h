// Conv dispatches run by Winograd F(2x2, 3x3) (winograd_conv.h) instead of oneDNN's direct
// kernel: 3x3, stride 1, no dilation, one group, constant weights, channel counts the kernel
// takes, an activation other than SiLU, on a machine where oneDNN itself would run its AVX2 kernel on nChw8c data. The choice
// depends on the dispatch's concrete shapes and the machine only (docs/architecture.md invariant
// 1); each output's arithmetic does not depend on the batch (invariant 4, see winograd_conv.h).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/base/status.h"
#include "kiln/hal/cpu/conv_common.h"

namespace kiln::hal::cpu {

class ProgramBuilder;

// Whether the dispatch being built runs by Winograd. `direct` is oneDNN's one-sample direct
// convolution for it: Winograd takes over only where that is the AVX2 kernel on nChw8c data.
bool winograd_applies(const ProgramBuilder& b, const ConvParams& params,
                      const dnnl::convolution_forward::primitive_desc& direct);
// Appends the dispatch's steps (winograd_applies must hold).
Status build_winograd_conv(ProgramBuilder& b, const ConvParams& params);

}  // namespace kiln::hal::cpu
