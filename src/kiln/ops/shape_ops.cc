// Ops that only move data or relabel dims: Flatten, Reshape, Identity, Dropout (inference), and
// Constant (which the importer folds away; registered so that unsupported_ops does not list it).
#include <cstring>

#include "kiln/ops/families.h"
#include "kiln/ops/op_util.h"

namespace kiln::ops {
namespace {

Status copy_kernel(const ir::Node&, std::span<const Tensor> in, std::span<Tensor> out) {
  if (out[0].byte_size() > 0) std::memcpy(out[0].mutable_data(), in[0].data(), out[0].byte_size());
  return ok_status();
}

Status infer_identity(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(ctx, 0, "input"));
  ctx.outputs = {x};
  return ok_status();
}

Status infer_flatten(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(ctx, 0, "input"));
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, ctx.node.attributes.get_int("axis", 1));
  auto rank = static_cast<int64_t>(x.shape.size());
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw_axis, rank, "axis", /*allow_rank=*/true));
  DimExpr outer(1), inner(1);
  for (int64_t i = 0; i < rank; ++i) {
    if (i < axis) {
      outer = outer * x.shape[i];
    } else {
      inner = inner * x.shape[i];
    }
  }
  ctx.outputs = {ValueType{x.dtype, Shape{outer, inner}}};
  return ok_status();
}

StatusOr<std::vector<int64_t>> reshape_target(const InferContext& ctx) {
  if (ctx.node.inputs.size() == 1) {
    // Opsets 1-4 carried the target in an attribute.
    if (!ctx.node.attributes.has("shape")) {
      return invalid_argument("expects input 1 'shape' (or attribute 'shape' before opset 5)");
    }
    return ctx.node.attributes.get_ints("shape", {});
  }
  KILN_ASSIGN_OR_RETURN(ValueType shape_type, required_input(ctx, 1, "shape"));
  KILN_RETURN_IF_ERROR(check_dtype(shape_type, 1, "shape", {DType::kI64}));
  KILN_RETURN_IF_ERROR(check_rank(shape_type, 1, "shape", 1));
  const Tensor* shape = constant_input(ctx, 1);
  if (shape == nullptr) {
    return unimplemented(
        "node '{}': input 1 'shape' of Reshape is computed at run time; kiln needs it to be a "
        "constant (fold the shape computation first)",
        ctx.node.name);
  }
  if (shape->dtype() != DType::kI64 || shape->rank() != 1) {
    return invalid_argument("input 1 'shape' constant must be a 1-D i64 tensor, got {} {}",
                            dtype_name(shape->dtype()), shape_to_string(shape->shape()));
  }
  auto values = shape->values<int64_t>();
  return std::vector<int64_t>(values.begin(), values.end());
}

Status infer_reshape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 2, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(ctx, 0, "data"));
  KILN_ASSIGN_OR_RETURN(int64_t allow_zero, ctx.node.attributes.get_int("allowzero", 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> target, reshape_target(ctx));
  std::string target_text = fmt::format("[{}]", fmt::join(target, ","));
  Shape out;
  DimExpr known(1);
  std::optional<size_t> inferred;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t v = target[i];
    if (v == -1) {
      if (inferred) {
        return invalid_argument("input 1 'shape' {} has more than one -1", target_text);
      }
      inferred = i;
      out.push_back(DimExpr(1));
      continue;
    }
    if (v < -1) {
      return invalid_argument("input 1 'shape' {} has invalid dim {} at {}", target_text, v, i);
    }
    DimExpr dim(v);
    if (v == 0) {
      has_zero = true;
      if (allow_zero == 0) {
        if (i >= x.shape.size()) {
          return invalid_argument(
              "input 1 'shape' {} copies dim {} (0) but input 0 'data' {} "
              "has rank {}",
              target_text, i, shape_to_string(x.shape), x.shape.size());
        }
        dim = x.shape[i];
      }
    }
    known = known * dim;
    out.push_back(dim);
  }
  if (allow_zero != 0 && has_zero && inferred) {
    return invalid_argument("input 1 'shape' {} has both 0 and -1 with attribute 'allowzero' = 1",
                            target_text);
  }
  DimExpr total = symbolic_element_count(x.shape);
  if (inferred) {
    if (known == DimExpr(0)) {
      return invalid_argument(
          "input 1 'shape' {}: cannot infer -1 when the other dims have no "
          "elements",
          target_text);
    }
    std::optional<DimExpr> quotient = total.exact_div(known);
    if (!quotient) {
      std::string message = fmt::format(
          "input 1 'shape' {}: cannot infer -1 for input 0 'data' {}: element count {} is not a "
          "multiple of {}",
          target_text, shape_to_string(x.shape), total.to_string(), known.to_string());
      if (total.is_constant() && known.is_constant()) {
        return Status(StatusCode::kInvalidArgument, std::move(message));
      }
      return Status(StatusCode::kUnimplemented, message + " (symbolically)");
    }
    out[*inferred] = *quotient;
  } else {
    KILN_RETURN_IF_ERROR(check_dims_equal(
        known, total,
        fmt::format("element count of input 1 'shape' {} (must match input 0 'data' {})",
                    target_text, shape_to_string(x.shape))));
  }
  ctx.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

Status infer_dropout(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 3, 1, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(ctx, 0, "data"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "data", {DType::kF32, DType::kF64, DType::kF16}));
  if (const Tensor* training = constant_input(ctx, 2)) {
    if (training->element_count() != 1 || training->dtype() != DType::kBool) {
      return invalid_argument("input 2 'training_mode' must be a single bool, got {} {}",
                              dtype_name(training->dtype()), shape_to_string(training->shape()));
    }
    if (element_as_int64(*training, 0) != 0) {
      return unimplemented("input 2 'training_mode' is true; only inference Dropout is supported");
    }
  }
  ctx.outputs = {x};
  if (ctx.node.outputs.size() > 1) ctx.outputs.push_back(ValueType{DType::kBool, x.shape});
  return ok_status();
}

Status dropout_kernel(const ir::Node& node, std::span<const Tensor> in, std::span<Tensor> out) {
  KILN_RETURN_IF_ERROR(copy_kernel(node, in, out));
  if (out.size() > 1) {
    for (uint8_t& v : out[1].mutable_values<uint8_t>()) v = 1;
  }
  return ok_status();
}

Status infer_constant(InferContext&) {
  return failed_precondition(
      "Constant nodes must be turned into constant values by the importer; this one reached op "
      "inference");
}

}  // namespace

void register_shape_ops(Registry& registry) {
  registry.add(make_op("Identity", infer_identity, copy_kernel));
  registry.add(make_op("Flatten", infer_flatten, copy_kernel));
  registry.add(make_op("Reshape", infer_reshape, copy_kernel));
  registry.add(make_op("Dropout", infer_dropout, dropout_kernel));
  registry.add(make_op("Constant", infer_constant, copy_kernel));
}

}  // namespace kiln::ops
