// Helpers shared by the op implementations: input/attribute checks for infer functions (with
// error messages in the house style "input 1 'W' must have rank 4, got 3"), symbolic dim checks,
// and the evaluation wrapper that makes every reference kernel re-validate its concrete inputs.
// Internal to kiln_ops; not part of the public contract in registry.h.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/kernels/broadcast.h"
#include "kiln/ops/registry.h"

namespace kiln::ops {

using kernels::broadcast_index_map;
using kernels::broadcast_shapes;

bool is_float_dtype(DType dtype);

// "input 1 'W'"
std::string input_label(size_t index, std::string_view name);

// Node input and output counts within [min, max] (trailing absent inputs count as given).
Status check_arity(const InferContext& ctx, size_t min_inputs, size_t max_inputs,
                   size_t min_outputs, size_t max_outputs);
// The type of a required input; error "input 1 'W' is required" when absent.
StatusOr<ValueType> required_input(const InferContext& ctx, size_t index, std::string_view name);
// The type of an optional input; nullptr when absent or not given.
const ValueType* optional_input(const InferContext& ctx, size_t index);
// The constant tensor of an input; nullptr when absent or not a constant.
const Tensor* constant_input(const InferContext& ctx, size_t index);
// True when the node has output `index` and it is not kAbsent.
bool output_requested(const ir::Node& node, size_t index);

// "input 0 'X' must have dtype f32 or f64, got i64".
Status check_dtype(const ValueType& type, size_t index, std::string_view name,
                   std::initializer_list<DType> allowed);
// "input 2 'B' must have dtype f32 like input 0 'X', got f64".
Status check_same_dtype(const ValueType& type, size_t index, std::string_view name, DType expected,
                        std::string_view expected_from);
Status check_rank(const ValueType& type, size_t index, std::string_view name, int64_t rank);
Status check_rank_range(const ValueType& type, size_t index, std::string_view name,
                        int64_t min_rank, int64_t max_rank);

// Passes when `got` and `expected` are provably equal. InvalidArgument when both are constants
// that differ, Unimplemented when a symbol makes equality unprovable. `what` names the dim
// ("input 1 'W' dim 1 times group").
Status check_dims_equal(const DimExpr& got, const DimExpr& expected, std::string_view what);
// The value of a dim that must be a compile-time constant; Unimplemented naming `what` if not.
StatusOr<int64_t> require_constant_dim(const DimExpr& dim, std::string_view what);

// An axis attribute in [-rank, rank - 1] (or [-rank, rank] when `allow_rank`), made non-negative.
StatusOr<int64_t> normalize_axis(int64_t axis, int64_t rank, std::string_view attribute,
                                 bool allow_rank = false);

// A reference kernel: `outputs` arrive created with the dtypes and concrete shapes that the op's
// infer function gave for these exact inputs, so the kernel may rely on everything infer checks.
using KernelFn = std::function<Status(const ir::Node& node, std::span<const Tensor> inputs,
                                      std::span<Tensor> outputs)>;
// Wraps infer + kernel into an EvaluateFn: runs infer on the concrete inputs (all treated as
// constants), creates the outputs, then calls the kernel.
EvaluateFn checked_evaluate(InferFn infer, KernelFn kernel);
OpDef make_op(std::string op_type, InferFn infer, KernelFn kernel, int64_t since_version = 1);

// Element values as double (any numeric dtype except f16).
std::vector<double> to_doubles(const Tensor& tensor);
// Writes `values` into `out`, rounding to its dtype (f32 or f64; others are a programmer error).
void store_doubles(std::span<const double> values, Tensor& out);
// Row-major strides in elements.
std::vector<int64_t> row_major_strides(const ConcreteShape& shape);

}  // namespace kiln::ops
