// Elementwise functions of one tensor. Floating-point math runs in the storage type's compute
// type (f32 for f16/bf16/f32, f64 for f64) with the C library's functions; integer ops are exact.
// Clip also lives here: its optional min and max inputs are scalars.
// NaN: every function of a NaN is NaN (as in ONNX Runtime and PyTorch), except the predicates
// (IsNaN, IsInf), Shrink and ThresholdedRelu, whose ONNX definitions give 0 for a NaN (ONNX
// Runtime agrees).
#include <array>
#include <cmath>
#include <limits>

#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::kernels {
namespace {

enum class Domain { kFloat, kSigned, kNumeric, kBool };

template <typename T>
constexpr bool in_domain(Domain d) {
  switch (d) {
    case Domain::kFloat: return is_float_storage_v<T>;
    case Domain::kSigned:
      return is_float_storage_v<T> || (std::is_integral_v<T> && std::is_signed_v<T>);
    case Domain::kNumeric: return !std::is_same_v<T, Bool>;
    case Domain::kBool: return std::is_same_v<T, Bool>;
  }
  return false;
}

std::span<const DType> domain_dtypes(Domain d) {
  static constexpr DType kBoolOnly[] = {DType::kBool};
  switch (d) {
    case Domain::kFloat: return float_dtypes();
    case Domain::kSigned: return signed_dtypes();
    case Domain::kNumeric: return numeric_dtypes();
    case Domain::kBool: return kBoolOnly;
  }
  return {};
}

enum class Fn {
  kAbs,
  kNeg,
  kSign,
  kRelu,
  kReciprocal,
  kExp,
  kLog,
  kSqrt,
  kFloor,
  kCeil,
  kRound,
  kErf,
  kTanh,
  kSigmoid,
  kSoftplus,
  kMish,
  kSoftsign,
  kHardSwish,
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kNot,
  kIsNaN,
  kIsInf,
  kLeakyRelu,
  kElu,
  kSelu,
  kCelu,
  kThresholdedRelu,
  kHardSigmoid,
  kShrink,
  kGelu,
};

struct FnInfo {
  Fn fn;
  std::string_view op_type;
  std::array<std::string_view, 2> attributes;  // empty names unused
};

constexpr Domain domain_of(Fn f) {
  switch (f) {
    case Fn::kAbs:
    case Fn::kSign: return Domain::kNumeric;
    case Fn::kNeg:
    case Fn::kRelu: return Domain::kSigned;
    case Fn::kNot: return Domain::kBool;
    default: return Domain::kFloat;
  }
}

constexpr bool is_predicate(Fn f) { return f == Fn::kIsNaN || f == Fn::kIsInf; }

// Attribute values a function uses (ONNX defaults applied), in compute precision at use.
struct Params {
  double alpha = 0, beta = 0, gamma = 0;
  bool detect_negative = true, detect_positive = true;
  bool tanh_approximation = false;  // Gelu's approximate = "tanh"
};

StatusOr<Params> read_params(Fn f, const Attributes& a) {
  Params p;
  switch (f) {
    case Fn::kLeakyRelu: {
      KILN_ASSIGN_OR_RETURN(p.alpha, read_leaky_relu_alpha(a));
      break;
    }
    case Fn::kElu:
    case Fn::kCelu:
    case Fn::kThresholdedRelu: {
      KILN_ASSIGN_OR_RETURN(p.alpha, a.get_float("alpha", 1.0));
      break;
    }
    case Fn::kSelu: {
      KILN_ASSIGN_OR_RETURN(p.alpha, a.get_float("alpha", 1.67326319217681884765625));
      KILN_ASSIGN_OR_RETURN(p.gamma, a.get_float("gamma", 1.05070102214813232421875));
      break;
    }
    case Fn::kHardSigmoid: {
      KILN_ASSIGN_OR_RETURN(p.alpha, a.get_float("alpha", 0.2));
      KILN_ASSIGN_OR_RETURN(p.beta, a.get_float("beta", 0.5));
      break;
    }
    case Fn::kShrink: {
      KILN_ASSIGN_OR_RETURN(p.alpha, a.get_float("lambd", 0.5));
      KILN_ASSIGN_OR_RETURN(p.beta, a.get_float("bias", 0.0));
      break;
    }
    case Fn::kGelu: {
      KILN_ASSIGN_OR_RETURN(p.tanh_approximation, read_gelu_tanh_approximation(a));
      break;
    }
    case Fn::kIsInf: {
      KILN_ASSIGN_OR_RETURN(int64_t neg, a.get_int("detect_negative", 1));
      KILN_ASSIGN_OR_RETURN(int64_t pos, a.get_int("detect_positive", 1));
      p.detect_negative = neg != 0;
      p.detect_positive = pos != 0;
      break;
    }
    default: break;
  }
  if (f == Fn::kCelu && p.alpha == 0) {
    return invalid_argument("attribute 'alpha' must not be 0 (Celu divides by it)");
  }
  return p;
}

// The expression of `F` on one value of compute type C.
template <Fn F, typename C>
auto apply(C x, const Params& p) {
  [[maybe_unused]] const C alpha = static_cast<C>(p.alpha);
  [[maybe_unused]] const C beta = static_cast<C>(p.beta);
  if constexpr (F == Fn::kAbs) {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else
      return static_cast<C>(x < 0 ? -x : x);
  } else if constexpr (F == Fn::kNeg) {
    if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(static_cast<std::make_unsigned_t<C>>(0) -
                            static_cast<std::make_unsigned_t<C>>(x));
    } else {
      return static_cast<C>(-x);
    }
  } else if constexpr (F == Fn::kSign) {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return x;
    }
    return static_cast<C>(x > 0 ? 1 : (x < 0 ? -1 : 0));
  } else if constexpr (F == Fn::kRelu) {
    return x < 0 ? C(0) : x;  // NaN stays NaN
  } else if constexpr (F == Fn::kReciprocal) {
    return C(1) / x;
  } else if constexpr (F == Fn::kExp) {
    return std::exp(x);
  } else if constexpr (F == Fn::kLog) {
    return std::log(x);
  } else if constexpr (F == Fn::kSqrt) {
    return std::sqrt(x);
  } else if constexpr (F == Fn::kFloor) {
    return std::floor(x);
  } else if constexpr (F == Fn::kCeil) {
    return std::ceil(x);
  } else if constexpr (F == Fn::kRound) {
    return std::nearbyint(x);  // ties to even in the default rounding mode
  } else if constexpr (F == Fn::kErf) {
    return std::erf(x);
  } else if constexpr (F == Fn::kTanh) {
    return std::tanh(x);
  } else if constexpr (F == Fn::kSigmoid) {
    // Split by sign so exp never overflows.
    if (x >= 0) return C(1) / (C(1) + std::exp(-x));
    const C e = std::exp(x);
    return e / (C(1) + e);
  } else if constexpr (F == Fn::kSoftplus) {
    // log(1 + e^x) = max(x, 0) + log1p(e^-|x|)
    return (x > 0 ? x : C(0)) + std::log1p(std::exp(-std::fabs(x)));
  } else if constexpr (F == Fn::kMish) {
    return mish(x);  // activation.h
  } else if constexpr (F == Fn::kSoftsign) {
    return x / (C(1) + std::fabs(x));
  } else if constexpr (F == Fn::kHardSwish) {
    const C h = std::max(C(0), std::min(C(1), x / C(6) + C(0.5)));
    return x * h;
  } else if constexpr (F == Fn::kSin) {
    return std::sin(x);
  } else if constexpr (F == Fn::kCos) {
    return std::cos(x);
  } else if constexpr (F == Fn::kTan) {
    return std::tan(x);
  } else if constexpr (F == Fn::kAsin) {
    return std::asin(x);
  } else if constexpr (F == Fn::kAcos) {
    return std::acos(x);
  } else if constexpr (F == Fn::kAtan) {
    return std::atan(x);
  } else if constexpr (F == Fn::kSinh) {
    return std::sinh(x);
  } else if constexpr (F == Fn::kCosh) {
    return std::cosh(x);
  } else if constexpr (F == Fn::kAsinh) {
    return std::asinh(x);
  } else if constexpr (F == Fn::kAcosh) {
    return std::acosh(x);
  } else if constexpr (F == Fn::kAtanh) {
    return std::atanh(x);
  } else if constexpr (F == Fn::kNot) {
    return !x;
  } else if constexpr (F == Fn::kIsNaN) {
    return std::isnan(x);
  } else if constexpr (F == Fn::kIsInf) {
    return std::isinf(x) && ((x > 0 && p.detect_positive) || (x < 0 && p.detect_negative));
  } else if constexpr (F == Fn::kLeakyRelu) {
    return x < 0 ? alpha * x : x;
  } else if constexpr (F == Fn::kElu) {
    return x < 0 ? alpha * std::expm1(x) : x;
  } else if constexpr (F == Fn::kSelu) {
    const C gamma = static_cast<C>(p.gamma);
    return x <= 0 ? gamma * alpha * std::expm1(x) : gamma * x;
  } else if constexpr (F == Fn::kCelu) {
    if (std::isnan(x)) return x;  // std::max/min would drop it
    return std::max(C(0), x) + std::min(C(0), alpha * std::expm1(x / alpha));
  } else if constexpr (F == Fn::kThresholdedRelu) {
    return x > alpha ? x : C(0);
  } else if constexpr (F == Fn::kHardSigmoid) {
    if (std::isnan(x)) return x;  // std::max/min would drop it
    return std::max(C(0), std::min(C(1), alpha * x + beta));
  } else if constexpr (F == Fn::kGelu) {
    return gelu(x, p.tanh_approximation);  // activation.h
  } else if constexpr (F == Fn::kShrink) {
    // alpha = lambd, beta = bias
    if (x < -alpha) return static_cast<C>(x + beta);
    if (x > alpha) return static_cast<C>(x - beta);
    return C(0);
  }
}

