// QLinearConv and QLinearMatMul on oneDNN's int8 convolution and matmul, and per-tensor
// QuantizeLinear / DequantizeLinear element by element in the layout of the int8 values
// (kernels/quantize.h's loops, so bit for bit the portable kernels). oneDNN computes only
// the exact int32 sums (u8 or s8 activations minus their zero point, times s8 weights); kiln's own
// requantization (kernels/quantize.h, the definitions' code) turns them into the output, so the
// fast path is bit for bit the portable kernel: oneDNN's output scales and destination zero
// point would add the zero point before rounding (an odd zero point then moves ties) and add
// the bias in f32.
//
// What runs here: s8 weights whose zero point is a known all-zero tensor (what ONNX Runtime's
// quantizer emits), a per-tensor activation zero point (read at run time), any scales and bias;
// QLinearConv with 1 to 3 spatial dims, QLinearMatMul with a 2-D b. And only on a CPU with VNNI
// (vpdpbusd): without it oneDNN sums u8 x s8 pairs in saturating 16-bit lanes (or halves the
// weights), which is not exact. Everything else takes the portable path.
//
// QLinearConv steps: the activation zero point as s32, x reordered to channels-last, the int8
// convolution into s32 channels-last, requantization (channel = innermost dim), and a reorder of
// the u8/s8 result into the plain output. An output read only by other QLinearConvs on this path
// (a ResNet bottleneck's first two convs) stays channels-last, and those read it without the
// reorders (ProgramBuilder::int8_readers_take_channels_last). Integer sums are exact, so the result
// does not depend on the batch size or the threads.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/op_attributes.h"
#include "kiln/kernels/quantize.h"

namespace kiln::hal::cpu {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

bool has_vnni() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2_vnni:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx: return true;
    default: return false;
  }
}

dt int8_type(DType dtype) { return dtype == DType::kI8 ? dt::s8 : dt::u8; }

// The known values of a dispatch input (a constant, or a value the compiler computed).
const Tensor* known(const OpReader& op, size_t i) {
  const ValueSpec& v = op.input(i);
  if (v.role == ValueRole::kConstant) return v.constant;
  return v.known_value ? &*v.known_value : nullptr;
}

// The shared requirements: a VNNI CPU, s8 weights (input 3) with a known all-zero zero point
// (input 5), a per-tensor activation zero point (input 2).
Status check_int8_operands(const OpReader& op) {
  if (!has_vnni()) {
    return unimplemented("the int8 fast path needs a CPU with VNNI (exact int32 sums)");
  }
  KILN_RETURN_IF_ERROR(op.expect_input_dtype(3, DType::kI8));
  const Tensor* wz = known(op, 5);
  if (wz == nullptr) return unimplemented("input 5 (weight zero point) must be known");
  for (int8_t z : wz->values<int8_t>()) {
    if (z != 0) return unimplemented("input 5 (weight zero point) must be all zeros");
  }
  if (kernels::product(op.input(2).shape) != 1) {
    return unimplemented("input 2 (activation zero point) must be per tensor");
  }
  return ok_status();
}

// Writes the activation zero point (u8 or s8, one element) as the s32 oneDNN reads.
class ZeroPointStep : public Step {
 public:
  ZeroPointStep(std::string label, BufferRef from, DType dtype, BufferRef to)
      : label_(std::move(label)), from_(from), dtype_(dtype), to_(to) {}
  Status run(const ExecContext& ctx) override {
    const std::byte* p = ctx.resolve(from_);
    const int32_t z = dtype_ == DType::kI8 ? int32_t{*reinterpret_cast<const int8_t*>(p)}
                                           : int32_t{*reinterpret_cast<const uint8_t*>(p)};
    std::memcpy(ctx.resolve(to_), &z, sizeof z);
    return ok_status();
  }
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  BufferRef from_;
  DType dtype_;
  BufferRef to_;
};

