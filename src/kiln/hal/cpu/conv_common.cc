#include "kiln/hal/cpu/conv_common.h"

#include <fmt/format.h>

#include "kiln/hal/cpu/activation_step.h"
#include "kiln/hal/cpu/program_builder.h"

namespace kiln::hal::cpu {

StatusOr<ConvDestination> conv_destination(ProgramBuilder& b, const ConvParams& p,
                                           const dnnl_desc& layout) {
  const OpReader& op = b.op();
  const int32_t out = op.output_index(0), res = p.has_residual ? op.input_index(3) : -1;
  const bool in_place =
      p.has_residual && p.data == dnnl::memory::data_type::f32 && b.can_overwrite(res, out, layout);
  ConvDestination d;
  if (p.data != dnnl::memory::data_type::f32) {
    d.buffer = b.temp(layout.get_size());
    if (p.has_residual) b.add_reorder(BufferRef::of_value(res), b.layout(res), d.buffer, layout);
  } else if (in_place) {
    KILN_ASSIGN_OR_RETURN(d.buffer, b.output_over(out, res, layout));
  } else {
    KILN_ASSIGN_OR_RETURN(d.buffer, b.output(out, layout));
    if (p.has_residual) b.add_reorder(BufferRef::of_value(res), b.layout(res), d.buffer, layout);
  }
  const std::string residual = !p.has_residual ? ""
                               : in_place      ? " +residual(in place)"
                                               : " +residual";
  const std::string activation = p.activation.kind == kernels::FusedActivation::Kind::kNone
                                     ? ""
                                     : " +" + kernels::describe(p.activation);
  d.suffix = p.residual_after_activation ? activation + residual : residual + activation;
  return d;
}

Status finish_conv(ProgramBuilder& b, const ConvParams& p, const ConvDestination& d,
                   const dnnl_desc& layout) {
  add_activation(b, d.buffer, layout, p.activation);
  if (p.data == dnnl::memory::data_type::f32) return ok_status();
  const int32_t out = b.op().output_index(0);
  const dnnl_desc stored = b.requires_plain(out) ? plain_desc(b.value(out).shape, p.data)
                                                 : with_data_type(layout, p.data);
  KILN_ASSIGN_OR_RETURN(BufferRef y, b.output(out, stored));
  b.add_reorder(d.buffer, layout, y, stored);
  return ok_status();
}

void add_sum_into(ProgramBuilder& b, const BufferRef& activated, const BufferRef& into,
                  const dnnl_desc& layout) {
  dnnl::binary::desc desc(dnnl::algorithm::binary_add, layout, layout, layout);
  dnnl::binary::primitive_desc pd(desc, b.attr(), b.engine());
  PrimitiveStep& step =
      b.add_primitive(b.label(fmt::format("binary {} {} +residual (after the activation)",
                                          impl_name(pd), describe(layout))),
                      pd, dnnl::binary(pd));
  step.bind(DNNL_ARG_SRC_0, layout, into);
  step.bind(DNNL_ARG_SRC_1, layout, activated);
  step.bind(DNNL_ARG_DST, layout, into);
}

}  // namespace kiln::hal::cpu