template <Fn F>
struct Unary {
  Params params;
  template <typename T>
  static constexpr bool accepts() {
    return in_domain<T>(domain_of(F));
  }
  template <typename T>
  auto operator()(compute_t<T> x) const {
    return apply<F>(x, params);
  }
};

template <Fn F>
Status infer_unary(InferArgs& args);
template <Fn F>
StatusOr<std::unique_ptr<Kernel>> make_unary(const MakeArgs& args);

constexpr FnInfo kFunctions[] = {
    {Fn::kAbs, "Abs", {}},
    {Fn::kNeg, "Neg", {}},
    {Fn::kSign, "Sign", {}},
    {Fn::kRelu, "Relu", {}},
    {Fn::kReciprocal, "Reciprocal", {}},
    {Fn::kExp, "Exp", {}},
    {Fn::kLog, "Log", {}},
    {Fn::kSqrt, "Sqrt", {}},
    {Fn::kFloor, "Floor", {}},
    {Fn::kCeil, "Ceil", {}},
    {Fn::kRound, "Round", {}},
    {Fn::kErf, "Erf", {}},
    {Fn::kTanh, "Tanh", {}},
    {Fn::kSigmoid, "Sigmoid", {}},
    {Fn::kSoftplus, "Softplus", {}},
    {Fn::kMish, "Mish", {}},
    {Fn::kSoftsign, "Softsign", {}},
    {Fn::kHardSwish, "HardSwish", {}},
    {Fn::kSin, "Sin", {}},
    {Fn::kCos, "Cos", {}},
    {Fn::kTan, "Tan", {}},
    {Fn::kAsin, "Asin", {}},
    {Fn::kAcos, "Acos", {}},
    {Fn::kAtan, "Atan", {}},
    {Fn::kSinh, "Sinh", {}},
    {Fn::kCosh, "Cosh", {}},
    {Fn::kAsinh, "Asinh", {}},
    {Fn::kAcosh, "Acosh", {}},
    {Fn::kAtanh, "Atanh", {}},
    {Fn::kNot, "Not", {}},
    {Fn::kIsNaN, "IsNaN", {}},
    {Fn::kIsInf, "IsInf", {"detect_negative", "detect_positive"}},
    {Fn::kLeakyRelu, "LeakyRelu", {"alpha"}},
    {Fn::kElu, "Elu", {"alpha"}},
    {Fn::kSelu, "Selu", {"alpha", "gamma"}},
    {Fn::kCelu, "Celu", {"alpha"}},
    {Fn::kThresholdedRelu, "ThresholdedRelu", {"alpha"}},
    {Fn::kHardSigmoid, "HardSigmoid", {"alpha", "beta"}},
    {Fn::kShrink, "Shrink", {"bias", "lambd"}},
    {Fn::kGelu, "Gelu", {"approximate"}},
};