// One operand of the requantization, read at run time.
struct RuntimeOperand {
  BufferRef ref;
  DType dtype = DType::kF32;
  ConcreteShape dims;
  bool present = false;
  kernels::ConstBuffer buffer(const ExecContext& ctx) const {
    return {dtype, dims, present ? ctx.resolve(ref) : nullptr};
  }
};

// kernels::requantize over s32 sums whose channel is element (i / inner) % channels.
class RequantizeStep : public Step {
 public:
  RequantizeStep(std::string label, std::vector<RuntimeOperand> operands, BufferRef acc,
                 BufferRef out, DType out_dtype, ConcreteShape out_dims, int64_t channels,
                 int64_t inner)
      : label_(std::move(label)),
        operands_(std::move(operands)),
        acc_(acc),
        out_(out),
        out_dtype_(out_dtype),
        out_dims_(std::move(out_dims)),
        channels_(channels),
        inner_(inner) {}
  // operands_: a_scale, b_scale, y_scale, y_zero_point, bias (maybe absent).
  Status run(const ExecContext& ctx) override {
    const kernels::ConstBuffer bias = operands_[4].buffer(ctx);
    const kernels::Requantization r = kernels::make_requantization(
        operands_[0].buffer(ctx), operands_[1].buffer(ctx), operands_[2].buffer(ctx),
        operands_[3].buffer(ctx), &bias, channels_, inner_);
    kernels::requantize(r, reinterpret_cast<const int32_t*>(ctx.resolve(acc_)),
                        kernels::MutableBuffer{out_dtype_, out_dims_, ctx.resolve(out_)});
    return ok_status();
  }
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  std::vector<RuntimeOperand> operands_;
  BufferRef acc_, out_;
  DType out_dtype_;
  ConcreteShape out_dims_;
  int64_t channels_, inner_;
};

RuntimeOperand operand(const OpReader& op, size_t i) {
  if (i >= op.dispatch().inputs.size() || !op.has_input(i)) return {};
  return {BufferRef::of_value(op.input_index(i)), op.input(i).dtype, op.input(i).shape, true};
}

std::vector<RuntimeOperand> requantize_operands(const OpReader& op, bool with_bias) {
  return {operand(op, 1), operand(op, 4), operand(op, 6), operand(op, 7),
          with_bias ? operand(op, 8) : RuntimeOperand{}};
}

// The s32 activation zero point in a temporary, and the attribute that reads it.
BufferRef add_zero_point(ProgramBuilder& b, dnnl::primitive_attr& attr) {
  const OpReader& op = b.op();
  attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  BufferRef zp = b.temp(sizeof(int32_t));
  b.add(std::make_unique<ZeroPointStep>(b.label("activation zero point to s32"),
                                        BufferRef::of_value(op.input_index(2)), op.input(2).dtype,
                                        zp));
  return zp;
}

// Weights (s8, plain as `source`) in `target`: reordered once per device when constant, else
// on every run.
StatusOr<BufferRef> weights_as(ProgramBuilder& b, const dnnl_desc& source,
                               const dnnl_desc& target) {
  const int32_t v = b.op().input_index(3);
  if (b.constant(v) != nullptr) return b.constant_as(v, source, target);
  BufferRef t = b.temp(target.get_size());
  b.add_reorder(BufferRef::of_value(v), source, t, target);
  return t;
}

// Channels-last tag for a rank (3 to 5).
tag channels_last(size_t rank) { return rank == 3 ? tag::acb : rank == 4 ? tag::acdb : tag::acdeb; }
tag plain_tag(size_t rank) { return rank == 3 ? tag::abc : rank == 4 ? tag::abcd : tag::abcde; }

