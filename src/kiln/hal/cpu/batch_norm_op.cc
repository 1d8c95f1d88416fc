// BatchNormalization (inference). f32 X in a channels-last or plain layout runs on kiln's own
// one-pass kernel (batch_norm_step.h), ReLU included. Otherwise oneDNN's
// batch_normalization_forward with global statistics and separate scale and shift; kiln_activation
// relu then runs as kiln's ActivationStep right after, in place (oneDNN's fuse_norm_relu maps a
// NaN to 0: activation_step.h). Either way the op works on the input's layout, so it keeps a
// conv's output layout. f16 and bf16 X normalize in f32 between conversions (in X's layout),
// rounding once as the portable kernel does; the parameters, of any of these types, are read as
// f32. kiln's kernel vouches for its output (finite_guard.h).
#include <fmt/format.h>

#include "kiln/hal/cpu/activation_step.h"
#include "kiln/hal/cpu/batch_norm_step.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::cpu {
namespace {

struct BatchNormParams {
  float epsilon = 1e-5f;
  bool relu = false;
  dnnl::memory::data_type data = dnnl::memory::data_type::f32;  // X and Y as stored
};

// What this fast path runs: f32, f16 or bf16 (parameters too), rank 2 to 5, per-channel
// parameters (spatial = 1). The definition has checked the rest (select_path).
StatusOr<BatchNormParams> read_batch_norm(const OpReader& op) {
  for (size_t i = 0; i < 5; ++i) {
    if (!stored_data_type(op.input(i).dtype)) {
      return unimplemented("input {} '{}' must be f32, f16 or bf16, got {}", i, op.input(i).name,
                           dtype_name(op.input(i).dtype));
    }
  }
  KILN_RETURN_IF_ERROR(op.expect_output_dtype(0, op.input(0).dtype));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(0, 2, 5));
  KILN_ASSIGN_OR_RETURN(kernels::BatchNormAttributes a,
                        kernels::read_batch_norm_attributes(op.attributes()));
  if (!a.spatial) return unimplemented("spatial=0 (per-feature parameters) is not supported");
  return BatchNormParams{static_cast<float>(a.epsilon), a.relu,
                         *stored_data_type(op.input(0).dtype)};
}

}  // namespace

Status check_batch_norm(const OpReader& op) { return read_batch_norm(op).status(); }

Status build_batch_norm(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(BatchNormParams p, read_batch_norm(op));
  const int32_t x = op.input_index(0);
  const bool f32 = p.data == dnnl::memory::data_type::f32;
  const dnnl_desc src = with_data_type(b.layout(x), dnnl::memory::data_type::f32);
  const dnnl_desc channel = plain_desc(op.input(1).shape);
  if (const std::optional<ChannelRuns> runs = f32 ? channel_runs(src) : std::nullopt) {
    BatchNormStep::Operands o;
    KILN_ASSIGN_OR_RETURN(o.x, b.input_as(x, src));
    KILN_ASSIGN_OR_RETURN(o.scale, b.input_as(op.input_index(1), channel));
    KILN_ASSIGN_OR_RETURN(o.shift, b.input_as(op.input_index(2), channel));
    KILN_ASSIGN_OR_RETURN(o.mean, b.input_as(op.input_index(3), channel));
    KILN_ASSIGN_OR_RETURN(o.var, b.input_as(op.input_index(4), channel));
    // Over x's bytes where nothing reads x later (output_over_if_free).
    bool in_place = false;
    KILN_ASSIGN_OR_RETURN(o.y, b.output_over_if_free(op.output_index(0), x, src, in_place));
    o.coefficients = b.temp(static_cast<size_t>(runs->channels) * sizeof(float));
    // The step checks what it writes and vouches for it (finite_guard.h): a conv after it fuses
    // its activation without reading its input first.
    const int32_t y = op.output_index(0);
    b.add(std::make_unique<BatchNormStep>(
        b.label(fmt::format("batch_norm kiln {}{}{}", describe(src), p.relu ? " +relu" : "",
                            in_place ? " (in place)" : "")),
        *runs, p.epsilon, p.relu, o, y));
    b.vouch(y, kNormalizedBound);
    return ok_status();
  }
  auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
               dnnl::normalization_flags::use_shift;
  dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, src, p.epsilon,
                                               flags);
  dnnl::batch_normalization_forward::primitive_desc pd(desc, b.attr(), b.engine());
  KILN_ASSIGN_OR_RETURN(BufferRef src_ref, b.input_as(x, src));
  KILN_ASSIGN_OR_RETURN(BufferRef scale, b.input_as(op.input_index(1), channel));
  KILN_ASSIGN_OR_RETURN(BufferRef shift, b.input_as(op.input_index(2), channel));
  KILN_ASSIGN_OR_RETURN(BufferRef mean, b.input_as(op.input_index(3), channel));
  KILN_ASSIGN_OR_RETURN(BufferRef var, b.input_as(op.input_index(4), channel));
  BufferRef dst;
  if (f32) {
    KILN_ASSIGN_OR_RETURN(dst, b.output(op.output_index(0), pd.dst_desc()));
  } else {
    dst = b.temp(pd.dst_desc().get_size());
  }
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
  if (!f32) {
    const int32_t y = op.output_index(0);
    const dnnl_desc stored = b.requires_plain(y) ? plain_desc(op.output(0).shape, p.data)
                                                 : with_data_type(pd.dst_desc(), p.data);
    KILN_ASSIGN_OR_RETURN(BufferRef y_ref, b.output(y, stored));
    b.add_reorder(dst, pd.dst_desc(), y_ref, stored);
  }
  return ok_status();
}

}  // namespace kiln::hal::cpu
