// Helpers for portable kernels' infer and make functions: arity, dtype and rank checks in the
// house style ("input 1 'W' must have rank 4, got 3"), axis normalization, constant integer
// operands, and dims that must be constant. Attributes: use Attributes::get_int etc.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/kernels/kernel.h"
#include "kiln/shape/assumption.h"

namespace kiln::kernels {

// "input 1 'W'"
std::string input_label(size_t index, std::string_view name);

// Node input and output counts within [min, max] (trailing absent inputs count as given).
Status check_arity(const InferArgs& args, size_t min_inputs, size_t max_inputs,
                   size_t min_outputs = 1, size_t max_outputs = 1);
// The type of a required input; error "input 1 'W' is required" when absent.
StatusOr<ValueType> required_input(const InferArgs& args, size_t index, std::string_view name);
// The type of an optional input; nullptr when absent or not given.
const ValueType* optional_input(const InferArgs& args, size_t index);
// The constant tensor of an input; nullptr when absent or not a constant.
const Tensor* constant_input(const InferArgs& args, size_t index);

// "input 0 'X' must have dtype f32 or f64, got i64".
Status check_dtype(const ValueType& type, size_t index, std::string_view name,
                   std::span<const DType> allowed);
Status check_dtype(const ValueType& type, size_t index, std::string_view name,
                   std::initializer_list<DType> allowed);
// "input 2 'B' must have dtype f32 like input 0 'X', got f64".
Status check_same_dtype(const ValueType& type, size_t index, std::string_view name, DType expected,
                        std::string_view expected_from);
Status check_rank(const ValueType& type, size_t index, std::string_view name, int64_t rank);
Status check_rank_range(const ValueType& type, size_t index, std::string_view name,
                        int64_t min_rank, int64_t max_rank);
// Rank 0, or rank 1 with one element: "input 1 'depth' must be a scalar, got shape [2]".
Status check_scalar(const ValueType& type, size_t index, std::string_view name);

// Dtype groups.
std::span<const DType> float_dtypes();    // f16 bf16 f32 f64
std::span<const DType> numeric_dtypes();  // floats and every integer
std::span<const DType> all_dtypes();      // numeric and bool
std::span<const DType> signed_dtypes();   // floats and signed integers
std::span<const DType> integer_dtypes();  // signed and unsigned integers

// Rejects attributes not in `known` (an ignored attribute could change the result):
// Unimplemented "attribute 'foo' is not supported".
Status check_known_attributes(const Attributes& attributes,
                              std::initializer_list<std::string_view> known);

// An axis in [-rank, rank - 1] (or [-rank, rank] when `allow_rank`), made non-negative. `what`
// names it in the error ("attribute 'axis'", "input 1 'axes' element 0").
StatusOr<int64_t> normalize_axis(int64_t axis, int64_t rank, std::string_view what,
                                 bool allow_rank = false);
// Normalizes a list of axes; duplicates are an error.
StatusOr<std::vector<int64_t>> normalize_axes(std::span<const int64_t> axes, int64_t rank,
                                              std::string_view what);

// The values of constant input `index` (any integer dtype), or nullopt when the input is absent.
// Unimplemented when the input is present but not a constant ("input 1 'shape' must be a
// constant (an initializer or computed from shapes)"); InvalidArgument for a non-integer dtype or
// a rank above 1.
StatusOr<std::optional<std::vector<int64_t>>> constant_ints(const InferArgs& args, size_t index,
                                                            std::string_view name);
// The element values of integer input `index` (rank <= 1) when known at compile time: from a
// constant, or as expressions of the symbols (args.values, a shape computation). nullopt when the
// input is absent; Unimplemented "... must be known at compile time" when present but unknown.
StatusOr<std::optional<std::vector<DimExpr>>> input_dim_values(const InferArgs& args, size_t index,
                                                               std::string_view name);
// Same, without the error, and for float and bool inputs too (a shape computation cast to float
// for torch.arange(S).float(), a comparison of dims), whose values are whole numbers (bool: 0 or
// 1): nullopt when absent, unknown or not whole. Rank <= 1 unless `any_rank`, which also gives
// the row-major values of a higher-rank input whose dims are constants (a pads tensor reshaped
// to [4, 2]): only ops that place elements by their dims (Reshape, Transpose, Slice) ask for it.
std::optional<std::vector<DimExpr>> known_dim_values(const InferArgs& args, size_t index,
                                                     bool any_rank = false);
// Sets output `index`'s element values (sizing args.output_values as needed).
void set_output_values(InferArgs& args, size_t index, std::vector<DimExpr> values);

// The values of a floating-point shape computation that need not be whole (S * 0.5 before its
// Floor): value i is numerators[i] / denominator, a power of two. Exact in f32 while the
// numerators stay below 2^24, as sizes do.
struct FractionValues {
  std::vector<DimExpr> numerators;
  int64_t denominator = 1;
};
// Input `index`'s values as fractions: whole or fractional known values, and f32/f64 constants of
// rank <= 1 whose elements are dyadic (0.5, 0.25, 3.0). nullopt for other dtypes, when unknown,
// or for a constant like 0.3 that f32 does not hold exactly.
std::optional<FractionValues> known_fraction_values(const InferArgs& args, size_t index);
// Sets output `index`'s values from fractions reduced to lowest terms (whole values go through
// set_output_values); leaves the output unknown when the denominator would pass
// kMaxValueDenominator.
void set_output_fractions(InferArgs& args, size_t index, FractionValues values);
inline constexpr int64_t kMaxValueDenominator = int64_t{1} << 20;

// Same for a float constant (any float dtype), e.g. Resize's scales.
StatusOr<std::optional<std::vector<double>>> constant_floats(const InferArgs& args, size_t index,
                                                             std::string_view name);

// InvalidArgument when `got` and `expected` are constants that differ. Symbolic dims that are not
// provably equal are assumed equal (assume_equal; the op's output takes `expected`). `what` names
// the dim.
Status check_dims_equal(const DimExpr& got, const DimExpr& expected, std::string_view what);

// Claims about dims that a shape rule relies on (kiln/shape/assumption.h). Each is decided when it
// can be: a claim that is false for constants is InvalidArgument naming `what`; a claim that is
// provable is OK; anything else is recorded as an assumption (checked when the runtime binds the
// sizes) and OK.
//   assume_equal:        a == b
//   assume_nonnegative:  e >= 0
//   assume_divisible:    e % divisor == 0 (divisor a positive constant or expression)
Status assume_equal(const DimExpr& a, const DimExpr& b, std::string_view what);
Status assume_nonnegative(const DimExpr& e, std::string_view what);
Status assume_divisible(const DimExpr& e, const DimExpr& divisor, std::string_view what);
// e / divisor where the op needs an exact quotient (an equal Split, SpaceToDepth, Reshape's -1):
// the exact polynomial quotient when there is one; for constants that do not divide,
// InvalidArgument "{what} is not a multiple of {divisor_label}{divisor}" (`what` should show e);
// for a constant divisor, floor(e / divisor) under the assumption that it divides e; otherwise
// Unimplemented saying it is not provably a multiple.
StatusOr<DimExpr> divide_exactly(const DimExpr& e, const DimExpr& divisor, std::string_view what,
                                 std::string_view divisor_label = "");
// The value of a dim that must be a compile-time constant; Unimplemented naming `what` if not.
StatusOr<int64_t> require_constant_dim(const DimExpr& dim, std::string_view what);

// Row-major element strides of `dims`.
std::vector<int64_t> row_major_strides(std::span<const int64_t> dims);
// Element count of concrete dims (the caller has validated them).
int64_t product(std::span<const int64_t> dims);
// The values of an 8-bit integer buffer (u8 or i8) minus its zero point, widened to int64 so that
// no sum of products overflows (MatMulInteger, ConvInteger). A zero point with several values is
// indexed by (i / block) % count; null or absent means 0.
std::vector<int64_t> centered(const ConstBuffer& t, const ConstBuffer* zero, int64_t block);
// The DType of an ONNX TensorProto.DataType code given as attribute `attribute` (Cast's 'to',
// EyeLike's 'dtype'): Unimplemented for the codes kiln has no dtype for (string, complex),
// InvalidArgument for a code ONNX does not define.
StatusOr<DType> dtype_from_onnx_code(int64_t code, std::string_view attribute);
// The product in double (no overflow), for cost estimates (OpDef::multiply_adds).
double product_as_double(std::span<const int64_t> dims);
// Dims of input/output i for OpDef::multiply_adds: null when absent or out of range.
const ConcreteShape* dims_at(std::span<const ConcreteShape* const> dims, size_t i);

}  // namespace kiln::kernels