constexpr const FnInfo& info_of(Fn f) {
  for (const FnInfo& info : kFunctions) {
    if (info.fn == f) return info;
  }
  return kFunctions[0];
}

// Output values of Floor, Ceil, Round (half to even) or Neg of fractions n / d (d a power of
// two).
template <Fn F>
void round_fraction_values(InferArgs& args, FractionValues in) {
  const int64_t d = in.denominator;
  if constexpr (F == Fn::kNeg) {
    for (DimExpr& n : in.numerators) n = DimExpr(0) - n;
    set_output_fractions(args, 0, std::move(in));
    return;
  }
  std::vector<DimExpr> out;
  for (const DimExpr& n : in.numerators) {
    if constexpr (F == Fn::kFloor) {
      out.push_back(n.floor_div(d));
    } else if constexpr (F == Fn::kCeil) {
      out.push_back(DimExpr(0) - (DimExpr(0) - n).floor_div(d));
    } else {
      // Round half to even: a symbolic n may land on a tie (n = d/2 mod d), so only constants.
      auto c = n.constant_value();
      if (!c) return;
      out.emplace_back(static_cast<int64_t>(std::nearbyint(static_cast<double>(*c) / d)));
    }
  }
  set_output_values(args, 0, std::move(out));
}

template <Fn F>
Status infer_unary(InferArgs& args) {
  const FnInfo& info = info_of(F);
  for (const auto& [name, value] : args.attributes.all()) {
    if (name.empty() || (name != info.attributes[0] && name != info.attributes[1])) {
      return unimplemented("attribute '{}' is not supported", name);
    }
  }
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", domain_dtypes(domain_of(F))));
  KILN_RETURN_IF_ERROR(read_params(F, args.attributes).status());
  if (is_predicate(F)) x.dtype = DType::kBool;
  args.outputs = {x};
  // Shape computations: Floor/Ceil/Round keep whole values and round fractions (int(S * 0.5)).
  if constexpr (F == Fn::kFloor || F == Fn::kCeil || F == Fn::kRound) {
    if (auto values = known_dim_values(args, 0)) {
      set_output_values(args, 0, std::move(*values));
    } else if (auto fractions = known_fraction_values(args, 0)) {
      round_fraction_values<F>(args, std::move(*fractions));
    }
  }
  // Shape computations: Not of decided conditions, Neg/Abs of dims (whole numbers), Neg of
  // fractions.
  if constexpr (F == Fn::kNot || F == Fn::kNeg || F == Fn::kAbs) {
    auto values = known_dim_values(args, 0);
    if constexpr (F == Fn::kNeg) {
      if (!values) {
        if (auto fractions = known_fraction_values(args, 0)) {
          round_fraction_values<F>(args, std::move(*fractions));
        }
        return ok_status();
      }
    }
    if (values) {
      std::vector<DimExpr> out;
      for (const DimExpr& v : *values) {
        auto c = v.constant_value();
        if constexpr (F == Fn::kNot) {
          if (!c) return ok_status();
          out.emplace_back(*c == 0 ? 1 : 0);
        } else if constexpr (F == Fn::kNeg) {
          if (c == std::numeric_limits<int64_t>::min()) return ok_status();
          out.push_back(DimExpr(0) - v);
        } else {
          if (c == std::numeric_limits<int64_t>::min()) return ok_status();
          if (c) {
            out.emplace_back(*c < 0 ? -*c : *c);
          } else if (v.provably_nonnegative()) {
            out.push_back(v);
          } else {
            return ok_status();
          }
        }
      }
      set_output_values(args, 0, std::move(out));
    }
  }
  return ok_status();
}

