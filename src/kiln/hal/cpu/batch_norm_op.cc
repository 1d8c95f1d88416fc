// BatchNormalization (inference) on oneDNN batch_normalization_forward with global statistics and
// separate scale and shift; kiln_activation relu runs as kiln's ActivationStep right after, in
// place (oneDNN's fuse_norm_relu maps a NaN to 0: activation_step.h). Works on the input's layout,
// so it keeps a conv's blocked output blocked.
#include <fmt/format.h>

#include "kiln/hal/cpu/activation_step.h"

#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::cpu {
namespace {

struct BatchNormParams {
  float epsilon = 1e-5f;
  bool relu = false;
};

// What this fast path runs: f32, rank 2 to 5, per-channel parameters (spatial = 1). The
// definition has checked the rest (select_path).
StatusOr<BatchNormParams> read_batch_norm(const OpReader& op) {
  for (size_t i = 0; i < 5; ++i) KILN_RETURN_IF_ERROR(op.expect_input_dtype(i, DType::kF32));
  KILN_RETURN_IF_ERROR(op.expect_output_dtype(0, DType::kF32));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(0, 2, 5));
  KILN_ASSIGN_OR_RETURN(kernels::BatchNormAttributes a,
                        kernels::read_batch_norm_attributes(op.attributes()));
  if (!a.spatial) return unimplemented("spatial=0 (per-feature parameters) is not supported");
  return BatchNormParams{static_cast<float>(a.epsilon), a.relu};
}

}  // namespace

Status check_batch_norm(const OpReader& op) { return read_batch_norm(op).status(); }

Status build_batch_norm(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(BatchNormParams p, read_batch_norm(op));
  const int32_t x = op.input_index(0);
  const dnnl_desc src = b.layout(x);
  auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
               dnnl::normalization_flags::use_shift;
  dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, src, p.epsilon,
                                               flags);
  dnnl::batch_normalization_forward::primitive_desc pd(desc, b.attr(), b.engine());
  const dnnl_desc channel = plain_desc(op.input(1).shape);
  KILN_ASSIGN_OR_RETURN(BufferRef src_ref, b.input_as(x, src));
  KILN_ASSIGN_OR_RETURN(BufferRef scale, b.input_as(op.input_index(1), channel));
  KILN_ASSIGN_OR_RETURN(BufferRef shift, b.input_as(op.input_index(2), channel));
  KILN_ASSIGN_OR_RETURN(BufferRef mean, b.input_as(op.input_index(3), channel));
  KILN_ASSIGN_OR_RETURN(BufferRef var, b.input_as(op.input_index(4), channel));
  KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(op.output_index(0), pd.dst_desc()));
  PrimitiveStep& step = b.add_primitive(b.label(fmt::format("batch_norm {} {}{}", impl_name(pd),
                                                            describe(src), p.relu ? " +relu" : "")),
                                        pd, dnnl::batch_normalization_forward(pd));
  step.bind(DNNL_ARG_SRC, src, src_ref);
  step.bind(DNNL_ARG_SCALE, channel, scale);
  step.bind(DNNL_ARG_SHIFT, channel, shift);
  step.bind(DNNL_ARG_MEAN, channel, mean);
  step.bind(DNNL_ARG_VARIANCE, channel, var);
  step.bind(DNNL_ARG_DST, pd.dst_desc(), dst);
  if (p.relu) {
    add_activation(b, dst, pd.dst_desc(),
                   kernels::FusedActivation{kernels::FusedActivation::Kind::kRelu});
  }
  return ok_status();
}

}  // namespace kiln::hal::cpu
