// Elementwise kernels on f32: unary functions (shaders/unary.comp) and broadcasting binary
// arithmetic (shaders/binary.comp; on i32 and i64 Add, Sub, Mul, Max and Min run
// shaders/binary_int.comp, which needs shaderInt64). One pipeline per function (a specialization
// constant), sizes in push constants.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "kiln/hal/vulkan/broadcast.h"
#include "kiln/hal/vulkan/elementwise_launch.h"
#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::vulkan {
namespace {

// unary.comp's OP codes.
struct UnaryCode {
  std::string_view op_type;
  uint32_t code;
};
constexpr UnaryCode kUnaryCodes[] = {
    {"Relu", 0},       {"Sigmoid", 1},      {"Tanh", 2},       {"Erf", 3},       {"Exp", 6},
    {"Log", 7},        {"Sqrt", 8},         {"Neg", 9},        {"Abs", 10},      {"Reciprocal", 11},
    {"LeakyRelu", 12}, {"HardSigmoid", 13}, {"HardSwish", 14}, {"Elu", 15},      {"Softplus", 16},
    {"Floor", 17},     {"Ceil", 18},        {"Round", 19},     {"Softsign", 20}, {"Clip", 21},
    {"Mish", 22},
};

// A scalar f32 bound of Clip (input i) when it is a constant; nullopt when absent.
StatusOr<std::optional<float>> clip_bound(KernelBuilder& b, size_t i) {
  if (!b.has_input(i)) return std::optional<float>();
  const ValueSpec& bound = b.input(i);
  if (bound.role != ValueRole::kConstant || bound.constant == nullptr) {
    return unimplemented("Clip's bound '{}' is computed at run time", bound.name);
  }
  return std::optional<float>(bound.constant->values<float>()[0]);
}

}  // namespace

Status build_unary(KernelBuilder& b) {
  const std::string& op = b.dispatch().op_type;
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(0), DType::kF32));
  std::optional<uint32_t> code;
  for (const UnaryCode& c : kUnaryCodes) {
    if (c.op_type == op) code = c.code;
  }
  float alpha = 0, beta = 0;
  const Attributes& a = b.attributes();
  if (op == "Gelu") {
    KILN_ASSIGN_OR_RETURN(bool tanh_form, kernels::read_gelu_tanh_approximation(a));
    code = tanh_form ? kUnaryGeluTanh : kUnaryGeluErf;
  } else if (op == "LeakyRelu") {
    KILN_ASSIGN_OR_RETURN(double v, kernels::read_leaky_relu_alpha(a));
    alpha = static_cast<float>(v);
  } else if (op == "Elu") {
    KILN_ASSIGN_OR_RETURN(double v, a.get_float("alpha", 1.0));
    alpha = static_cast<float>(v);
  } else if (op == "HardSigmoid") {
    KILN_ASSIGN_OR_RETURN(double va, a.get_float("alpha", 0.2));
    KILN_ASSIGN_OR_RETURN(double vb, a.get_float("beta", 0.5));
    alpha = static_cast<float>(va);
    beta = static_cast<float>(vb);
  } else if (op == "Clip") {
    KILN_ASSIGN_OR_RETURN(std::optional<float> lo, clip_bound(b, 1));
    KILN_ASSIGN_OR_RETURN(std::optional<float> hi, clip_bound(b, 2));
    alpha = lo.value_or(-std::numeric_limits<float>::infinity());
    beta = hi.value_or(std::numeric_limits<float>::infinity());
  }
  if (!code) return unimplemented("no Vulkan kernel for {}", op);
  const uint64_t n = b.output(0).shape.empty() ? 1 : plain_bytes(b.output(0)) / sizeof(float);
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(0));
  b.describe(fmt::format("vulkan unary {} ({} elements)", op, n));
  return launch_unary(b, *code, x, b.output_operand(0), n, alpha, beta);
}

Status launch_unary(KernelBuilder& b, uint32_t code, Operand x, Operand y, uint64_t count,
                    float alpha, float beta) {
  return b.launch(
      "unary", {code}, count, {x, y},
      {static_cast<uint32_t>(count), KernelBuilder::bits(alpha), KernelBuilder::bits(beta)});
}

