// Broadcasting elementwise ops of two or more tensors: arithmetic (Add Sub Mul Div Mod Pow),
// comparison (Equal Less Greater LessOrEqual GreaterOrEqual), logic (And Or Xor), BitShift, PRelu,
// Where, and the variadic Min Max Sum Mean. Floating-point math runs in the storage type's
// compute type (f32 for f16/bf16/f32, f64 for f64), except Pow (below). Integer arithmetic wraps
// (two's complement); integer Div truncates toward zero and Mod by zero is an error naming the
// element, as is Div by zero; INT_MIN / -1 wraps to INT_MIN.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/base/checked_math.h"
#include "kiln/kernels/broadcast.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/numeric_convert.h"

namespace kiln::kernels {
namespace {

enum class Op {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMod,
  kBitShift,
  kAnd,
  kOr,
  kXor,
  kEqual,
  kLess,
  kGreater,
  kLessOrEqual,
  kGreaterOrEqual,
  kPRelu,
  kMin,
  kMax,
  kSum,
  kMean,
};

enum class Domain { kNumeric, kFloat, kUnsigned, kBool, kAll };

constexpr Domain domain_of(Op op) {
  switch (op) {
    case Op::kBitShift: return Domain::kUnsigned;
    case Op::kAnd:
    case Op::kOr:
    case Op::kXor: return Domain::kBool;
    case Op::kEqual: return Domain::kAll;
    case Op::kSum:
    case Op::kMean: return Domain::kFloat;
    default: return Domain::kNumeric;
  }
}

template <typename T>
constexpr bool in_domain(Domain d) {
  switch (d) {
    case Domain::kNumeric: return !std::is_same_v<T, Bool>;
    case Domain::kFloat: return is_float_storage_v<T>;
    case Domain::kUnsigned: return std::is_integral_v<T> && std::is_unsigned_v<T>;
    case Domain::kBool: return std::is_same_v<T, Bool>;
    case Domain::kAll: return true;
  }
  return false;
}

std::span<const DType> domain_dtypes(Domain d) {
  static constexpr DType kBoolOnly[] = {DType::kBool};
  static constexpr DType kUnsignedOnly[] = {DType::kU8, DType::kU16, DType::kU32, DType::kU64};
  switch (d) {
    case Domain::kNumeric: return numeric_dtypes();
    case Domain::kFloat: return float_dtypes();
    case Domain::kUnsigned: return kUnsignedOnly;
    case Domain::kBool: return kBoolOnly;
    case Domain::kAll: return all_dtypes();
  }
  return {};
}

constexpr bool is_predicate(Op op) {
  return op == Op::kEqual || op == Op::kLess || op == Op::kGreater || op == Op::kLessOrEqual ||
         op == Op::kGreaterOrEqual;
}

constexpr bool is_variadic(Op op) {
  return op == Op::kMin || op == Op::kMax || op == Op::kSum || op == Op::kMean;
}

struct OpInfo {
  Op op;
  std::string_view op_type;
  std::string_view a, b;       // input names (variadic: unused, data_K)
  std::string_view attribute;  // the one attribute it takes, or empty
};

constexpr OpInfo kOps[] = {
    {Op::kAdd, "Add", "A", "B", {}},
    {Op::kSub, "Sub", "A", "B", {}},
    {Op::kMul, "Mul", "A", "B", {}},
    {Op::kDiv, "Div", "A", "B", {}},
    {Op::kMod, "Mod", "A", "B", "fmod"},
    {Op::kBitShift, "BitShift", "X", "Y", "direction"},
    {Op::kAnd, "And", "A", "B", {}},
    {Op::kOr, "Or", "A", "B", {}},
    {Op::kXor, "Xor", "A", "B", {}},
    {Op::kEqual, "Equal", "A", "B", {}},
    {Op::kLess, "Less", "A", "B", {}},
    {Op::kGreater, "Greater", "A", "B", {}},
    {Op::kLessOrEqual, "LessOrEqual", "A", "B", {}},
    {Op::kGreaterOrEqual, "GreaterOrEqual", "A", "B", {}},
    {Op::kPRelu, "PRelu", "X", "slope", {}},
    {Op::kMin, "Min", {}, {}, {}},
    {Op::kMax, "Max", {}, {}, {}},
    {Op::kSum, "Sum", {}, {}, {}},
    {Op::kMean, "Mean", {}, {}, {}},
};

constexpr const OpInfo& info_of(Op op) {
  for (const OpInfo& info : kOps) {
    if (info.op == op) return info;
  }
  return kOps[0];
}

struct Params {
  bool fmod = false;  // Mod
  bool left = true;   // BitShift
};

StatusOr<Params> read_params(Op op, const Attributes& a, DType dtype) {
  Params p;
  if (op == Op::kMod) {
    KILN_ASSIGN_OR_RETURN(int64_t fmod, a.get_int("fmod", 0));
    if (fmod != 0 && fmod != 1)
      return invalid_argument("attribute 'fmod' must be 0 or 1, got {}", fmod);
    p.fmod = fmod == 1;
    if (!p.fmod && is_float(dtype)) {
      return invalid_argument("attribute 'fmod' must be 1 for floating-point inputs (got {})",
                              dtype_name(dtype));
    }
  } else if (op == Op::kBitShift) {
    if (!a.has("direction")) return invalid_argument("attribute 'direction' is required");
    KILN_ASSIGN_OR_RETURN(std::string direction, a.get_string("direction", ""));
    if (direction != "LEFT" && direction != "RIGHT") {
      return invalid_argument("attribute 'direction' must be LEFT or RIGHT, got '{}'", direction);
    }
    p.left = direction == "LEFT";
  }
  return p;
}

// Wrapping integer arithmetic: computed in uint64 (defined for every width) and narrowed back.
template <typename C>
C wrap_add(C a, C b) {
  return static_cast<C>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
template <typename C>
C wrap_sub(C a, C b) {
  return static_cast<C>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
template <typename C>
C wrap_mul(C a, C b) {
  return static_cast<C>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// The expression of `O` on one pair of compute values. Integer divisors are nonzero (checked
// before the loop).
template <Op O, typename C>
auto apply(C a, C b, const Params& p) {
  constexpr bool kInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;
  if constexpr (O == Op::kAdd || O == Op::kSum || O == Op::kMean) {
    if constexpr (kInt)
      return wrap_add(a, b);
    else
      return static_cast<C>(a + b);
  } else if constexpr (O == Op::kSub) {
    if constexpr (kInt)
      return wrap_sub(a, b);
    else
      return static_cast<C>(a - b);
  } else if constexpr (O == Op::kMul) {
    if constexpr (kInt)
      return wrap_mul(a, b);
    else
      return static_cast<C>(a * b);
  } else if constexpr (O == Op::kDiv) {
    if constexpr (kInt) {
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return wrap_sub(C(0), a);  // INT_MIN / -1 wraps
      }
      return static_cast<C>(a / b);
    } else {
      return static_cast<C>(a / b);
    }
  } else if constexpr (O == Op::kMod) {
    if constexpr (kInt) {
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return C(0);
        C r = static_cast<C>(a % b);
        // Python's mod takes the divisor's sign.
        if (!p.fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
        return r;
      } else {
        return static_cast<C>(a % b);
      }
    } else {
      return static_cast<C>(std::fmod(a, b));
    }
  } else if constexpr (O == Op::kBitShift) {
    constexpr uint64_t kBits = sizeof(C) * 8;
    if (static_cast<uint64_t>(b) >= kBits) return C(0);
    return p.left ? static_cast<C>(static_cast<uint64_t>(a) << b)
                  : static_cast<C>(static_cast<uint64_t>(a) >> b);
  } else if constexpr (O == Op::kAnd) {
    return a && b;
  } else if constexpr (O == Op::kOr) {
    return a || b;
  } else if constexpr (O == Op::kXor) {
    return a != b;
  } else if constexpr (O == Op::kEqual) {
    return a == b;
  } else if constexpr (O == Op::kLess) {
    return a < b;
  } else if constexpr (O == Op::kGreater) {
    return a > b;
  } else if constexpr (O == Op::kLessOrEqual) {
    return a <= b;
  } else if constexpr (O == Op::kGreaterOrEqual) {
    return a >= b;
  } else if constexpr (O == Op::kPRelu) {
    if constexpr (kInt)
      return a < 0 ? wrap_mul(a, b) : a;
    else
      return a < 0 ? static_cast<C>(a * b) : a;  // NaN stays NaN
  } else if constexpr (O == Op::kMin || O == Op::kMax) {
    if constexpr (!kInt) {
      // numpy's minimum/maximum: NaN in either operand gives NaN.
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    if constexpr (O == Op::kMin)
      return b < a ? b : a;
    else
      return a < b ? b : a;
  }
}

constexpr bool checks_zero_divisor(Op op) { return op == Op::kDiv || op == Op::kMod; }

// Integer Div and Mod: every divisor element is used (the output is nonempty), so any zero is
// an error. Scanned before the loop so the error names the first one whatever the threads.
template <typename T>
Status check_no_zero(const ConstBuffer& b, std::string_view label) {
  const int64_t n = b.element_count();
  const T* p = b.as<T>();
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] == 0) {
      return invalid_argument("integer division by zero: {} element {} is 0", label, i);
    }
  }
  return ok_status();
}

template <Op O>
class BinaryKernel : public Kernel {
 public:
  BinaryKernel(BroadcastIter it, Params params) : it_(std::move(it)), params_(params) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (in_domain<T>(domain_of(O))) {
        using C = compute_t<T>;
        if constexpr (checks_zero_divisor(O) && std::is_integral_v<T>) {
          if (it_.count() > 0) {
            KILN_RETURN_IF_ERROR(check_no_zero<T>(in[1], input_label(1, info_of(O).b)));
          }
        }
        using R = std::conditional_t<is_predicate(O), Bool, T>;
        const T* a = in[0].as<T>();
        const T* b = in[1].as<T>();
        R* y = out[0].as<R>();
        const Params p = params_;
        it_.for_each<2>([&](int64_t o, int64_t n, const std::array<int64_t, 2>& off,
                            const std::array<int64_t, 2>& st) {
          const T* pa = a + off[0];
          const T* pb = b + off[1];
          if (st[0] == 1 && st[1] == 1) {
            for (int64_t j = 0; j < n; ++j) {
              store(y, o + j, apply<O, C>(load(pa, j), load(pb, j), p));
            }
          } else {
            for (int64_t j = 0; j < n; ++j) {
              store(y, o + j, apply<O, C>(load(pa, j * st[0]), load(pb, j * st[1]), p));
            }
          }
        });
        return ok_status();
      } else {
        return internal_error("{} has no {} instance", info_of(O).op_type, dtype_name(in[0].dtype));
      }
    });
  }

 private:
  BroadcastIter it_;
  Params params_;
};

