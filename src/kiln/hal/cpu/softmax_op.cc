// Softmax with opset-13 semantics (normalize along `axis`, default -1) over plain data; a blocked
// input is reordered to plain first. Along the last axis (attention's scores), or one after which
// every dim has size 1, kiln's kernel (softmax_kernel.h) runs it, which makes a row with a NaN or
// +inf, or all -inf, NaN throughout, as the definition gives. Along another axis, or without
// AVX2 + FMA, oneDNN's softmax_forward runs it, and a SoftmaxNanStep after it gives those lanes
// NaN (activation_step.h).
#include <fmt/format.h>

#include "kiln/hal/cpu/activation_step.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/hal/cpu/softmax_kernel.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::cpu {
namespace {

// kiln's softmax over `rows` contiguous rows of `n` floats.
class SoftmaxStep : public Step {
 public:
  SoftmaxStep(std::string label, BufferRef in, BufferRef out, int64_t rows, int64_t n)
      : label_(std::move(label)), in_(in), out_(out), rows_(rows), n_(n) {}
  Status run(const ExecContext& ctx) override {
    softmax::rows(reinterpret_cast<const float*>(ctx.resolve(in_)),
                  reinterpret_cast<float*>(ctx.resolve(out_)), rows_, n_);
    return ok_status();
  }
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  BufferRef in_, out_;
  int64_t rows_, n_;
};

// What this fast path runs: f32 of rank >= 1, along the axis as Softmax's definition reads it.
StatusOr<int> read_axis(const OpReader& op) {
  KILN_RETURN_IF_ERROR(op.expect_input_dtype(0, DType::kF32));
  KILN_RETURN_IF_ERROR(op.expect_output_dtype(0, DType::kF32));
  const auto rank = static_cast<int64_t>(op.input(0).shape.size());
  if (rank == 0) return unimplemented("a rank-0 input is not supported");
  KILN_ASSIGN_OR_RETURN(int64_t axis, kernels::read_softmax_axis(op.attributes(), rank));
  return static_cast<int>(axis);
}

}  // namespace

Status check_softmax(const OpReader& op) { return read_axis(op).status(); }

Status build_softmax(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(int axis, read_axis(op));
  const dnnl_desc data = plain_desc(op.input(0).shape);
  const ConcreteShape& x = op.input(0).shape;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x[i];
  for (size_t i = axis + 1; i < x.size(); ++i) inner *= x[i];
  const int64_t n = x.empty() ? 1 : x[axis];
  if (inner == 1 && cpu_has(Isa::kAvx2)) {
    KILN_ASSIGN_OR_RETURN(BufferRef src, b.input_as(op.input_index(0), data));
    // Over X's bytes where nothing reads X later (softmax_kernel.h allows y == x).
    bool in_place = false;
    KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output_over_if_free(op.output_index(0),
                                                               op.input_index(0), data, in_place));
    b.add(std::make_unique<SoftmaxStep>(
        b.label(fmt::format("softmax kiln:{} {} rows of {}{}", isa_name(best_isa()), outer, n,
                            in_place ? " (in place)" : "")),
        src, dst, outer, n));
    return ok_status();
  }
  dnnl::softmax_forward::desc desc(dnnl::prop_kind::forward_inference, data, axis);
  dnnl::softmax_forward::primitive_desc pd(desc, b.attr(), b.engine());
  KILN_ASSIGN_OR_RETURN(BufferRef src, b.input_as(op.input_index(0), data));
  KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(op.output_index(0), pd.dst_desc()));
  PrimitiveStep& step = b.add_primitive(
      b.label(fmt::format("softmax {} {} axis {}", impl_name(pd), describe(data), axis)), pd,
      dnnl::softmax_forward(pd));
  step.bind(DNNL_ARG_SRC, data, src);
  step.bind(DNNL_ARG_DST, pd.dst_desc(), dst);
  // oneDNN gives a lane with a NaN or +inf one NaN, not NaN throughout (activation_step.h).
  b.add(std::make_unique<SoftmaxNanStep>(b.label("lanes with NaN or +inf are NaN (kiln)"), src, dst,
                                         outer, n, inner));
  return ok_status();
}

}  // namespace kiln::hal::cpu
