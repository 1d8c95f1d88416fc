// Softmax and LogSoftmax (opset 13: one axis, shaders/softmax.comp), LayerNormalization's Y
// (shaders/layernorm.comp) and ReduceSum, ReduceMean, ReduceMax, ReduceMin (shaders/reduce.comp),
// on f32, with the semantics of kiln's definitions (kernels/normalize.cc, kernels/reduce.cc) but
// f32 arithmetic: results agree with the float64 definitions to about 1e-5 relative.
#include <fmt/format.h>

#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/op_attributes.h"
#include "kiln/kernels/reduce_geometry.h"

namespace kiln::hal::vulkan {
namespace {

Status check_32bit(const ValueSpec& v) {
  if (static_cast<uint64_t>(kernels::product(v.shape)) >= (uint64_t{1} << 32)) {
    return unimplemented("'{}' has more elements than the Vulkan kernels' 32-bit indices reach",
                         v.name);
  }
  return ok_status();
}

// The integer elements of input i when they are known at prepare time (a constant, or a value
// the shape program knows); nullopt otherwise.
std::optional<std::vector<int64_t>> known_ints(const KernelBuilder& b, size_t i) {
  const ValueSpec& v = b.input(i);
  const Tensor* t =
      v.constant != nullptr ? v.constant : (v.known_value ? &*v.known_value : nullptr);
  if (t == nullptr) return std::nullopt;
  std::vector<int64_t> out;
  if (t->dtype() == DType::kI64) {
    for (int64_t e : t->values<int64_t>()) out.push_back(e);
  } else if (t->dtype() == DType::kI32) {
    for (int32_t e : t->values<int32_t>()) out.push_back(e);
  } else {
    return std::nullopt;
  }
  return out;
}

}  // namespace

std::optional<std::vector<int64_t>> known_input_ints(const KernelBuilder& b, size_t i) {
  return known_ints(b, i);
}

Status build_softmax(KernelBuilder& b) {
  const std::string& op = b.dispatch().op_type;
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(0), DType::kF32));
  KILN_RETURN_IF_ERROR(check_32bit(b.input(0)));
  const ConcreteShape& dims = b.input(0).shape;
  if (dims.empty()) return unimplemented("{} of a scalar runs on the CPU", op);
  KILN_ASSIGN_OR_RETURN(
      int64_t axis, kernels::read_softmax_axis(b.attributes(), static_cast<int64_t>(dims.size())));
  const uint64_t outer =
      static_cast<uint64_t>(kernels::product(std::span(dims).first(static_cast<size_t>(axis))));
  const uint64_t n = static_cast<uint64_t>(dims[axis]);
  const uint64_t inner = static_cast<uint64_t>(
      kernels::product(std::span(dims).subspan(static_cast<size_t>(axis) + 1)));
  const uint64_t lanes = outer * inner;
  if (lanes == 0 || n == 0) return ok_status();
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(0));
  const uint32_t log = op == "LogSoftmax" ? 1u : 0u;
  std::vector<uint32_t> params = {static_cast<uint32_t>(lanes), static_cast<uint32_t>(n),
                                  static_cast<uint32_t>(inner)};
  if (inner == 1) {
    // Rows along the last (non-trivial) axis: a workgroup per row.
    b.describe(fmt::format("vulkan {} ({} rows of {}, a workgroup per row)", op, lanes, n));
    return b.launch_rows("softmax", {log, 1u}, lanes, {x, b.output_operand(0)}, std::move(params));
  }
  b.describe(fmt::format("vulkan {} ({} lanes of {})", op, lanes, n));
  return b.launch("softmax", {log, 0u}, lanes, {x, b.output_operand(0)}, std::move(params));
}