// Min, Max, Sum, Mean: a left fold over the inputs in the output buffer, y = op(y, x_k), so each
// element is computed in input order whatever its position; Mean divides at the end.
template <Op O>
class VariadicKernel : public Kernel {
 public:
  explicit VariadicKernel(std::vector<BroadcastIter> its) : its_(std::move(its)) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (in_domain<T>(domain_of(O))) {
        using C = compute_t<T>;
        T* y = out[0].as<T>();
        const T* x0 = in[0].as<T>();
        its_[0].for_each<1>([&](int64_t o, int64_t n, const std::array<int64_t, 1>& off,
                                const std::array<int64_t, 1>& st) {
          for (int64_t j = 0; j < n; ++j) y[o + j] = x0[off[0] + j * st[0]];
        });
        for (size_t k = 1; k < in.size(); ++k) {
          const T* x = in[k].as<T>();
          its_[k].for_each<2>([&](int64_t o, int64_t n, const std::array<int64_t, 2>& off,
                                  const std::array<int64_t, 2>& st) {
            for (int64_t j = 0; j < n; ++j) {
              store(y, o + j, apply<O, C>(load(y, o + j), load(x, off[1] + j * st[1]), Params{}));
            }
          });
        }
        if constexpr (O == Op::kMean) {
          const C count = static_cast<C>(in.size());
          parallel_for(out[0].element_count(),
                       [&](int64_t i) { store(y, i, static_cast<C>(load(y, i) / count)); });
        }
        return ok_status();
      } else {
        return internal_error("{} has no {} instance", info_of(O).op_type, dtype_name(in[0].dtype));
      }
    });
  }

 private:
  std::vector<BroadcastIter> its_;  // its_[0]: x_0 to y; its_[k]: (y, x_k) to y
};

