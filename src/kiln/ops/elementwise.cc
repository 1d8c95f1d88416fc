// Relu, Add, Sub, Mul, Div, Sum. Float dtypes compute in double and round once to the output
// dtype (for f32 this equals native f32 arithmetic for + - * /); i64 uses two's-complement
// wrapping and C-style truncating division.
#include <algorithm>
#include <limits>

#include "kiln/kernels/broadcast.h"
#include "kiln/ops/families.h"
#include "kiln/ops/op_util.h"

namespace kiln::ops {
namespace {

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

Status infer_relu(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", {DType::kF32, DType::kF64, DType::kI64}));
  ctx.outputs = {x};
  return ok_status();
}

Status relu_kernel(const ir::Node&, std::span<const Tensor> in, std::span<Tensor> out) {
  if (in[0].dtype() == DType::kI64) {
    auto x = in[0].values<int64_t>();
    auto y = out[0].mutable_values<int64_t>();
    for (size_t i = 0; i < x.size(); ++i) y[i] = std::max<int64_t>(x[i], 0);
    return ok_status();
  }
  std::vector<double> x = to_doubles(in[0]);
  // NaN stays NaN (std::max would turn it into 0).
  for (double& v : x) v = v < 0 ? 0.0 : v;
  store_doubles(x, out[0]);
  return ok_status();
}

Status infer_broadcasting(InferContext& ctx, size_t min_inputs, size_t max_inputs,
                          std::initializer_list<DType> dtypes) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, min_inputs, max_inputs, 1, 1));
  if (ctx.node.attributes.has("axis")) {
    return unimplemented(
        "attribute 'axis' (opset < 7 legacy broadcasting) is not supported; "
        "convert the model to opset >= 7");
  }
  bool variadic = max_inputs > 2;
  std::vector<Shape> shapes;
  std::vector<std::string> labels;
  DType dtype = DType::kF32;
  for (size_t i = 0; i < ctx.node.inputs.size(); ++i) {
    std::string name = variadic ? fmt::format("data_{}", i) : std::string(i == 0 ? "A" : "B");
    KILN_ASSIGN_OR_RETURN(ValueType t, required_input(ctx, i, name));
    if (i == 0) {
      KILN_RETURN_IF_ERROR(check_dtype(t, i, name, dtypes));
      dtype = t.dtype;
    } else {
      KILN_RETURN_IF_ERROR(
          check_same_dtype(t, i, name, dtype, input_label(0, variadic ? "data_0" : "A")));
    }
    shapes.push_back(t.shape);
    labels.push_back(input_label(i, name));
  }
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(shapes, labels));
  ctx.outputs = {ValueType{dtype, std::move(shape)}};
  return ok_status();
}

int64_t wrap(uint64_t v) { return static_cast<int64_t>(v); }

Status binary_int_kernel(BinaryOp op, std::span<const Tensor> in, Tensor& out) {
  auto a = in[0].values<int64_t>();
  auto b = in[1].values<int64_t>();
  auto y = out.mutable_values<int64_t>();
  std::vector<int64_t> ia = broadcast_index_map(in[0].shape(), out.shape());
  std::vector<int64_t> ib = broadcast_index_map(in[1].shape(), out.shape());
  for (size_t i = 0; i < y.size(); ++i) {
    int64_t x0 = a[ia[i]];
    int64_t x1 = b[ib[i]];
    auto u0 = static_cast<uint64_t>(x0);
    auto u1 = static_cast<uint64_t>(x1);
    switch (op) {
      case BinaryOp::kAdd:
        y[i] = wrap(u0 + u1);
        break;
      case BinaryOp::kSub:
        y[i] = wrap(u0 - u1);
        break;
      case BinaryOp::kMul:
        y[i] = wrap(u0 * u1);
        break;
      case BinaryOp::kDiv:
        if (x1 == 0) {
          return invalid_argument(
              "integer division by zero at output element {} (input 1 'B' "
              "element {})",
              i, ib[i]);
        }
        // INT64_MIN / -1 overflows; its wrapped result is INT64_MIN.
        y[i] = (x1 == -1) ? wrap(uint64_t{0} - u0) : x0 / x1;
        break;
    }
  }
  return ok_status();
}

KernelFn binary_kernel(BinaryOp op) {
  return [op](const ir::Node&, std::span<const Tensor> in, std::span<Tensor> out) -> Status {
    if (in[0].dtype() == DType::kI64) return binary_int_kernel(op, in, out[0]);
    std::vector<double> a = to_doubles(in[0]);
    std::vector<double> b = to_doubles(in[1]);
    std::vector<int64_t> ia = broadcast_index_map(in[0].shape(), out[0].shape());
    std::vector<int64_t> ib = broadcast_index_map(in[1].shape(), out[0].shape());
    std::vector<double> y(ia.size());
    for (size_t i = 0; i < y.size(); ++i) {
      double x0 = a[ia[i]];
      double x1 = b[ib[i]];
      switch (op) {
        case BinaryOp::kAdd:
          y[i] = x0 + x1;
          break;
        case BinaryOp::kSub:
          y[i] = x0 - x1;
          break;
        case BinaryOp::kMul:
          y[i] = x0 * x1;
          break;
        case BinaryOp::kDiv:
          y[i] = x0 / x1;
          break;
      }
    }
    store_doubles(y, out[0]);
    return ok_status();
  };
}

Status sum_kernel(const ir::Node&, std::span<const Tensor> in, std::span<Tensor> out) {
  std::vector<double> y(static_cast<size_t>(out[0].element_count()), 0.0);
  for (const Tensor& t : in) {
    std::vector<double> x = to_doubles(t);
    std::vector<int64_t> map = broadcast_index_map(t.shape(), out[0].shape());
    for (size_t i = 0; i < y.size(); ++i) y[i] += x[map[i]];
  }
  store_doubles(y, out[0]);
  return ok_status();
}

}  // namespace

void register_elementwise_ops(Registry& registry) {
  registry.add(make_op("Relu", infer_relu, relu_kernel));
  const std::pair<const char*, BinaryOp> binaries[] = {{"Add", BinaryOp::kAdd},
                                                       {"Sub", BinaryOp::kSub},
                                                       {"Mul", BinaryOp::kMul},
                                                       {"Div", BinaryOp::kDiv}};
  for (const auto& [name, op] : binaries) {
    auto infer = [](InferContext& ctx) {
      return infer_broadcasting(ctx, 2, 2, {DType::kF32, DType::kF64, DType::kI64});
    };
    registry.add(make_op(name, infer, binary_kernel(op)));
  }
  auto infer_sum = [](InferContext& ctx) {
    return infer_broadcasting(ctx, 1, std::numeric_limits<size_t>::max(),
                              {DType::kF32, DType::kF64});
  };
  registry.add(make_op("Sum", infer_sum, sum_kernel));
}

}  // namespace kiln::ops
