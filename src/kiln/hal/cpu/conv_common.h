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

// A Conv dispatch as conv_op.cc reads it: the attributes as Conv's definition parses them, and
// which optional inputs it has.
struct ConvParams : kernels::ConvAttributes {
  bool has_bias = false;
  bool has_residual = false;
};

// The buffer a conv step writes its output to, in `layout`. With a residual (input 3) the buffer
// already holds it when the step runs, and the step adds to it: the output takes over the
// residual's bytes when nothing else reads them (ProgramBuilder::output_over), else the residual
// is copied in first. `suffix` describes the fused residual and activation for the step's label
// (" +residual(in place) +relu").
struct ConvDestination {
  BufferRef buffer;
  std::string suffix;
};
StatusOr<ConvDestination> conv_destination(ProgramBuilder& b, const ConvParams& p,
                                           const dnnl_desc& layout);

}  // namespace kiln::hal::cpu
