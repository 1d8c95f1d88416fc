// Relu and LeakyRelu (kiln's ActivationStep, which keeps NaN, unlike oneDNN's relu), Gelu, Sigmoid
// and Tanh (oneDNN eltwise, then EltwiseEdgeStep for non-finite inputs), in the input's layout
// (Sigmoid on a padded blocked layout reads it plain), Add/Sub/Mul/Div (oneDNN binary when the
// first operand has the output's shape — both operands then share its layout, blocked or plain —
// else kiln's broadcasting kernel on plain data) and variadic Sum (oneDNN sum for equal shapes,
// else a chain of kiln broadcasting adds).
//
// f16 and bf16 Relu and same-shape Add/Sub/Mul/Div compute in f32 in the stored layout: the
// inputs are converted into f32 temporaries, and the result is rounded to f16/bf16 once (as the
// portable kernels, which load into float and round each result, and as ONNX Runtime's f16
// element-wise ops compute on a CPU without f16 arithmetic). So a ResNet's residual Adds and
// Relus between f16 convolutions keep the convolutions' blocked layouts instead of leaving them
// for the portable path's plain f16.
#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <vector>

#include "kiln/hal/cpu/activation_step.h"
#include "kiln/hal/cpu/channel_binary_step.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/plain_kernels.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/hal/cpu/vector_map_kernels.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::cpu {
namespace {

Status check_all_f32(const OpReader& op) {
  for (size_t i = 0; i < op.input_count(); ++i) {
    if (!op.has_input(i)) return invalid_argument("input {} is absent", i);
    KILN_RETURN_IF_ERROR(op.expect_input_dtype(i, DType::kF32));
  }
  return op.expect_output_dtype(0, DType::kF32);
}

// Every input and the output of one stored dtype (f32, f16 or bf16): that dtype's oneDNN type.
StatusOr<dnnl::memory::data_type> one_stored_type(const OpReader& op) {
  const DType dtype = op.output(0).dtype;
  const std::optional<dnnl::memory::data_type> type = stored_data_type(dtype);
  if (!type) {
    return unimplemented("output 0 '{}' must be f32, f16 or bf16, got {}", op.output(0).name,
                         dtype_name(dtype));
  }
  for (size_t i = 0; i < op.input_count(); ++i) {
    if (!op.has_input(i)) return invalid_argument("input {} is absent", i);
    KILN_RETURN_IF_ERROR(op.expect_input_dtype(i, dtype));
  }
  return *type;
}

// Where an f16/bf16 op's f32 result (`computed`, in layout `f32_layout`) goes: converted into
// the output, stored in that layout in its own type (plain when it must be).
Status store_rounded(ProgramBuilder& b, int32_t y, const BufferRef& computed,
                     const dnnl_desc& f32_layout) {
  const ValueSpec& value = b.value(y);
  const dnnl::memory::data_type type = *stored_data_type(value.dtype);
  const dnnl_desc stored =
      b.requires_plain(y) ? plain_desc(value.shape, type) : with_data_type(f32_layout, type);
  KILN_ASSIGN_OR_RETURN(BufferRef y_ref, b.output(y, stored));
  b.add_reorder(computed, f32_layout, y_ref, stored);
  return ok_status();
}

BinaryOp binary_op(const std::string& type) {
  if (type == "Sub") return BinaryOp::kSub;
  if (type == "Mul") return BinaryOp::kMul;
  if (type == "Div") return BinaryOp::kDiv;
  return BinaryOp::kAdd;
}

dnnl::algorithm binary_algorithm(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return dnnl::algorithm::binary_add;
    case BinaryOp::kSub: return dnnl::algorithm::binary_sub;
    case BinaryOp::kMul: return dnnl::algorithm::binary_mul;
    case BinaryOp::kDiv: return dnnl::algorithm::binary_div;
  }
  return dnnl::algorithm::binary_add;
}

