#include "kiln/kernels/infer_util.h"

#include <array>
#include <cmath>

#include "kiln/base/checked_math.h"

namespace kiln::kernels {

std::string input_label(size_t index, std::string_view name) {
  return fmt::format("input {} '{}'", index, name);
}

Status check_arity(const InferArgs& args, size_t min_inputs, size_t max_inputs, size_t min_outputs,
                   size_t max_outputs) {
  size_t inputs = args.inputs.size();
  if (inputs < min_inputs || inputs > max_inputs) {
    if (min_inputs == max_inputs) {
      return invalid_argument("expects {} inputs, got {}", min_inputs, inputs);
    }
    return invalid_argument("expects {} to {} inputs, got {}", min_inputs, max_inputs, inputs);
  }
  size_t outputs = args.output_count;
  if (outputs < min_outputs || outputs > max_outputs) {
    if (min_outputs == max_outputs) {
      return invalid_argument("expects {} outputs, got {}", min_outputs, outputs);
    }
    return invalid_argument("expects {} to {} outputs, got {}", min_outputs, max_outputs, outputs);
  }
  if (args.constants.size() != inputs) {
    return internal_error("infer arguments have {} input types and {} constants", inputs,
                          args.constants.size());
  }
  return ok_status();
}

StatusOr<ValueType> required_input(const InferArgs& args, size_t index, std::string_view name) {
  if (index >= args.inputs.size() || !args.inputs[index].has_value()) {
    return invalid_argument("{} is required", input_label(index, name));
  }
  return *args.inputs[index];
}

const ValueType* optional_input(const InferArgs& args, size_t index) {
  if (index >= args.inputs.size() || !args.inputs[index].has_value()) return nullptr;
  return &*args.inputs[index];
}

const Tensor* constant_input(const InferArgs& args, size_t index) {
  if (index >= args.constants.size()) return nullptr;
  return args.constants[index];
}

Status check_dtype(const ValueType& type, size_t index, std::string_view name,
                   std::span<const DType> allowed) {
  std::string names;
  for (DType d : allowed) {
    if (d == type.dtype) return ok_status();
    if (!names.empty()) names += " or ";
    names += dtype_name(d);
  }
  return unimplemented("{} must have dtype {}, got {}", input_label(index, name), names,
                       dtype_name(type.dtype));
}

Status check_dtype(const ValueType& type, size_t index, std::string_view name,
                   std::initializer_list<DType> allowed) {
  return check_dtype(type, index, name, std::span<const DType>(allowed.begin(), allowed.size()));
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

Status check_scalar(const ValueType& type, size_t index, std::string_view name) {
  if (type.shape.empty() || (type.shape.size() == 1 && type.shape[0] == DimExpr(1))) {
    return ok_status();
  }
  return invalid_argument("{} must be a scalar, got shape {}", input_label(index, name),
                          shape_to_string(type.shape));
}

namespace {
constexpr std::array kFloat = {DType::kF16, DType::kBF16, DType::kF32, DType::kF64};
constexpr std::array kInteger = {DType::kI8, DType::kI16, DType::kI32, DType::kI64,
                                 DType::kU8, DType::kU16, DType::kU32, DType::kU64};
constexpr std::array kSigned = {DType::kF16, DType::kBF16, DType::kF32, DType::kF64,
                                DType::kI8,  DType::kI16,  DType::kI32, DType::kI64};
constexpr std::array kNumeric = {DType::kF16, DType::kBF16, DType::kF32, DType::kF64,
                                 DType::kI8,  DType::kI16,  DType::kI32, DType::kI64,
                                 DType::kU8,  DType::kU16,  DType::kU32, DType::kU64};
constexpr std::array kAll = {DType::kF16, DType::kBF16, DType::kF32, DType::kF64, DType::kI8,
                             DType::kI16, DType::kI32,  DType::kI64, DType::kU8,  DType::kU16,
                             DType::kU32, DType::kU64,  DType::kBool};
}  // namespace

std::span<const DType> float_dtypes() { return kFloat; }
std::span<const DType> numeric_dtypes() { return kNumeric; }
std::span<const DType> all_dtypes() { return kAll; }
std::span<const DType> signed_dtypes() { return kSigned; }
std::span<const DType> integer_dtypes() { return kInteger; }

Status check_known_attributes(const Attributes& attributes,
                              std::initializer_list<std::string_view> known) {
  for (const auto& [name, value] : attributes.all()) {
    bool found = false;
    for (std::string_view k : known) found = found || k == name;
    if (!found) return unimplemented("attribute '{}' is not supported", name);
  }
  return ok_status();
}

StatusOr<int64_t> normalize_axis(int64_t axis, int64_t rank, std::string_view what,
                                 bool allow_rank) {
  int64_t hi = allow_rank ? rank : rank - 1;
  if (axis < -rank || axis > hi) {
    return invalid_argument("{} = {} is out of range [{}, {}] for rank {}", what, axis, -rank, hi,
                            rank);
  }
  return axis < 0 ? axis + rank : axis;
}

StatusOr<std::vector<int64_t>> normalize_axes(std::span<const int64_t> axes, int64_t rank,
                                              std::string_view what) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t a,
                          normalize_axis(axes[i], rank, fmt::format("{} element {}", what, i)));
    if (seen[a]) return invalid_argument("{} lists axis {} twice", what, a);
    seen[a] = true;
    out.push_back(a);
  }
  return out;
}

