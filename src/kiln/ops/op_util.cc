#include "kiln/ops/op_util.h"

#include <utility>

namespace kiln::ops {

bool is_float_dtype(DType dtype) { return dtype == DType::kF32 || dtype == DType::kF64; }

std::string input_label(size_t index, std::string_view name) {
  return fmt::format("input {} '{}'", index, name);
}

Status check_arity(const InferContext& ctx, size_t min_inputs, size_t max_inputs,
                   size_t min_outputs, size_t max_outputs) {
  size_t inputs = ctx.node.inputs.size();
  if (inputs < min_inputs || inputs > max_inputs) {
    if (min_inputs == max_inputs) {
      return invalid_argument("expects {} inputs, got {}", min_inputs, inputs);
    }
    return invalid_argument("expects {} to {} inputs, got {}", min_inputs, max_inputs, inputs);
  }
  size_t outputs = ctx.node.outputs.size();
  if (outputs < min_outputs || outputs > max_outputs) {
    if (min_outputs == max_outputs) {
      return invalid_argument("expects {} outputs, got {}", min_outputs, outputs);
    }
    return invalid_argument("expects {} to {} outputs, got {}", min_outputs, max_outputs, outputs);
  }
  if (ctx.inputs.size() != inputs || ctx.constants.size() != inputs) {
    return internal_error("infer context has {} input types and {} constants for {} inputs",
                          ctx.inputs.size(), ctx.constants.size(), inputs);
  }
  return ok_status();
}

StatusOr<ValueType> required_input(const InferContext& ctx, size_t index, std::string_view name) {
  if (index >= ctx.inputs.size() || !ctx.inputs[index].has_value()) {
    return invalid_argument("{} is required", input_label(index, name));
  }
  return *ctx.inputs[index];
}

const ValueType* optional_input(const InferContext& ctx, size_t index) {
  if (index >= ctx.inputs.size() || !ctx.inputs[index].has_value()) return nullptr;
  return &*ctx.inputs[index];
}

const Tensor* constant_input(const InferContext& ctx, size_t index) {
  if (index >= ctx.constants.size()) return nullptr;
  return ctx.constants[index];
}

bool output_requested(const ir::Node& node, size_t index) {
  return index < node.outputs.size() && node.outputs[index] != ir::kAbsent;
}

Status check_dtype(const ValueType& type, size_t index, std::string_view name,
                   std::initializer_list<DType> allowed) {
  std::string names;
  for (DType d : allowed) {
    if (d == type.dtype) return ok_status();
    if (!names.empty()) names += " or ";
    names += dtype_name(d);
  }
  return invalid_argument("{} must have dtype {}, got {}", input_label(index, name), names,
                          dtype_name(type.dtype));
}

Status check_same_dtype(const ValueType& type, size_t index, std::string_view name, DType expected,
                        std::string_view expected_from) {
  if (type.dtype == expected) return ok_status();
  return invalid_argument("{} must have dtype {} like {}, got {}", input_label(index, name),
                          dtype_name(expected), expected_from, dtype_name(type.dtype));
}

Status check_rank(const ValueType& type, size_t index, std::string_view name, int64_t rank) {
  auto got = static_cast<int64_t>(type.shape.size());
  if (got == rank) return ok_status();
  return invalid_argument("{} must have rank {}, got {} (shape {})", input_label(index, name), rank,
                          got, shape_to_string(type.shape));
}

Status check_rank_range(const ValueType& type, size_t index, std::string_view name,
                        int64_t min_rank, int64_t max_rank) {
  auto got = static_cast<int64_t>(type.shape.size());
  if (got >= min_rank && got <= max_rank) return ok_status();
  return invalid_argument("{} must have rank {} to {}, got {} (shape {})", input_label(index, name),
                          min_rank, max_rank, got, shape_to_string(type.shape));
}

Status check_dims_equal(const DimExpr& got, const DimExpr& expected, std::string_view what) {
  if (got == expected) return ok_status();
  if (got.is_constant() && expected.is_constant()) {
    return invalid_argument("{} must be {}, got {}", what, expected.to_string(), got.to_string());
  }
  return unimplemented("{} must be {}, got {}, and kiln cannot prove them equal", what,
                       expected.to_string(), got.to_string());
}

StatusOr<int64_t> require_constant_dim(const DimExpr& dim, std::string_view what) {
  if (auto value = dim.constant_value()) return *value;
  return unimplemented("{} must be a constant, got symbolic '{}'", what, dim.to_string());
}

StatusOr<int64_t> normalize_axis(int64_t axis, int64_t rank, std::string_view attribute,
                                 bool allow_rank) {
  int64_t hi = allow_rank ? rank : rank - 1;
  if (axis < -rank || axis > hi) {
    return invalid_argument("attribute '{}' = {} is out of range [{}, {}] for rank {}", attribute,
                            axis, -rank, hi, rank);
  }
  return axis < 0 ? axis + rank : axis;
}

EvaluateFn checked_evaluate(InferFn infer, KernelFn kernel) {
  return [infer = std::move(infer), kernel = std::move(kernel)](
             const ir::Node& node, std::span<const Tensor> inputs,
             std::vector<Tensor>& outputs) -> Status {
    if (inputs.size() != node.inputs.size()) {
      return invalid_argument("got {} input tensors for {} node inputs", inputs.size(),
                              node.inputs.size());
    }
    InferContext ctx{node, {}, {}, {}};
    for (const Tensor& t : inputs) {
      if (t.empty_storage()) {
        ctx.inputs.emplace_back(std::nullopt);
        ctx.constants.push_back(nullptr);
      } else {
        ctx.inputs.emplace_back(ValueType{t.dtype(), shape_from_concrete(t.shape())});
        ctx.constants.push_back(&t);
      }
    }
    KILN_RETURN_IF_ERROR(infer(ctx));
    outputs.clear();
    for (size_t i = 0; i < ctx.outputs.size(); ++i) {
      ConcreteShape dims;
      for (const DimExpr& d : ctx.outputs[i].shape) {
        auto value = d.constant_value();
        if (!value) {
          return internal_error("output {} has symbolic dim '{}' for concrete inputs", i,
                                d.to_string());
        }
        if (*value < 0) return invalid_argument("output {} would have negative dim {}", i, *value);
        dims.push_back(*value);
      }
      KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(ctx.outputs[i].dtype, std::move(dims)));
      outputs.push_back(std::move(out));
    }
    return kernel(node, inputs, std::span<Tensor>(outputs));
  };
}