// `shape` right-aligned to `rank` dims with leading 1s.
dnnl_dims padded_dims(const ConcreteShape& shape, size_t rank) {
  dnnl_dims dims(rank - shape.size(), 1);
  dims.insert(dims.end(), shape.begin(), shape.end());
  return dims;
}

// Whether `cd` (c's dims right-aligned to a's rank) holds one value per sample or for all
// samples (dim 0 of 1 or N) and per channel at dim `channel` of `as`, 1 elsewhere.
bool per_channel_dims(const dnnl_dims& cd, const ConcreteShape& as, size_t channel) {
  if (cd[channel] != as[channel] || (cd[0] != 1 && cd[0] != as[0])) return false;
  for (size_t d = 1; d < cd.size(); ++d) {
    if (d != channel && cd[d] != 1) return false;
  }
  return true;
}

// `c` one value per sample and channel of `a`, `a` f32: kiln's ChannelBinaryStep in a's layout.
// The channels at dim 1 of [N, C, ...] (c [N or 1, C, 1, ...], right-aligned), a stored with
// channel runs (channel_runs.h); or at the last dim of a plain channels-last [N, ..., C] (c
// [N or 1, 1, ..., C]: a tf2onnx squeeze-and-excitation's scale, whose oneDNN binary kernel is
// its generic one). Nullopt where neither applies.
std::optional<Status> add_channel_binary(ProgramBuilder& b, BinaryOp kind, int32_t a, int32_t c,
                                         int32_t y) {
  const ConcreteShape& as = b.value(a).shape;
  const ConcreteShape& cs = b.value(c).shape;
  if (b.value(a).dtype != DType::kF32 || b.value(c).dtype != DType::kF32 || as.size() < 3 ||
      cs.size() > as.size() || cs == as) {
    return std::nullopt;
  }
  const dnnl_dims cd = padded_dims(cs, as.size());
  const dnnl_desc layout = b.layout(a);
  std::optional<ChannelRuns> runs;
  if (per_channel_dims(cd, as, 1)) {
    runs = channel_runs(layout);
  } else if (per_channel_dims(cd, as, as.size() - 1) && is_plain(layout) && layout.get_size() > 0) {
    const int64_t channels = as.back();
    runs =
        ChannelRuns{ChannelRuns::Order::kChannelInnermost, channels,
                    static_cast<int64_t>(layout.get_size() / sizeof(float)) / channels, channels};
  }
  if (!runs) return std::nullopt;
  KILN_ASSIGN_OR_RETURN(BufferRef x, b.input_as(a, layout));
  KILN_ASSIGN_OR_RETURN(BufferRef s, b.input_as(c, plain_desc(cs)));
  // Over x's bytes where nothing reads x later (a squeeze-and-excitation scale is x's last
  // reader): EfficientNet-B0's 16 scales at batch 8 took 1.0 ms instead of 2.26.
  bool in_place = false;
  KILN_ASSIGN_OR_RETURN(BufferRef out, b.output_over_if_free(y, a, layout, in_place));
  b.add(std::make_unique<ChannelBinaryStep>(
      b.label(fmt::format("binary kiln per channel {} {}{}", describe(layout),
                          describe(plain_desc(cs)), in_place ? " (in place)" : "")),
      kind, *runs, as[0], cd[0] > 1, x, s, out));
  return ok_status();
}

Status add_plain_broadcast(ProgramBuilder& b, BinaryOp kind, int32_t a, int32_t c, int32_t y) {
  const ConcreteShape& ys = b.value(y).shape;
  KILN_ASSIGN_OR_RETURN(BroadcastPlan plan,
                        make_broadcast_plan(ys, b.value(a).shape, b.value(c).shape));
  KILN_ASSIGN_OR_RETURN(BufferRef a_ref, b.input_as(a, plain_desc(b.value(a).shape)));
  KILN_ASSIGN_OR_RETURN(BufferRef c_ref, b.input_as(c, plain_desc(b.value(c).shape)));
  KILN_ASSIGN_OR_RETURN(BufferRef y_ref, b.output(y, plain_desc(ys)));
  b.add(std::make_unique<BroadcastStep>(b.op().dispatch().name, kind, false, std::move(plan), a_ref,
                                        c_ref, y_ref));
  return ok_status();
}