// Per-tensor QuantizeLinear (f32 -> u8/s8) or DequantizeLinear (u8/s8 -> f32) over `count`
// elements of a dense buffer, whatever its layout (both sides share it); the scale and zero
// point are read at run time.
class QuantizeElementsStep : public Step {
 public:
  QuantizeElementsStep(std::string label, bool quantize, BufferRef x, BufferRef y, DType int_type,
                       BufferRef scale, std::optional<BufferRef> zero, int64_t count)
      : label_(std::move(label)),
        quantize_(quantize),
        x_(x),
        y_(y),
        int_type_(int_type),
        scale_(scale),
        zero_(zero),
        count_(count) {}
  Status run(const ExecContext& ctx) override {
    float scale = 0.0f;
    std::memcpy(&scale, ctx.resolve(scale_), sizeof scale);
    int32_t zero = 0;
    if (zero_) {
      const std::byte* z = ctx.resolve(*zero_);
      zero = int_type_ == DType::kI8 ? int32_t{*reinterpret_cast<const int8_t*>(z)}
                                     : int32_t{*reinterpret_cast<const uint8_t*>(z)};
    }
    if (quantize_) {
      kernels::quantize_per_tensor(reinterpret_cast<const float*>(ctx.resolve(x_)), int_type_,
                                   ctx.resolve(y_), count_, scale, zero);
    } else {
      kernels::dequantize_per_tensor(int_type_, ctx.resolve(x_),
                                     reinterpret_cast<float*>(ctx.resolve(y_)), count_, scale,
                                     zero);
    }
    return ok_status();
  }
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  bool quantize_;
  BufferRef x_, y_;
  DType int_type_;
  BufferRef scale_;
  std::optional<BufferRef> zero_;
  int64_t count_;
};

// The shared requirements of the element-wise Quantize/DequantizeLinear: the integer side u8 or
// i8, QuantizeLinear's x f32, x of rank >= 1, per-tensor scale and zero point.
Status check_per_tensor_quantization(const OpReader& op, bool quantize) {
  const DType int_type = quantize ? op.output(0).dtype : op.input(0).dtype;
  if (int_type != DType::kU8 && int_type != DType::kI8) {
    return unimplemented("the integer side must be u8 or i8, got {}", dtype_name(int_type));
  }
  if (quantize) KILN_RETURN_IF_ERROR(op.expect_input_dtype(0, DType::kF32));
  if (op.input(0).shape.empty()) return unimplemented("input 0 'x' must have rank >= 1");
  if (kernels::product(op.input(1).shape) != 1 ||
      (op.has_input(2) && kernels::product(op.input(2).shape) != 1)) {
    return unimplemented("the scale and zero point must be per tensor");
  }
  return ok_status();
}

std::optional<BufferRef> zero_point_ref(const OpReader& op) {
  if (op.input_count() < 3 || !op.has_input(2)) return std::nullopt;
  return BufferRef::of_value(op.input_index(2));
}

}  // namespace

Status check_quantize_linear(const OpReader& op) { return check_per_tensor_quantization(op, true); }

// x's f32 layout when it is channels-last and every reader of y takes int8 channels-last (y is
// then written so, element by element); else x plain and y plain.
Status build_quantize_linear(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_RETURN_IF_ERROR(check_quantize_linear(op));
  const int32_t x = op.input_index(0), y = op.output_index(0);
  const ConcreteShape& shape = op.input(0).shape;
  const size_t rank = shape.size();
  BufferRef src, out;
  std::string layout = "plain";
  if (rank >= 3 && rank <= 5 &&
      b.stored_as(x, dnnl_desc(to_dnnl_dims(shape), dt::f32, channels_last(rank))) &&
      b.int8_readers_take_channels_last(y)) {
    src = BufferRef::of_value(x);
    out = b.int8_output(
        y, dnnl_desc(to_dnnl_dims(shape), int8_type(op.output(0).dtype), channels_last(rank)));
    layout = "channels-last";
  } else {
    KILN_ASSIGN_OR_RETURN(src, b.input_as(x, plain_desc(shape, dt::f32)));
    out = b.plain_output(y);
  }
  b.add(std::make_unique<QuantizeElementsStep>(
      b.label(fmt::format("quantize (kiln) {} {} [{}]", dtype_name(op.output(0).dtype), layout,
                          fmt::join(shape, "x"))),
      true, src, out, op.output(0).dtype, BufferRef::of_value(op.input_index(1)),
      zero_point_ref(op), kernels::product(shape)));
  return ok_status();
}

