#include "kiln/hal/cpu/conv_common.h"

#include "kiln/hal/cpu/program_builder.h"

namespace kiln::hal::cpu {

StatusOr<ConvDestination> conv_destination(ProgramBuilder& b, const ConvParams& p,
                                           const dnnl_desc& layout) {
  const OpReader& op = b.op();
  const int32_t out = op.output_index(0), res = p.has_residual ? op.input_index(3) : -1;
  const bool in_place = p.has_residual && b.can_overwrite(res, out, layout);
  ConvDestination d;
  if (in_place) {
    KILN_ASSIGN_OR_RETURN(d.buffer, b.output_over(out, res, layout));
  } else {
    KILN_ASSIGN_OR_RETURN(d.buffer, b.output(out, layout));
    if (p.has_residual) b.add_reorder(BufferRef::of_value(res), b.layout(res), d.buffer, layout);
  }
  if (p.has_residual) d.suffix = in_place ? " +residual(in place)" : " +residual";
  if (p.activation.kind != kernels::FusedActivation::Kind::kNone) {
    d.suffix += " +" + kernels::describe(p.activation);
  }
  return d;
}

}  // namespace kiln::hal::cpu