namespace {

StatusOr<const Tensor*> constant_vector(const InferArgs& args, size_t index,
                                        std::string_view name) {
  if (optional_input(args, index) == nullptr) return nullptr;
  const Tensor* t = constant_input(args, index);
  if (t == nullptr) {
    return unimplemented(
        "{} must be a constant (an initializer, or computed from shapes and constants)",
        input_label(index, name));
  }
  if (t->rank() > 1) {
    return invalid_argument("{} must be a scalar or 1-D, got rank {}", input_label(index, name),
                            t->rank());
  }
  return t;
}

}  // namespace

StatusOr<std::optional<std::vector<int64_t>>> constant_ints(const InferArgs& args, size_t index,
                                                            std::string_view name) {
  KILN_ASSIGN_OR_RETURN(const Tensor* t, constant_vector(args, index, name));
  if (t == nullptr) return std::optional<std::vector<int64_t>>();
  if (!is_integer(t->dtype())) {
    return invalid_argument("{} must have an integer dtype, got {}", input_label(index, name),
                            dtype_name(t->dtype()));
  }
  std::vector<int64_t> out(static_cast<size_t>(t->element_count()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = element_as_int64(*t, static_cast<int64_t>(i));
  return std::optional<std::vector<int64_t>>(std::move(out));
}

StatusOr<std::optional<std::vector<double>>> constant_floats(const InferArgs& args, size_t index,
                                                             std::string_view name) {
  KILN_ASSIGN_OR_RETURN(const Tensor* t, constant_vector(args, index, name));
  if (t == nullptr) return std::optional<std::vector<double>>();
  if (!is_float(t->dtype())) {
    return invalid_argument("{} must have a float dtype, got {}", input_label(index, name),
                            dtype_name(t->dtype()));
  }
  std::vector<double> out(static_cast<size_t>(t->element_count()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = element_as_double(*t, static_cast<int64_t>(i));
  return std::optional<std::vector<double>>(std::move(out));
}

namespace {

bool holds_dim_values(DType dtype) {
  return is_integer(dtype) || is_float(dtype) || dtype == DType::kBool;
}

int64_t value_denominator(const InferArgs& args, size_t index) {
  return index < args.value_denominators.size() ? args.value_denominators[index] : 1;
}

// Whether infer may read values of an input of this shape: rank <= 1, or with `any_rank`
// constant dims of at most kMaxRankedValues elements (also the bound for rank <= 1 then, so that
// a Reshape of a large constant never turns its data into expressions).
constexpr int64_t kMaxRankedValues = 4096;
bool values_readable(const Shape& shape, bool any_rank) {
  if (!any_rank) return shape.size() <= 1;
  int64_t count = 1;
  for (const DimExpr& d : shape) {
    auto v = d.constant_value();
    if (!v || *v < 0 || *v > kMaxRankedValues) return false;
    count *= *v;
    if (count > kMaxRankedValues) return false;
  }
  return true;
}

}  // namespace

std::optional<std::vector<DimExpr>> known_dim_values(const InferArgs& args, size_t index,
                                                     bool any_rank) {
  const ValueType* type = optional_input(args, index);
  if (type == nullptr || !values_readable(type->shape, any_rank) ||
      !holds_dim_values(type->dtype) || value_denominator(args, index) != 1) {
    return std::nullopt;
  }
  if (const Tensor* t = constant_input(args, index)) {
    std::vector<DimExpr> out;
    for (int64_t i = 0; i < t->element_count(); ++i) {
      if (is_float(t->dtype())) {
        // Only whole numbers well inside int64 are values of a shape computation.
        const double v = element_as_double(*t, i);
        if (!(std::abs(v) < 0x1p62) || v != std::trunc(v)) return std::nullopt;
        out.emplace_back(static_cast<int64_t>(v));
      } else {
        out.emplace_back(element_as_int64(*t, i));
      }
    }
    return out;
  }
  if (index < args.values.size() && args.values[index] != nullptr && !args.values[index]->empty()) {
    return *args.values[index];
  }
  // A zero-element tensor's values are known: there are none.
  if (type->shape.size() == 1 && type->shape[0] == DimExpr(0)) return std::vector<DimExpr>{};
  return std::nullopt;
}

StatusOr<std::optional<std::vector<DimExpr>>> input_dim_values(const InferArgs& args, size_t index,
                                                               std::string_view name) {
  const ValueType* type = optional_input(args, index);
  if (type == nullptr) return std::optional<std::vector<DimExpr>>();
  if (!is_integer(type->dtype)) {
    return invalid_argument("{} must have an integer dtype, got {}", input_label(index, name),
                            dtype_name(type->dtype));
  }
  if (type->shape.size() > 1) {
    return invalid_argument("{} must be a scalar or 1-D, got rank {}", input_label(index, name),
                            type->shape.size());
  }
  auto values = known_dim_values(args, index);
  if (!values) {
    return unimplemented(
        "{} must be known at compile time (a constant, or computed from shapes and constants)",
        input_label(index, name));
  }
  return std::optional<std::vector<DimExpr>>(std::move(*values));
}

void set_output_values(InferArgs& args, size_t index, std::vector<DimExpr> values) {
  if (args.output_values.size() < args.output_count) args.output_values.resize(args.output_count);
  if (index < args.output_values.size()) args.output_values[index] = std::move(values);
}

std::optional<FractionValues> known_fraction_values(const InferArgs& args, size_t index) {
  const ValueType* type = optional_input(args, index);
  if (type == nullptr || type->shape.size() > 1 ||
      (type->dtype != DType::kF32 && type->dtype != DType::kF64)) {
    return std::nullopt;
  }
  if (const Tensor* t = constant_input(args, index)) {
    // The smallest power of two that makes every element whole.
    std::vector<double> elements;
    int64_t denominator = 1;
    for (int64_t i = 0; i < t->element_count(); ++i) {
      const double v = element_as_double(*t, i);
      if (!(std::abs(v) < 0x1p40)) return std::nullopt;
      while (v * static_cast<double>(denominator) !=
             std::trunc(v * static_cast<double>(denominator))) {
        denominator *= 2;
        if (denominator > kMaxValueDenominator) return std::nullopt;
      }
      elements.push_back(v);
    }
    FractionValues out{{}, denominator};
    for (double v : elements) {
      out.numerators.emplace_back(static_cast<int64_t>(v * static_cast<double>(denominator)));
    }
    return out;
  }
  if (index < args.values.size() && args.values[index] != nullptr && !args.values[index]->empty()) {
    return FractionValues{*args.values[index], value_denominator(args, index)};
  }
  return std::nullopt;
}

void set_output_fractions(InferArgs& args, size_t index, FractionValues values) {
  while (values.denominator > 1 && values.denominator % 2 == 0) {
    std::vector<DimExpr> halves;
    for (const DimExpr& n : values.numerators) {
      auto half = n.exact_div(DimExpr(2));
      if (!half) break;
      halves.push_back(std::move(*half));
    }
    if (halves.size() != values.numerators.size()) break;
    values.numerators = std::move(halves);
    values.denominator /= 2;
  }
  if (values.denominator < 1 || values.denominator > kMaxValueDenominator ||
      (values.denominator & (values.denominator - 1)) != 0) {
    return;
  }
  if (values.denominator != 1) {
    if (args.output_value_denominators.size() < args.output_count) {
      args.output_value_denominators.resize(args.output_count, 1);
    }
    if (index >= args.output_value_denominators.size()) return;
    args.output_value_denominators[index] = values.denominator;
  }
  set_output_values(args, index, std::move(values.numerators));
}

Status check_dims_equal(const DimExpr& got, const DimExpr& expected, std::string_view what) {
  if (got == expected) return ok_status();
  if (got.is_constant() && expected.is_constant()) {
    return invalid_argument("{} must be {}, got {}", what, expected.to_string(), got.to_string());
  }
  return assume_equal(got, expected, what);
}

Status assume_equal(const DimExpr& a, const DimExpr& b, std::string_view what) {
  if (a == b) return ok_status();
  if (a.is_constant() && b.is_constant()) {
    return invalid_argument("{}: {} != {}", what, a.to_string(), b.to_string());
  }
  // Order the sides canonically so that S == T and T == S are one assumption.
  const bool swap = b.to_string() < a.to_string();
  record_assumption(Assumption{Assumption::Kind::kEqual, swap ? b : a, swap ? a : b, {}});
  return ok_status();
}

Status assume_nonnegative(const DimExpr& e, std::string_view what) {
  if (auto value = e.constant_value()) {
    if (*value >= 0) return ok_status();
    return invalid_argument("{} is negative ({})", what, *value);
  }
  if (e.provably_nonnegative()) return ok_status();
  record_assumption(Assumption{Assumption::Kind::kNonNegative, e, DimExpr(0), {}});
  return ok_status();
}

Status assume_divisible(const DimExpr& e, const DimExpr& divisor, std::string_view what) {
  auto d = divisor.constant_value();
  if (d && *d <= 0) return invalid_argument("{}: divisor {} is not positive", what, *d);
  if (auto value = e.constant_value(); value && d) {
    if (*value % *d == 0) return ok_status();
    return invalid_argument("{}: {} is not divisible by {}", what, *value, *d);
  }
  if (e.exact_div(divisor).has_value()) return ok_status();
  record_assumption(Assumption{Assumption::Kind::kDivisible, e, divisor, {}});
  return ok_status();
}

StatusOr<DimExpr> divide_exactly(const DimExpr& e, const DimExpr& divisor, std::string_view what,
                                 std::string_view divisor_label) {
  if (auto d = divisor.constant_value(); d && *d <= 0) {
    return invalid_argument("{}: divisor {} is not positive", what, *d);
  }
  if (auto q = e.exact_div(divisor)) return *q;
  if (e.is_constant() && divisor.is_constant()) {
    return invalid_argument("{} is not a multiple of {}{}", what, divisor_label,
                            divisor.to_string());
  }
  if (auto d = divisor.constant_value()) {
    KILN_RETURN_IF_ERROR(assume_divisible(e, divisor, what));
    return e.floor_div(*d);
  }
  return unimplemented("{} is not provably a multiple of {}{}", what, divisor_label,
                       divisor.to_string());
}

StatusOr<int64_t> require_constant_dim(const DimExpr& dim, std::string_view what) {
  if (auto value = dim.constant_value()) return *value;
  return unimplemented("{} must be a constant, got symbolic '{}'", what, dim.to_string());
}

std::vector<int64_t> row_major_strides(std::span<const int64_t> dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

std::vector<int64_t> centered(const ConstBuffer& t, const ConstBuffer* zero, int64_t block) {
  auto value = [](const ConstBuffer& b, int64_t i) -> int64_t {
    return b.dtype == DType::kU8 ? int64_t{b.as<uint8_t>()[i]} : int64_t{b.as<int8_t>()[i]};
  };
  const int64_t n = t.element_count();
  const int64_t zeros = zero != nullptr && zero->data != nullptr ? zero->element_count() : 0;
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t z = 0;
    if (zeros == 1) z = value(*zero, 0);
    if (zeros > 1) z = value(*zero, (i / block) % zeros);
    out[i] = value(t, i) - z;
  }
  return out;
}

StatusOr<DType> dtype_from_onnx_code(int64_t code, std::string_view attribute) {
  switch (code) {
    case 1: return DType::kF32;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 4: return DType::kU16;
    case 5: return DType::kI16;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    case 10: return DType::kF16;
    case 11: return DType::kF64;
    case 12: return DType::kU32;
    case 13: return DType::kU64;
    case 16: return DType::kBF16;
    case 8: return unimplemented("attribute '{}' = 8 (STRING) is not supported", attribute);
    case 14: return unimplemented("attribute '{}' = 14 (COMPLEX64) is not supported", attribute);
    case 15: return unimplemented("attribute '{}' = 15 (COMPLEX128) is not supported", attribute);
    default:
      return invalid_argument("attribute '{}' = {} is not an ONNX data type", attribute, code);
  }
}

double product_as_double(std::span<const int64_t> dims) {
  double p = 1;
  for (int64_t d : dims) p *= static_cast<double>(d);
  return p;
}

const ConcreteShape* dims_at(std::span<const ConcreteShape* const> dims, size_t i) {
  return i < dims.size() ? dims[i] : nullptr;
}

int64_t product(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace kiln::kernels