Status check_dequantize_linear(const OpReader& op) {
  return check_per_tensor_quantization(op, false);
}

// y in x's layout (int8 channels-last from an int8 conv or QuantizeLinear, else plain).
Status build_dequantize_linear(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_RETURN_IF_ERROR(check_dequantize_linear(op));
  const int32_t x = op.input_index(0), y = op.output_index(0);
  const ConcreteShape& shape = op.input(0).shape;
  const std::optional<dnnl_desc> in_layout = b.int8_layout(x);
  const dnnl_desc out_layout =
      in_layout ? with_data_type(*in_layout, dt::f32) : plain_desc(shape, dt::f32);
  KILN_ASSIGN_OR_RETURN(BufferRef out, b.output(y, out_layout));
  b.add(std::make_unique<QuantizeElementsStep>(
      b.label(fmt::format("dequantize (kiln) {} -> {}", dtype_name(op.input(0).dtype),
                          describe(out_layout))),
      false, BufferRef::of_value(x), out, op.input(0).dtype, BufferRef::of_value(op.input_index(1)),
      zero_point_ref(op), kernels::product(shape)));
  return ok_status();
}

Status check_qlinear_conv(const OpReader& op) {
  KILN_RETURN_IF_ERROR(check_int8_operands(op));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(0, 3, 5));
  return kernels::read_conv_attributes(op.attributes(), op.input(0).shape, op.input(3).shape)
      .status();
}

Status build_qlinear_conv(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_RETURN_IF_ERROR(check_qlinear_conv(op));
  return catch_dnnl("QLinearConv", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(
        kernels::ConvAttributes p,
        kernels::read_conv_attributes(op.attributes(), op.input(0).shape, op.input(3).shape));
    const ConcreteShape& x = op.input(0).shape;
    const ConcreteShape& w = op.input(3).shape;
    const ConcreteShape& y = op.output(0).shape;
    const size_t rank = x.size(), r = rank - 2;
    dnnl_dims wei_dims;
    tag wei_tag = plain_tag(rank);
    if (p.group > 1) {
      wei_dims = {p.group, w[0] / p.group, w[1]};
      wei_dims.insert(wei_dims.end(), w.begin() + 2, w.end());
      wei_tag = rank == 3 ? tag::goiw : rank == 4 ? tag::goihw : tag::goidhw;
    } else {
      wei_dims = to_dnnl_dims(w);
    }
    dnnl_dims strides(p.window.strides.begin(), p.window.strides.end());
    dnnl_dims dilates(r), pad_l(p.window.pads_begin.begin(), p.window.pads_begin.end()),
        pad_r(p.window.pads_end.begin(), p.window.pads_end.end());
    for (size_t i = 0; i < r; ++i) dilates[i] = p.window.dilations[i] - 1;
    const dt x_type = int8_type(op.input(0).dtype);
    const dt y_type = int8_type(op.output(0).dtype);
    const dnnl_desc src_plain(to_dnnl_dims(x), x_type, plain_tag(rank));
    const dnnl_desc src(to_dnnl_dims(x), x_type, channels_last(rank));
    const dnnl_desc acc(to_dnnl_dims(y), dt::s32, channels_last(rank));
    const dnnl_desc out_last(to_dnnl_dims(y), y_type, channels_last(rank));
    const dnnl_desc out_plain(to_dnnl_dims(y), y_type, plain_tag(rank));

    dnnl::primitive_attr attr = b.attr();
    const BufferRef zp = add_zero_point(b, attr);
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
        dnnl_desc(wei_dims, dt::s8, tag::any), dnnl_desc(), acc, strides, dilates, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, b.engine());
    if (pd.src_desc() != src || pd.dst_desc() != acc) {
      return internal_error("oneDNN changed the channels-last layouts it was given");
    }
    KILN_ASSIGN_OR_RETURN(BufferRef wei,
                          weights_as(b, dnnl_desc(wei_dims, dt::s8, wei_tag), pd.weights_desc()));
    // An input another int8 conv wrote channels-last is read as it is.
    BufferRef x_last = BufferRef::of_value(op.input_index(0));
    if (!b.stored_as(op.input_index(0), src)) {
      x_last = b.temp(src.get_size());
      b.add_reorder(BufferRef::of_value(op.input_index(0)), src_plain, x_last, src);
    }
    BufferRef sums = b.temp(acc.get_size());
    PrimitiveStep& step =
        b.add_primitive(b.label(fmt::format("int8 conv {} {} -> s32 {}", impl_name(pd),
                                            describe(src), describe(acc))),
                        pd, dnnl::convolution_forward(pd));
    step.bind(DNNL_ARG_SRC, pd.src_desc(), x_last);
    step.bind(DNNL_ARG_WEIGHTS, pd.weights_desc(), wei);
    step.bind(DNNL_ARG_DST, pd.dst_desc(), sums);
    step.bind(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, dnnl_desc({1}, dt::s32, tag::a), zp);
    // Requantize channels-last (the channel is the innermost dim): into the output itself when
    // only int8 convs read it, else into a temporary reordered to the plain output.
    const int32_t out = op.output_index(0);
    const bool keep_last = b.int8_readers_take_channels_last(out);
    BufferRef q = keep_last ? b.int8_output(out, out_last) : b.temp(out_last.get_size());
    b.add(std::make_unique<RequantizeStep>(b.label("requantize (kiln)"),
                                           requantize_operands(op, op.dispatch().inputs.size() > 8),
                                           sums, q, op.output(0).dtype, y, y[1], 1));
    if (!keep_last) b.add_reorder(q, out_last, b.plain_output(out), out_plain);
    return ok_status();
  });
}