// A comparison of two dims decided from their difference (sizes are never negative: N == -1 is
// false for every N); nullopt when it depends on the symbols' values.
std::optional<bool> decide_comparison(Op op, const DimExpr& x, const DimExpr& y) {
  auto at_least = [](const DimExpr& a, const DimExpr& b, int64_t margin) {
    return (a - b - DimExpr(margin)).provably_nonnegative();  // a >= b + margin
  };
  switch (op) {
    case Op::kEqual:
      if (x == y) return true;
      if (at_least(x, y, 1) || at_least(y, x, 1)) return false;
      return std::nullopt;
    case Op::kLess:
      if (at_least(y, x, 1)) return true;
      if (at_least(x, y, 0)) return false;
      return std::nullopt;
    case Op::kGreater: return decide_comparison(Op::kLess, y, x);
    case Op::kLessOrEqual:
      if (at_least(y, x, 0)) return true;
      if (at_least(x, y, 1)) return false;
      return std::nullopt;
    case Op::kGreaterOrEqual: return decide_comparison(Op::kLessOrEqual, y, x);
    default: return std::nullopt;
  }
}

// One element of a shape computation: x op y, exact, or nullopt when it cannot be expressed.
// `integer` selects integer semantics for Div (truncation) and Mod; float elements hold whole
// numbers, so a float Div is known only when it divides exactly.
std::optional<DimExpr> combine_values(Op op, const DimExpr& x, const DimExpr& y, bool integer) {
  auto cx = x.constant_value();
  auto cy = y.constant_value();
  if (auto decided = decide_comparison(op, x, y)) return DimExpr(*decided ? 1 : 0);
  if (cx && cy) {
    int64_t v = 0;
    switch (op) {
      case Op::kAdd:
        if (auto r = checked_add(*cx, *cy)) return DimExpr(*r);
        return std::nullopt;
      case Op::kSub:
        if (__builtin_sub_overflow(*cx, *cy, &v)) return std::nullopt;
        return DimExpr(v);
      case Op::kMul:
        if (auto r = checked_mul(*cx, *cy)) return DimExpr(*r);
        return std::nullopt;
      case Op::kDiv:
        if (*cy == 0 || (*cy == -1 && *cx == std::numeric_limits<int64_t>::min())) {
          return std::nullopt;
        }
        if (!integer && *cx % *cy != 0) return std::nullopt;
        return DimExpr(*cx / *cy);
      case Op::kMod: {
        if (!integer || *cy == 0 || *cy == -1) return std::nullopt;
        int64_t r = *cx % *cy;  // ONNX integer Mod takes the divisor's sign
        if (r != 0 && ((r < 0) != (*cy < 0))) r += *cy;
        return DimExpr(r);
      }
      case Op::kMin: return DimExpr(std::min(*cx, *cy));
      case Op::kMax: return DimExpr(std::max(*cx, *cy));
      case Op::kAnd: return DimExpr((*cx != 0 && *cy != 0) ? 1 : 0);
      case Op::kOr: return DimExpr((*cx != 0 || *cy != 0) ? 1 : 0);
      default: return std::nullopt;
    }
  }
  switch (op) {
    case Op::kAdd: return x + y;
    case Op::kSub: return x - y;
    case Op::kMul: return x * y;
    case Op::kDiv: {
      if (!integer) return x.exact_div(y);
      if (!cy || *cy == 0 || *cy == std::numeric_limits<int64_t>::min()) return std::nullopt;
      // Integer Div truncates: trunc(x/d) = floor(max(x, 0)/d) - floor(max(-x, 0)/d) for d > 0,
      // which is floor(x/d) when x is provably nonnegative ((S - 1) / 2 needs the general form).
      const int64_t d = *cy > 0 ? *cy : -*cy;
      const DimExpr zero(0);
      DimExpr q = DimExpr::max(x, zero).floor_div(d) - DimExpr::max(zero - x, zero).floor_div(d);
      return *cy > 0 ? q : zero - q;
    }
    case Op::kMod:
      // Integer Mod (fmod = 0) takes the divisor's sign: x - d*floor(x/d).
      if (!integer || !cy || *cy <= 0) return std::nullopt;
      return x - x.floor_div(*cy) * DimExpr(*cy);
    case Op::kMin: return DimExpr::min(x, y);
    case Op::kMax: return DimExpr::max(x, y);
    default: return std::nullopt;
  }
}