// A unary op as a oneDNN algorithm, its name in kernel descriptions, its non-finite values, and
// its alpha (Elu's).
struct Eltwise {
  dnnl::algorithm algorithm;
  const char* name;
  EdgeRule edge = EdgeRule::kGelu;
  float alpha = 0.0f;
};

// Softplus or Mish on kiln's vector kernels (vector_map_kernels.h), or nothing for the other ops.
std::optional<vector_map::Function> vector_map_of(const OpReader& op) {
  if (op.dispatch().op_type == "Softplus") return vector_map::Function::kSoftplus;
  if (op.dispatch().op_type == "Mish") return vector_map::Function::kMish;
  return std::nullopt;
}

// Relu, Sigmoid, Tanh, Exp, Elu, and Gelu with approximate "none" (erf) or "tanh". (oneDNN's Exp
// and Elu: within 0.03 of the tests' tolerance of the exact functions over [-30, 30], at 0.18
// ns an element (AVX-512, 2 threads) where the portable kernel's scalar expf and expm1f took 1.8
// and 5.8 ns. Its soft_relu, mish and log are not: softplus(-17.7) came out -1.9e-6, log near 1
// off by 1e-4 relatively, mish by 1e-6 absolutely: Softplus and Mish run on kiln's kernels
// instead (vector_map_kernels.h), Log stays portable.)
StatusOr<Eltwise> eltwise_of(const OpReader& op) {
  const std::string& type = op.dispatch().op_type;
  if (type == "Relu" || type == "LeakyRelu") {  // kiln's ActivationStep, not oneDNN's
    return Eltwise{dnnl::algorithm::eltwise_relu, "relu"};
  }
  if (type == "Sigmoid") {
    return Eltwise{dnnl::algorithm::eltwise_logistic, "sigmoid", EdgeRule::kSigmoid};
  }
  if (type == "Tanh") return Eltwise{dnnl::algorithm::eltwise_tanh, "tanh", EdgeRule::kTanh};
  if (type == "Exp") return Eltwise{dnnl::algorithm::eltwise_exp, "exp", EdgeRule::kExp};
  if (type == "Elu") {
    KILN_ASSIGN_OR_RETURN(double alpha, op.attributes().get_float("alpha", 1.0));
    const auto a = static_cast<float>(alpha);
    if (!std::isfinite(a)) return unimplemented("Elu with alpha {} runs on the portable path", a);
    return Eltwise{dnnl::algorithm::eltwise_elu, "elu", EdgeRule::kElu, a};
  }
  KILN_ASSIGN_OR_RETURN(bool tanh, kernels::read_gelu_tanh_approximation(op.attributes()));
  if (tanh) return Eltwise{dnnl::algorithm::eltwise_gelu_tanh, "gelu(tanh)"};
  return Eltwise{dnnl::algorithm::eltwise_gelu_erf, "gelu"};
}

}  // namespace

// The fast paths below run f32 (and, for the binary ops and Sum, the broadcasts the broadcast
// steps can do), and f16/bf16 Relu and binary ops of operands of the output's shape; the
// definitions have checked the rest (select_path).
Status check_eltwise(const OpReader& op) {
  if (vector_map_of(op)) {
    if (!cpu_has(Isa::kAvx2)) {
      return unimplemented("kiln's {} kernel needs AVX2 and FMA", op.dispatch().op_type);
    }
    return check_all_f32(op);
  }
  KILN_RETURN_IF_ERROR(eltwise_of(op).status());
  if (op.dispatch().op_type == "Relu") return one_stored_type(op).status();
  return check_all_f32(op);
}