Status check_qlinear_matmul(const OpReader& op) {
  KILN_RETURN_IF_ERROR(check_int8_operands(op));
  if (op.input(3).shape.size() != 2) return unimplemented("input 3 'b' must be 2-D");
  if (op.input(0).shape.size() < 2) return unimplemented("input 0 'a' must have rank >= 2");
  return ok_status();
}

Status build_qlinear_matmul(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_RETURN_IF_ERROR(check_qlinear_matmul(op));
  return catch_dnnl("QLinearMatMul", [&]() -> Status {
    const ConcreteShape& a = op.input(0).shape;
    const ConcreteShape& w = op.input(3).shape;
    const int64_t k = a.back(), n = w[1];
    const int64_t m = kernels::product(a) / std::max<int64_t>(k, 1);
    const dnnl_desc src({m, k}, int8_type(op.input(0).dtype), tag::ab);
    const dnnl_desc wei_plain({k, n}, dt::s8, tag::ab);
    const dnnl_desc acc({m, n}, dt::s32, tag::ab);
    dnnl::primitive_attr attr = b.attr();
    const BufferRef zp = add_zero_point(b, attr);
    dnnl::matmul::desc desc(src, dnnl_desc({k, n}, dt::s8, tag::any), acc);
    dnnl::matmul::primitive_desc pd(desc, attr, b.engine());
    KILN_ASSIGN_OR_RETURN(BufferRef wei, weights_as(b, wei_plain, pd.weights_desc()));
    BufferRef sums = b.temp(acc.get_size());
    PrimitiveStep& step = b.add_primitive(
        b.label(fmt::format("int8 matmul {} {}x{}x{} -> s32", impl_name(pd), m, k, n)), pd,
        dnnl::matmul(pd));
    step.bind(DNNL_ARG_SRC, src, BufferRef::of_value(op.input_index(0)));
    step.bind(DNNL_ARG_WEIGHTS, pd.weights_desc(), wei);
    step.bind(DNNL_ARG_DST, acc, sums);
    step.bind(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, dnnl_desc({1}, dt::s32, tag::a), zp);
    b.add(std::make_unique<RequantizeStep>(
        b.label("requantize (kiln)"), requantize_operands(op, false), sums,
        b.plain_output(op.output_index(0)), op.output(0).dtype, op.output(0).shape, n, 1));
    return ok_status();
  });
}

}  // namespace kiln::hal::cpu