template <Fn F>
StatusOr<std::unique_ptr<Kernel>> make_unary(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(Params params, read_params(F, args.attributes));
  return make_map_kernel<is_predicate(F)>(Unary<F>{params});
}

template <size_t... I>
void register_functions(std::vector<OpDef>& table, std::index_sequence<I...>) {
  (table.push_back(
       OpDef{kFunctions[I].op_type, infer_unary<kFunctions[I].fn>, make_unary<kFunctions[I].fn>}),
   ...);
}

// Clip(X, min?, max?): min and max are scalars of X's dtype, absent means unbounded.
// NaN in X stays NaN.
class ClipKernel : public Kernel {
 public:
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (in_domain<T>(Domain::kNumeric)) {
        using C = compute_t<T>;
        // Bounds are read at run time: they may be graph inputs. Held as double, which is exact
        // for every float dtype; 64-bit integers beyond 2^53 clamp through the compute type.
        double lo = -std::numeric_limits<double>::infinity();
        double hi = std::numeric_limits<double>::infinity();
        if (in.size() > 1 && in[1].data != nullptr)
          lo = static_cast<double>(load(in[1].as<T>(), 0));
        if (in.size() > 2 && in[2].data != nullptr)
          hi = static_cast<double>(load(in[2].as<T>(), 0));
        const T* x = in[0].as<T>();
        T* y = out[0].as<T>();
        const C l = std::is_integral_v<C>
                        ? (lo < -9.2e18 ? std::numeric_limits<C>::lowest() : static_cast<C>(lo))
                        : static_cast<C>(lo);
        const C h = std::is_integral_v<C>
                        ? (hi > 9.2e18 ? std::numeric_limits<C>::max() : static_cast<C>(hi))
                        : static_cast<C>(hi);
        parallel_for(in[0].element_count(), [&](int64_t i) {
          C v = load(x, i);
          if (v < l) v = l;
          if (v > h) v = h;
          store(y, i, v);
        });
        return ok_status();
      } else {
        return internal_error("Clip has no {} instance", dtype_name(in[0].dtype));
      }
    });
  }
};

Status infer_clip(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 3));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", numeric_dtypes()));
  const char* names[] = {"input", "min", "max"};
  for (size_t i = 1; i < args.inputs.size(); ++i) {
    const ValueType* bound = optional_input(args, i);
    if (bound == nullptr) continue;
    KILN_RETURN_IF_ERROR(check_same_dtype(*bound, i, names[i], x.dtype, "input 0 'input'"));
    if (!bound->shape.empty() && !(bound->shape.size() == 1 && bound->shape[0] == DimExpr(1))) {
      return invalid_argument("{} must be a scalar, got shape {}", input_label(i, names[i]),
                              shape_to_string(bound->shape));
    }
  }
  args.outputs = {x};
  return ok_status();
}

StatusOr<std::unique_ptr<Kernel>> make_clip(const MakeArgs&) {
  return std::unique_ptr<Kernel>(std::make_unique<ClipKernel>());
}

}  // namespace

void register_unary_kernels(std::vector<OpDef>& table) {
  register_functions(table, std::make_index_sequence<std::size(kFunctions)>());
  table.push_back(OpDef{"Clip", infer_clip, make_clip});
}

}  // namespace kiln::kernels