// x op y on fractions (floating-point shape computations that are not whole: Cast(S) * 0.5,
// S / 4.0). Division needs a constant divisor whose odd factor divides the numerator, so that
// every result stays a dyadic fraction that f32 holds exactly; nullopt otherwise.
std::optional<FractionValues> combine_fractions(Op op, const DimExpr& x, int64_t x_den,
                                                const DimExpr& y, int64_t y_den) {
  const auto scaled = [](const DimExpr& e, int64_t by) { return e * DimExpr(by); };
  const auto den = checked_mul(x_den, y_den);
  if (!den) return std::nullopt;
  switch (op) {
    case Op::kAdd: return FractionValues{{scaled(x, y_den) + scaled(y, x_den)}, *den};
    case Op::kSub: return FractionValues{{scaled(x, y_den) - scaled(y, x_den)}, *den};
    case Op::kMul: return FractionValues{{x * y}, *den};
    case Op::kDiv: {
      // (x / x_den) / (c / y_den) = (x * y_den) / (x_den * c), c = odd * 2^k.
      auto c = y.constant_value();
      if (!c || *c == 0 || *c == std::numeric_limits<int64_t>::min()) return std::nullopt;
      const int64_t magnitude = *c < 0 ? -*c : *c;
      int64_t odd = magnitude;
      while (odd % 2 == 0) odd /= 2;
      const int64_t two_power = magnitude / odd;
      auto numerator = scaled(x, *c < 0 ? -y_den : y_den).exact_div(DimExpr(odd));
      auto denominator = checked_mul(x_den, two_power);
      if (!numerator || !denominator) return std::nullopt;
      return FractionValues{{std::move(*numerator)}, *denominator};
    }
    default: return std::nullopt;
  }
}

