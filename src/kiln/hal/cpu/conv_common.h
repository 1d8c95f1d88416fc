// What every Conv implementation of the CPU backend shares (conv_op.cc: oneDNN's direct
// convolution; winograd_conv_op.cc: kiln's Winograd kernel): the dispatch's parameters, and where
// the output goes when kiln's residual is fused.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/base/status.h"
#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/hal/cpu/op_params.h"
#include "kiln/hal/cpu/step.h"
#include "kiln/kernels/activation.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::cpu {

class ProgramBuilder;

// A Conv dispatch as conv_op.cc reads it: the attributes as Conv's definition parses them, which
// optional inputs it has, and the data type X, W, the residual and Y are stored in (f32, f16 or
// bf16; B too).
struct ConvParams : kernels::ConvAttributes {
  bool has_bias = false;
  bool has_residual = false;
  dnnl::memory::data_type data = dnnl::memory::data_type::f32;
  // kiln's residual, added before the activation (the sum post-op first, and a value the guard
  // of a fused activation must check).
  bool residual_before_activation() const { return has_residual && !residual_after_activation; }
};

// The buffer a conv step writes its output to, in the f32 layout `layout`. With a residual
// (input 3) the buffer already holds it when the step runs, and the step adds to it. For f32
// data the buffer is the output: it takes over the residual's bytes when nothing else reads them
// (ProgramBuilder::output_over), else the residual is copied in first. For f16 or bf16 data it is
// an f32 temporary (the residual converted into it), so the sums, the bias, the residual and the
// activation are rounded to the output's type once, by finish_conv. `suffix` describes the fused
// residual and activation for the step's label (" +residual(in place) +relu").
struct ConvDestination {
  BufferRef buffer;
  std::string suffix;
};
StatusOr<ConvDestination> conv_destination(ProgramBuilder& b, const ConvParams& p,
                                           const dnnl_desc& layout);
// The steps after the conv's: the fused activation on the destination (activation_step.h: kiln's
// relu, clip, leaky relu, SiLU and Mish, which keep NaN), then, for f16 or bf16 data, the
// conversion into the output (in `layout`'s blocking with the output's data type, or plain for a
// graph output).
Status finish_conv(ProgramBuilder& b, const ConvParams& p, const ConvDestination& d,
                   const dnnl_desc& layout);
// For a residual added after the activation (f32 only), where the conv's plain output went to
// `activated` and its activation ran there: adds it to the destination `into`, which holds the
// residual (oneDNN's binary add in place, in `layout`: residual + activated, the Add's bits).
void add_sum_into(ProgramBuilder& b, const BufferRef& activated, const BufferRef& into,
                  const dnnl_desc& layout);

}  // namespace kiln::hal::cpu