namespace {

// binary.comp's parameters for `y` = op(a, c): the element count, the rank, y's dims and each
// operand's broadcast strides; sets `broadcast` when an operand's shape is not y's.
std::vector<uint32_t> binary_params(const ConcreteShape& a, const ConcreteShape& c,
                                    const ConcreteShape& y, bool& broadcast) {
  std::vector<uint32_t> params = {static_cast<uint32_t>(kernels::product(y)),
                                  static_cast<uint32_t>(y.size())};
  const std::vector<uint32_t> dims = broadcast_dims(y);
  params.insert(params.end(), dims.begin(), dims.end());
  broadcast = false;
  for (const ConcreteShape* shape : {&a, &c}) {
    const std::vector<uint32_t> strides = broadcast_strides(*shape, y);
    params.insert(params.end(), strides.begin(), strides.end());
    if (*shape != y) broadcast = true;
  }
  return params;
}

}  // namespace

Status launch_add(KernelBuilder& b, Operand x, Operand c, const ConcreteShape& c_shape, Operand y,
                  const ConcreteShape& shape) {
  if (shape.size() > kMaxBroadcastRank) {
    return unimplemented("rank {} (the Vulkan kernel takes up to {})", shape.size(),
                         kMaxBroadcastRank);
  }
  const auto n = static_cast<uint64_t>(kernels::product(shape));
  if (n == 0) return ok_status();
  bool broadcast = false;
  std::vector<uint32_t> params = binary_params(shape, c_shape, shape, broadcast);
  return b.launch("binary", {0u /* Add */, broadcast ? 1u : 0u}, n, {x, c, y}, std::move(params));
}

Status build_binary(KernelBuilder& b) {
  static constexpr std::string_view kOps[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
  const std::string& op = b.dispatch().op_type;
  uint32_t code = 0;
  while (code < std::size(kOps) && kOps[code] != op) ++code;
  if (code == std::size(kOps)) return unimplemented("no Vulkan kernel for {}", op);
  if (b.input_count() != 2) {
    return unimplemented("{} of {} inputs runs on the CPU (the Vulkan kernel takes 2)", op,
                         b.input_count());
  }
  // i32 and i64 (shape arithmetic) run binary_int.comp: Add, Sub, Mul, Max, Min, wrapping.
  const DType dtype = b.output(0).dtype;
  const bool integer = dtype == DType::kI32 || dtype == DType::kI64;
  if (integer) {
    if (op == "Div" || op == "Pow") return unimplemented("{} of {}", op, dtype_name(dtype));
    if (!b.device().shader_int64) {
      return unimplemented("{} of {} needs shaderInt64, which {} lacks", op, dtype_name(dtype),
                           b.device().name);
    }
  }
  const DType want = integer ? dtype : DType::kF32;
  for (size_t i = 0; i < 2; ++i) KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(i), want));
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.output(0), want));
  const ConcreteShape& y = b.output(0).shape;
  if (y.size() > kMaxBroadcastRank) {
    return unimplemented("rank {} (the Vulkan kernel takes up to {})", y.size(), kMaxBroadcastRank);
  }
  const auto n = static_cast<uint64_t>(kernels::product(y));
  if (n == 0) return ok_status();

  bool broadcast = false;
  std::vector<uint32_t> params = binary_params(b.input(0).shape, b.input(1).shape, y, broadcast);
  KILN_ASSIGN_OR_RETURN(Operand a, b.input_operand(0));
  KILN_ASSIGN_OR_RETURN(Operand c, b.input_operand(1));
  b.describe(fmt::format("vulkan binary {} of {} ({} elements{})", op, dtype_name(dtype), n,
                         broadcast ? ", broadcast" : ""));
  if (integer) {
    return b.launch("binary_int", {code, dtype == DType::kI64 ? 1u : 0u}, n,
                    {a, c, b.output_operand(0)}, std::move(params));
  }
  return b.launch("binary", {code, broadcast ? 1u : 0u}, n, {a, c, b.output_operand(0)},
                  std::move(params));
}

}  // namespace kiln::hal::vulkan