// Element values of Add/Sub/Mul/Div on floating-point shape computations that need fractions.
void infer_fraction_values(Op op, InferArgs& args) {
  constexpr size_t kMaxValues = 4096;
  auto a = known_fraction_values(args, 0);
  auto b = known_fraction_values(args, 1);
  if (!a || !b || a->numerators.size() > kMaxValues || b->numerators.size() > kMaxValues) return;
  const size_t na = a->numerators.size(), nb = b->numerators.size();
  if (na != nb && na != 1 && nb != 1) return;
  std::vector<FractionValues> elements;
  int64_t common = 1;
  for (size_t i = 0; i < std::max(na, nb); ++i) {
    auto value = combine_fractions(op, a->numerators[na == 1 ? 0 : i], a->denominator,
                                   b->numerators[nb == 1 ? 0 : i], b->denominator);
    if (!value || value->denominator > kMaxValueDenominator) return;
    common = std::max(common, value->denominator);
    elements.push_back(std::move(*value));
  }
  // Every denominator is a power of two up to the largest, so each divides it.
  FractionValues out{{}, common};
  for (FractionValues& e : elements) {
    out.numerators.push_back(e.numerators[0] * DimExpr(common / e.denominator));
  }
  set_output_fractions(args, 0, std::move(out));
}

// Element values of binary ops on shape computations (small tensors of dims, e.g. Shape(x) * 2,
// Equal(shape, -1), Max(shape, 1)).
void infer_values(Op op, InferArgs& args) {
  constexpr size_t kMaxValues = 4096;
  if (args.inputs.size() != 2 || !args.inputs[0]) return;
  const DType in_dtype = args.inputs[0]->dtype;
  if (op == Op::kMod) {
    auto fmod = args.attributes.get_int("fmod", 0);
    if (!fmod.ok() || *fmod != 0) return;
  }
  auto a = known_dim_values(args, 0);
  auto b = known_dim_values(args, 1);
  if (is_float(in_dtype) && (!a || !b)) {
    infer_fraction_values(op, args);
    return;
  }
  if (!a || !b || a->size() > kMaxValues || b->size() > kMaxValues) return;
  if (a->size() != b->size() && a->size() != 1 && b->size() != 1) return;
  const size_t n = a->size() == 1 ? b->size() : a->size();
  std::vector<DimExpr> out;
  for (size_t i = 0; i < n; ++i) {
    const DimExpr& x = (*a)[a->size() == 1 ? 0 : i];
    const DimExpr& y = (*b)[b->size() == 1 ? 0 : i];
    std::optional<DimExpr> value = combine_values(op, x, y, !is_float(in_dtype));
    if (!value) {
      if (is_float(in_dtype)) infer_fraction_values(op, args);  // S / 4.0
      return;
    }
    out.push_back(std::move(*value));
  }
  set_output_values(args, 0, std::move(out));
}