namespace {

// `function` in the input's layout; Softplus(0) = ln 2, so a blocked layout with padding is then
// read plain (Mish(0) = 0 keeps the padding zero).
Status build_vector_map(ProgramBuilder& b, vector_map::Function function) {
  const OpReader& op = b.op();
  const int32_t x = op.input_index(0);
  const bool plain = has_padding(b.layout(x)) && function == vector_map::Function::kSoftplus;
  const dnnl_desc layout = plain ? plain_desc(b.layout(x).dims()) : b.layout(x);
  KILN_ASSIGN_OR_RETURN(BufferRef in, b.input_as(x, layout));
  KILN_ASSIGN_OR_RETURN(BufferRef out, b.output(op.output_index(0), layout));
  b.add(std::make_unique<VectorMapStep>(
      b.label(fmt::format("{} kiln {}", vector_map::name_of(function), describe(layout))), function,
      in, out, layout.get_size() / sizeof(float)));
  return ok_status();
}

}  // namespace

Status build_eltwise(ProgramBuilder& b) {
  const OpReader& op = b.op();
  if (auto function = vector_map_of(op)) return build_vector_map(b, *function);
  KILN_ASSIGN_OR_RETURN(Eltwise eltwise, eltwise_of(op));
  const int32_t x = op.input_index(0);
  const dnnl_desc src = b.layout(x);
  if (op.dispatch().op_type == "Relu" || op.dispatch().op_type == "LeakyRelu") {
    // kiln's ActivationStep in the input's layout; f16/bf16 (Relu only) through an f32 temporary,
    // rounded once.
    kernels::FusedActivation activation{kernels::FusedActivation::Kind::kRelu};
    if (op.dispatch().op_type == "LeakyRelu") {
      activation.kind = kernels::FusedActivation::Kind::kLeakyRelu;
      KILN_ASSIGN_OR_RETURN(activation.alpha, kernels::read_leaky_relu_alpha(op.attributes()));
    }
    if (src.data_type() != dnnl::memory::data_type::f32) {
      const dnnl_desc f32_layout = with_data_type(src, dnnl::memory::data_type::f32);
      KILN_ASSIGN_OR_RETURN(BufferRef in, b.input_as(x, f32_layout));
      const BufferRef out = b.temp(f32_layout.get_size());
      add_activation(b, in, out, f32_layout, activation);
      return store_rounded(b, op.output_index(0), out, f32_layout);
    }
    KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(op.output_index(0), src));
    add_activation(b, BufferRef::of_value(x), dst, src, activation);
    return ok_status();
  }
  // Sigmoid(0) and Exp(0) are not 0: on a blocked layout with padding they would fill the
  // padding, so such an input is read plain.
  const bool nonzero_at_zero = eltwise.edge == EdgeRule::kSigmoid || eltwise.edge == EdgeRule::kExp;
  const dnnl_desc layout = nonzero_at_zero && has_padding(src) ? plain_desc(src.dims()) : src;
  KILN_ASSIGN_OR_RETURN(BufferRef in, b.input_as(x, layout));
  dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, eltwise.algorithm, layout,
                                   eltwise.alpha, 0.0f);
  dnnl::eltwise_forward::primitive_desc pd(desc, b.attr(), b.engine());
  if (pd.dst_desc() != layout) {
    return internal_error("{} would write {}, not its input's layout", eltwise.name,
                          describe(pd.dst_desc()));
  }
  KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(op.output_index(0), pd.dst_desc()));
  PrimitiveStep& step = b.add_primitive(
      b.label(fmt::format("{} {} {}", eltwise.name, impl_name(pd), describe(layout))), pd,
      dnnl::eltwise_forward(pd));
  step.bind(DNNL_ARG_SRC, layout, in);
  step.bind(DNNL_ARG_DST, pd.dst_desc(), dst);
  b.add(std::make_unique<EltwiseEdgeStep>(
      b.label(fmt::format("{} of NaN/Inf inputs (kiln) {}", eltwise.name, describe(layout))),
      eltwise.edge, in, dst, layout.get_size() / sizeof(float), eltwise.alpha));
  return ok_status();
}