Status build_layer_norm(KernelBuilder& b) {
  for (size_t i = 1; i < b.output_count(); ++i) {
    if (b.dispatch().outputs[i] >= 0) {
      return unimplemented("LayerNormalization's Mean and InvStdDev outputs run on the CPU");
    }
  }
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(0), DType::kF32));
  KILN_RETURN_IF_ERROR(check_32bit(b.input(0)));
  const ConcreteShape& dims = b.input(0).shape;
  const Attributes& a = b.attributes();
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, a.get_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(double epsilon, a.get_float("epsilon", 1e-5));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        kernels::normalize_axis(raw_axis, static_cast<int64_t>(dims.size()),
                                                "attribute 'axis'", true));
  const uint64_t rows =
      static_cast<uint64_t>(kernels::product(std::span(dims).first(static_cast<size_t>(axis))));
  const uint64_t block =
      static_cast<uint64_t>(kernels::product(std::span(dims).subspan(static_cast<size_t>(axis))));
  // A parameter's stride: 1 when it has one value per element of the block, 0 for one value.
  auto stride_of = [&](size_t i) -> StatusOr<uint32_t> {
    KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(i), DType::kF32));
    const uint64_t count = static_cast<uint64_t>(kernels::product(b.input(i).shape));
    if (count == block) return 1u;
    if (count == 1) return 0u;
    return unimplemented(
        "LayerNormalization parameter '{}' {} broadcast within the block runs "
        "on the CPU",
        b.input(i).name, shape_to_string(b.input(i).shape));
  };
  KILN_ASSIGN_OR_RETURN(uint32_t scale_stride, stride_of(1));
  const bool has_bias = b.has_input(2);
  uint32_t bias_stride = 0;
  if (has_bias) {
    KILN_ASSIGN_OR_RETURN(bias_stride, stride_of(2));
  }
  if (rows == 0 || block == 0) return ok_status();
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(0));
  KILN_ASSIGN_OR_RETURN(Operand scale, b.input_operand(1));
  Operand bias = scale;
  if (has_bias) {
    KILN_ASSIGN_OR_RETURN(bias, b.input_operand(2));
  }
  b.describe(
      fmt::format("vulkan LayerNormalization ({} rows of {}, a workgroup per row)", rows, block));
  return b.launch_rows("layernorm", {has_bias ? 1u : 0u}, rows,
                       {x, scale, bias, b.output_operand(0)},
                       {static_cast<uint32_t>(block), scale_stride, bias_stride,
                        KernelBuilder::bits(static_cast<float>(epsilon))});
}

Status build_reduce(KernelBuilder& b) {
  static constexpr std::string_view kOps[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"};
  const std::string& op = b.dispatch().op_type;
  uint32_t code = 0;
  while (code < std::size(kOps) && kOps[code] != op) ++code;
  if (code == std::size(kOps)) return unimplemented("no Vulkan kernel for {}", op);
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(0), DType::kF32));
  KILN_RETURN_IF_ERROR(check_32bit(b.input(0)));
  const ConcreteShape& dims = b.input(0).shape;
  const auto rank = static_cast<int64_t>(dims.size());
  const Attributes& a = b.attributes();
  KILN_ASSIGN_OR_RETURN(int64_t noop, a.get_int("noop_with_empty_axes", 0));
  std::vector<int64_t> raw;
  std::string what = "attribute 'axes'";
  if (b.has_input(1)) {
    auto known = known_ints(b, 1);
    if (!known) {
      return unimplemented("{}'s axes '{}' are computed at run time", op, b.input(1).name);
    }
    raw = std::move(*known);
    what = "input 1 'axes'";
  } else if (a.has("axes")) {
    KILN_ASSIGN_OR_RETURN(raw, a.get_ints("axes", {}));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, kernels::normalize_axes(raw, rank, what));
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(0));
  const size_t bytes = plain_bytes(b.output(0));
  if (axes.empty() && noop == 1) {
    b.describe(fmt::format("vulkan {} (no axes: a copy of {} bytes)", op, bytes));
    if (bytes > 0) b.copy(x, b.output_operand(0), bytes);
    return ok_status();
  }
  std::vector<bool> reduced(dims.size(), axes.empty());
  for (int64_t axis : axes) reduced[static_cast<size_t>(axis)] = true;
  const kernels::Geometry g = kernels::make_geometry(dims, reduced);
  if (g.kept_dims.size() > 4 || g.red_dims.size() > 4) {
    return unimplemented(
        "{} over {} alternating kept and reduced axis runs (the Vulkan kernel "
        "takes up to 4 of each)",
        op, g.kept_dims.size() + g.red_dims.size());
  }
  if (g.out_count == 0) return ok_status();
  std::vector<uint32_t> params = {
      static_cast<uint32_t>(g.out_count), static_cast<uint32_t>(g.red_count),
      static_cast<uint32_t>(g.kept_dims.size()), static_cast<uint32_t>(g.red_dims.size())};
  auto push4 = [&](const std::vector<int64_t>& v, uint32_t fill) {
    for (size_t i = 0; i < 4; ++i) {
      params.push_back(i < v.size() ? static_cast<uint32_t>(v[i]) : fill);
    }
  };
  push4(g.kept_dims, 1);
  push4(g.kept_strides, 0);
  push4(g.red_dims, 1);
  push4(g.red_strides, 0);
  b.describe(fmt::format("vulkan {} ({} outputs of {} elements)", op, g.out_count, g.red_count));
  return b.launch("reduce", {code}, static_cast<uint64_t>(g.out_count), {x, b.output_operand(0)},
                  std::move(params));
}

}  // namespace kiln::hal::vulkan