std::string variadic_name(size_t i) { return fmt::format("data_{}", i); }

template <Op O>
Status infer_binary(InferArgs& args) {
  const OpInfo& info = info_of(O);
  for (const auto& [name, value] : args.attributes.all()) {
    if (name.empty() || name != info.attribute) {
      return unimplemented("attribute '{}' is not supported", name);
    }
  }
  if constexpr (is_variadic(O)) {
    KILN_RETURN_IF_ERROR(check_arity(args, 1, std::numeric_limits<size_t>::max()));
  } else {
    KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  }
  std::vector<Shape> shapes;
  std::vector<std::string> labels;
  DType dtype = DType::kF32;
  std::string first_label;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const std::string name =
        is_variadic(O) ? variadic_name(i) : std::string(i == 0 ? info.a : info.b);
    KILN_ASSIGN_OR_RETURN(ValueType t, required_input(args, i, name));
    if (i == 0) {
      KILN_RETURN_IF_ERROR(check_dtype(t, i, name, domain_dtypes(domain_of(O))));
      dtype = t.dtype;
      first_label = input_label(0, name);
    } else {
      KILN_RETURN_IF_ERROR(check_same_dtype(t, i, name, dtype, first_label));
    }
    shapes.push_back(t.shape);
    labels.push_back(input_label(i, name));
  }
  KILN_RETURN_IF_ERROR(read_params(O, args.attributes, dtype).status());
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(shapes, labels));
  if constexpr (O == Op::kPRelu) {
    // slope broadcasts to X (unidirectionally): the result must be X's shape.
    if (shape != shapes[0]) {
      return invalid_argument("{} shape {} does not broadcast to {} shape {}", labels[1],
                              shape_to_string(shapes[1]), labels[0], shape_to_string(shapes[0]));
    }
  }
  args.outputs = {ValueType{is_predicate(O) ? DType::kBool : dtype, std::move(shape)}};
  if constexpr (!is_variadic(O) || O == Op::kMin || O == Op::kMax) infer_values(O, args);
  return ok_status();
}

StatusOr<BroadcastIter> make_iter(const MakeArgs& args, std::initializer_list<size_t> inputs) {
  std::vector<ConcreteShape> dims;
  for (size_t i : inputs) dims.push_back(args.input_dims(i));
  return BroadcastIter::make(dims, args.output_dims(0));
}

template <Op O>
StatusOr<std::unique_ptr<Kernel>> make_binary(const MakeArgs& args) {
  if constexpr (is_variadic(O)) {
    std::vector<BroadcastIter> its;
    KILN_ASSIGN_OR_RETURN(BroadcastIter first, make_iter(args, {0}));
    its.push_back(std::move(first));
    for (size_t k = 1; k < args.inputs.size(); ++k) {
      std::vector<ConcreteShape> dims = {args.output_dims(0), args.input_dims(k)};
      KILN_ASSIGN_OR_RETURN(BroadcastIter it, BroadcastIter::make(dims, args.output_dims(0)));
      its.push_back(std::move(it));
    }
    return std::unique_ptr<Kernel>(std::make_unique<VariadicKernel<O>>(std::move(its)));
  } else {
    KILN_ASSIGN_OR_RETURN(Params params, read_params(O, args.attributes, args.inputs[0]->dtype));
    KILN_ASSIGN_OR_RETURN(BroadcastIter it, make_iter(args, {0, 1}));
    return std::unique_ptr<Kernel>(std::make_unique<BinaryKernel<O>>(std::move(it), params));
  }
}

template <size_t... I>
void register_ops(std::vector<OpDef>& table, std::index_sequence<I...>) {
  (table.push_back(OpDef{kOps[I].op_type, infer_binary<kOps[I].op>, make_binary<kOps[I].op>}), ...);
}