Status check_binary(const OpReader& op) {
  KILN_ASSIGN_OR_RETURN(dnnl::memory::data_type type, one_stored_type(op));
  if (type != dnnl::memory::data_type::f32 &&
      (op.input(0).shape != op.output(0).shape || op.input(1).shape != op.output(0).shape)) {
    return unimplemented("f16 and bf16 operands must have the output's shape (no broadcast)");
  }
  return make_broadcast_plan(op.output(0).shape, op.input(0).shape, op.input(1).shape).status();
}

Status build_binary(ProgramBuilder& b) {
  const OpReader& op = b.op();
  const BinaryOp kind = binary_op(op.dispatch().op_type);
  int32_t a = op.input_index(0), c = op.input_index(1);
  const int32_t y = op.output_index(0);
  const ConcreteShape& ys = b.value(y).shape;
  if (b.value(a).shape != ys && b.value(c).shape == ys &&
      (kind == BinaryOp::kAdd || kind == BinaryOp::kMul)) {
    std::swap(a, c);
  }
  if (b.value(a).shape != ys) return add_plain_broadcast(b, kind, a, c, y);
  if (std::optional<Status> done = add_channel_binary(b, kind, a, c, y)) return *done;

  // oneDNN binary: src0 and dst in A's layout; B in the same layout when it has the full shape,
  // else plain with broadcast dims of 1. f16/bf16 (same shapes): all in f32, then rounded.
  const bool f32 = b.layout(a).data_type() == dnnl::memory::data_type::f32;
  const dnnl_desc src0 = with_data_type(b.layout(a), dnnl::memory::data_type::f32);
  const bool same_shape = b.value(c).shape == ys;
  const dnnl_dims src1_dims = padded_dims(b.value(c).shape, src0.dims().size());
  dnnl_desc src1 = same_shape ? src0 : plain_desc(src1_dims);
  dnnl::binary::primitive_desc pd;
  try {
    dnnl::binary::desc desc(binary_algorithm(kind), src0, src1, src0);
    pd = dnnl::binary::primitive_desc(desc, b.attr(), b.engine());
  } catch (const dnnl::error&) {
    // oneDNN lacks this broadcast for this layout (f16/bf16 operands have the output's shape).
    if (!f32) throw;
    return add_plain_broadcast(b, kind, a, c, y);
  }
  // A broadcast B ([N,C,1,1] against channel-blocked data: a squeeze-excitation's scale) next to
  // a blocked A has oneDNN's jit kernel only when B is blocked alike; a plain B takes its
  // reference kernel (17 ms instead of 0.1 for EfficientNet's [1,144,56,56] on AVX2).
  if (!same_shape && is_reference_impl(impl_name(pd))) {
    if (auto blocked = alike_blocked(src0, src1_dims)) {
      try {
        dnnl::binary::desc desc(binary_algorithm(kind), src0, *blocked, src0);
        dnnl::binary::primitive_desc alike(desc, b.attr(), b.engine());
        if (!is_reference_impl(impl_name(alike))) {
          pd = alike;
          src1 = *blocked;
        }
      } catch (const dnnl::error&) {
        // Keep the plain B.
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(BufferRef a_ref, b.input_as(a, src0));
  KILN_ASSIGN_OR_RETURN(BufferRef c_ref, b.input_as(c, src1));
  BufferRef y_ref;
  bool in_place = false;  // over A's bytes where nothing reads A later (oneDNN allows dst = src0)
  if (f32) {
    KILN_ASSIGN_OR_RETURN(y_ref, b.output_over_if_free(y, a, pd.dst_desc(), in_place));
  } else {
    y_ref = b.temp(pd.dst_desc().get_size());
  }
  PrimitiveStep& step =
      b.add_primitive(b.label(fmt::format("binary {} {} {}{}", impl_name(pd), describe(src0),
                                          describe(src1), in_place ? " (in place)" : "")),
                      pd, dnnl::binary(pd));
  step.bind(DNNL_ARG_SRC_0, src0, a_ref);
  step.bind(DNNL_ARG_SRC_1, src1, c_ref);
  step.bind(DNNL_ARG_DST, pd.dst_desc(), y_ref);
  if (!f32) return store_rounded(b, y, y_ref, pd.dst_desc());
  return ok_status();
}

Status check_sum(const OpReader& op) {
  if (op.input_count() > 64) return unimplemented("more than 64 inputs are not supported");
  KILN_RETURN_IF_ERROR(check_all_f32(op));
  for (size_t i = 0; i < op.input_count(); ++i) {
    KILN_RETURN_IF_ERROR(
        make_broadcast_plan(op.output(0).shape, op.input(i).shape, op.output(0).shape).status());
  }
  return ok_status();
}

Status build_sum(ProgramBuilder& b) {
  const OpReader& op = b.op();
  const size_t n = op.input_count();
  const int32_t y = op.output_index(0);
  const ConcreteShape& ys = b.value(y).shape;
  bool same = true;
  for (size_t i = 0; i < n; ++i) same = same && op.input(i).shape == ys;
  if (same && n == 1) {
    const int32_t x = op.input_index(0);
    KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(y, b.layout(x)));
    b.add_reorder(BufferRef::of_value(x), b.layout(x), dst, b.layout(x));
    return ok_status();
  }
  if (same) {
    std::vector<dnnl_desc> srcs;
    for (size_t i = 0; i < n; ++i) srcs.push_back(b.layout(op.input_index(i)));
    dnnl::sum::primitive_desc pd(srcs[0], std::vector<float>(n, 1.0f), srcs, b.engine(), b.attr());
    KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(y, pd.dst_desc()));
    PrimitiveStep& step = b.add_primitive(
        b.label(fmt::format("sum {} of {} {}", impl_name(pd), n, describe(srcs[0]))), pd,
        dnnl::sum(pd));
    for (size_t i = 0; i < n; ++i) {
      step.bind(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), srcs[i],
                BufferRef::of_value(op.input_index(i)));
    }
    step.bind(DNNL_ARG_DST, pd.dst_desc(), dst);
    return ok_status();
  }
  // Broadcasting: y = x0 + x1, then y += xi, all plain.
  std::vector<BufferRef> refs;
  for (size_t i = 0; i < n; ++i) {
    const int32_t v = op.input_index(i);
    KILN_ASSIGN_OR_RETURN(BufferRef r, b.input_as(v, plain_desc(b.value(v).shape)));
    refs.push_back(r);
  }
  KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(y, plain_desc(ys)));
  if (n == 1) {
    KILN_ASSIGN_OR_RETURN(BroadcastPlan plan, make_broadcast_plan(ys, op.input(0).shape, ys));
    b.add(std::make_unique<BroadcastStep>(b.op().dispatch().name, BinaryOp::kAdd, true,
                                          std::move(plan), refs[0], refs[0], dst));
    return ok_status();
  }
  KILN_ASSIGN_OR_RETURN(BroadcastPlan first,
                        make_broadcast_plan(ys, op.input(0).shape, op.input(1).shape));
  b.add(std::make_unique<BroadcastStep>(b.op().dispatch().name, BinaryOp::kAdd, false,
                                        std::move(first), refs[0], refs[1], dst));
  for (size_t i = 2; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(BroadcastPlan plan, make_broadcast_plan(ys, ys, op.input(i).shape));
    b.add(std::make_unique<BroadcastStep>(b.op().dispatch().name, BinaryOp::kAdd, false,
                                          std::move(plan), dst, refs[i], dst));
  }
  return ok_status();
}

}  // namespace kiln::hal::cpu