OpDef make_op(std::string op_type, InferFn infer, KernelFn kernel, int64_t since_version) {
  EvaluateFn evaluate = checked_evaluate(infer, std::move(kernel));
  return OpDef{std::move(op_type), std::move(infer), std::move(evaluate), since_version};
}

std::vector<double> to_doubles(const Tensor& tensor) {
  std::vector<double> out(static_cast<size_t>(tensor.element_count()));
  switch (tensor.dtype()) {
    case DType::kF32: {
      auto v = tensor.values<float>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = v[i];
      break;
    }
    case DType::kF64: {
      auto v = tensor.values<double>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = v[i];
      break;
    }
    default:
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = element_as_double(tensor, static_cast<int64_t>(i));
      }
  }
  return out;
}

void store_doubles(std::span<const double> values, Tensor& out) {
  KILN_CHECK(static_cast<int64_t>(values.size()) == out.element_count());
  switch (out.dtype()) {
    case DType::kF32: {
      auto v = out.mutable_values<float>();
      for (size_t i = 0; i < values.size(); ++i) v[i] = static_cast<float>(values[i]);
      return;
    }
    case DType::kF64: {
      auto v = out.mutable_values<double>();
      for (size_t i = 0; i < values.size(); ++i) v[i] = values[i];
      return;
    }
    default: break;
  }
  KILN_CHECK(false && "store_doubles: output dtype must be f32 or f64");
}

std::vector<int64_t> row_major_strides(const ConcreteShape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

}  // namespace kiln::ops