// Where(condition, X, Y): condition is bool; X and Y share a dtype; all three broadcast.
class WhereKernel : public Kernel {
 public:
  explicit WhereKernel(BroadcastIter it) : it_(std::move(it)) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[1].dtype, [&]<typename T>() -> Status {
      const Bool* c = in[0].as<Bool>();
      const T* x = in[1].as<T>();
      const T* z = in[2].as<T>();
      T* y = out[0].as<T>();
      it_.for_each<3>([&](int64_t o, int64_t n, const std::array<int64_t, 3>& off,
                          const std::array<int64_t, 3>& st) {
        const Bool* pc = c + off[0];
        const T* px = x + off[1];
        const T* pz = z + off[2];
        T* py = y + o;
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
          // The common case, as vector code: both operands are read, then one is selected.
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) {
            const T a = px[j], b = pz[j];
            py[j] = pc[j].value != 0 ? a : b;
          }
          return;
        }
        for (int64_t j = 0; j < n; ++j) {
          py[j] = pc[j * st[0]].value != 0 ? px[j * st[1]] : pz[j * st[2]];
        }
      });
      return ok_status();
    });
  }

 private:
  BroadcastIter it_;
};

Status infer_where(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3));
  KILN_ASSIGN_OR_RETURN(ValueType c, required_input(args, 0, "condition"));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 1, "X"));
  KILN_ASSIGN_OR_RETURN(ValueType y, required_input(args, 2, "Y"));
  KILN_RETURN_IF_ERROR(check_dtype(c, 0, "condition", {DType::kBool}));
  KILN_RETURN_IF_ERROR(check_dtype(x, 1, "X", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_same_dtype(y, 2, "Y", x.dtype, input_label(1, "X")));
  const Shape shapes[] = {c.shape, x.shape, y.shape};
  const std::string labels[] = {input_label(0, "condition"), input_label(1, "X"),
                                input_label(2, "Y")};
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(shapes, labels));
  args.outputs = {ValueType{x.dtype, std::move(shape)}};
  // PyTorch's expand idiom, Where(Equal(shape, -1), ones, shape): a decided condition selects
  // whole dims.
  auto cond = known_dim_values(args, 0);
  auto xs = known_dim_values(args, 1);
  auto ys = known_dim_values(args, 2);
  if (cond && xs && ys && args.outputs[0].shape.size() <= 1) {
    const size_t n = std::max({cond->size(), xs->size(), ys->size()});
    auto element = [](const std::vector<DimExpr>& v, size_t i) -> const DimExpr* {
      if (v.size() == 1) return &v[0];
      return i < v.size() ? &v[i] : nullptr;
    };
    std::vector<DimExpr> out;
    for (size_t i = 0; i < n; ++i) {
      const DimExpr* c = element(*cond, i);
      if (c == nullptr || !c->constant_value()) return ok_status();
      const DimExpr* chosen = element(*c->constant_value() != 0 ? *xs : *ys, i);
      if (chosen == nullptr) return ok_status();
      out.push_back(*chosen);
    }
    set_output_values(args, 0, std::move(out));
  }
  return ok_status();
}

StatusOr<std::unique_ptr<Kernel>> make_where(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(BroadcastIter it, make_iter(args, {0, 1, 2}));
  return std::unique_ptr<Kernel>(std::make_unique<WhereKernel>(std::move(it)));
}

// Pow(X, Y): Y may have another dtype; the result has X's. Float bases compute in double and
// round once (np.power of mixed types promotes to double too); integer bases with an integer
// exponent use exact wrapping integer powers; with a float exponent, the double result converts
// like Cast (truncated, saturated). An integer power with a negative exponent truncates the real
// result: 1 for base 1, +-1 for base -1, and 0 otherwise (0 for base 0 too, where numpy raises).
template <typename C>
C int_pow(C base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<C>) {
      if (base == -1) return (e & 1) ? C(-1) : C(1);
    }
    return 0;
  }
  uint64_t result = 1;
  auto b = static_cast<uint64_t>(base);
  while (e > 0) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<C>(result);
}

// Every element of exponent `x` as double, or as int64 for integer exponents of an integer base
// (u64 values above the int64 range saturate to it: a defined result, not numpy's).
template <typename E>
std::vector<E> widen(const ConstBuffer& x) {
  std::vector<E> out(static_cast<size_t>(x.element_count()));
  visit_dtype(x.dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, Bool>) {
      const T* p = x.as<T>();
      for (size_t i = 0; i < out.size(); ++i) {
        if constexpr (std::is_same_v<E, int64_t> && std::is_same_v<T, uint64_t>) {
          out[i] = p[i] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                       ? std::numeric_limits<int64_t>::max()
                       : static_cast<int64_t>(p[i]);
        } else if constexpr (std::is_same_v<E, int64_t> && std::is_integral_v<T>) {
          out[i] = static_cast<int64_t>(p[i]);
        } else if constexpr (std::is_same_v<E, double>) {
          out[i] = static_cast<double>(load(p, static_cast<int64_t>(i)));
        }
      }
    }
  });
  return out;
}

class PowKernel : public Kernel {
  // Member templates first: clang 14 leaves those defined after a generic lambda that
  // calls them uninstantiated (undefined references at link time).
 private:
  template <typename T, typename E, typename Fn>
  void run_loop(const T* x, const E* e, Fn&& fn) const {
    it_.for_each<2>([&](int64_t o, int64_t n, const std::array<int64_t, 2>& off,
                        const std::array<int64_t, 2>& st) {
      for (int64_t j = 0; j < n; ++j) {
        fn(o + j, load(x, off[0] + j * st[0]), e[off[1] + j * st[1]]);
      }
    });
  }
  BroadcastIter it_;

 public:
  explicit PowKernel(BroadcastIter it) : it_(std::move(it)) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const bool int_exponent = is_integer(in[1].dtype);
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (!std::is_same_v<T, Bool>) {
        using C = compute_t<T>;
        const T* x = in[0].as<T>();
        T* y = out[0].as<T>();
        if constexpr (std::is_integral_v<T>) {
          if (int_exponent) {
            const std::vector<int64_t> e = widen<int64_t>(in[1]);
            run_loop(x, e.data(), [&](int64_t i, C base, int64_t p) { y[i] = int_pow(base, p); });
            return ok_status();
          }
        }
        const std::vector<double> e = widen<double>(in[1]);
        if constexpr (is_float_storage_v<T> && !std::is_same_v<T, double>) {
          if (e.size() == 1 && (e[0] == 2.0 || e[0] == 3.0)) {
            // Squaring and cubing (GELU's tanh form): a float of at most 24 significant bits
            // squares exactly in double, and its cube rounds once there (correctly rounded, where
            // std::pow is within about half an ulp); then one rounding to T, as the general path.
            const bool cube = e[0] == 3.0;
            parallel_blocks(out[0].element_count(), [x, y, cube](int64_t begin, int64_t end) {
              const T* s = x;
              T* d = y;
#pragma omp simd
              for (int64_t i = begin; i < end; ++i) {
                const double v = static_cast<double>(load(s, i));
                store(d, i, convert_value<T>(cube ? v * v * v : v * v));
              }
            });
            return ok_status();
          }
        }
        run_loop(x, e.data(), [&](int64_t i, C base, double p) {
          store(y, i, convert_value<T>(std::pow(static_cast<double>(base), p)));
        });
        return ok_status();
      } else {
        return internal_error("Pow has no bool instance");
      }
    });
  }
};

Status infer_pow(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_ASSIGN_OR_RETURN(ValueType y, required_input(args, 1, "Y"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", numeric_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(y, 1, "Y", numeric_dtypes()));
  const Shape shapes[] = {x.shape, y.shape};
  const std::string labels[] = {input_label(0, "X"), input_label(1, "Y")};
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(shapes, labels));
  args.outputs = {ValueType{x.dtype, std::move(shape)}};
  return ok_status();
}

StatusOr<std::unique_ptr<Kernel>> make_pow(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(BroadcastIter it, make_iter(args, {0, 1}));
  return std::unique_ptr<Kernel>(std::make_unique<PowKernel>(std::move(it)));
}

}  // namespace

void register_binary_kernels(std::vector<OpDef>& table) {
  register_ops(table, std::make_index_sequence<std::size(kOps)>());
  table.push_back(OpDef{"Where", infer_where, make_where});
  table.push_back(OpDef{"Pow", infer_pow, make_pow});
}

}  // namespace kiln::kernels
