// Cast (target dtype from attribute 'to', an ONNX TensorProto data type code) and CastLike
// (target dtype of input 1). Conversions follow numeric_convert.h: float to integer truncates,
// saturates and maps NaN to 0; integers wrap. To f16 rounds to nearest even (correctly from f64
// too). To bf16 truncates the f32 value's low 16 bits, as the ONNX reference of opsets <= 17 does
// (its backend test data expects it); NaN stays a quiet NaN.
#include <bit>
#include <cstring>
#include <limits>

#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/numeric_convert.h"

namespace kiln::kernels {
namespace {

uint16_t float_to_bfloat16_truncated(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>(bits >> 16);
}

template <typename S, typename D>
void cast_elements(const S* x, D* y, int64_t n) {
  parallel_for(n, [&](int64_t i) {
    const compute_t<S> v = load(x, i);
    if constexpr (std::is_same_v<D, BFloat16>) {
      y[i].bits = float_to_bfloat16_truncated(convert_value<float>(v));
    } else {
      store(y, i, convert_value<D>(v));
    }
  });
}

class CastKernel : public Kernel {
 public:
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const ConstBuffer& x = in[0];
    const MutableBuffer& y = out[0];
    const int64_t n = x.element_count();
    if (x.dtype == y.dtype) {
      if (n > 0) std::memcpy(y.data, x.data, static_cast<size_t>(n) * dtype_size(x.dtype));
      return ok_status();
    }
    visit_dtype(x.dtype, [&]<typename S>() {
      visit_dtype(y.dtype, [&]<typename D>() { cast_elements(x.as<S>(), y.as<D>(), n); });
    });
    return ok_status();
  }
};

// Fractions (S * 0.5) cast to an integer type truncate toward zero; to f32/f64 they stay.
void cast_fractions(InferArgs& args, const FractionValues& in, DType to) {
  if (to == DType::kF32 || to == DType::kF64) {
    set_output_fractions(args, 0, in);
    return;
  }
  if (to != DType::kI64 && to != DType::kI32) return;
  const DimExpr zero(0);
  std::vector<DimExpr> out;
  for (const DimExpr& n : in.numerators) {
    auto c = n.constant_value();
    if (c && (*c / in.denominator < std::numeric_limits<int32_t>::min() ||
              *c / in.denominator > std::numeric_limits<int32_t>::max())) {
      return;  // out of i32's range: left to the kernel
    }
    if (n.provably_nonnegative()) {
      out.push_back(n.floor_div(in.denominator));
    } else {
      out.push_back(DimExpr::max(n, zero).floor_div(in.denominator) -
                    DimExpr::max(zero - n, zero).floor_div(in.denominator));
    }
  }
  set_output_values(args, 0, std::move(out));
}

// Shape computations keep their values through casts: to an integer type (constants wrapped to
// its width; symbolic values unchanged: they are dims, which fit), to f32 or f64 (whole numbers
// that the type holds exactly; symbolic dims are taken to stay below 2^24, past which the
// runtime's concrete planning refuses a shape that disagrees), and to bool (constants only).
void infer_values(InferArgs& args, DType to) {
  auto values = known_dim_values(args, 0);
  if (!values) {
    if (auto fractions = known_fraction_values(args, 0)) cast_fractions(args, *fractions, to);
    return;
  }
  const bool to_float = to == DType::kF32 || to == DType::kF64;
  if (!is_integer(to) && !to_float && to != DType::kBool) return;
  const int64_t exact_limit = to == DType::kF32 ? (int64_t{1} << 24) : (int64_t{1} << 53);
  std::vector<DimExpr> out;
  out.reserve(values->size());
  for (const DimExpr& v : *values) {
    auto c = v.constant_value();
    if (!c) {
      if (to == DType::kBool) return;
      out.push_back(v);
      continue;
    }
    if (to == DType::kBool) {
      out.emplace_back(*c != 0 ? 1 : 0);
      continue;
    }
    if (to_float) {
      if (*c > exact_limit || *c < -exact_limit) return;
      out.emplace_back(*c);
      continue;
    }
    const int64_t wrapped = visit_dtype(to, [&]<typename T>() -> int64_t {
      if constexpr (std::is_integral_v<T>) {
        return static_cast<int64_t>(static_cast<T>(*c));
      } else {
        return *c;
      }
    });
    out.emplace_back(wrapped);
  }
  set_output_values(args, 0, std::move(out));
}

Status infer_cast(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"to"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  if (!args.attributes.has("to")) return invalid_argument("attribute 'to' is required");
  KILN_ASSIGN_OR_RETURN(int64_t code, args.attributes.get_int("to", 0));
  KILN_ASSIGN_OR_RETURN(DType to, dtype_from_onnx_code(code, "to"));
  args.outputs = {ValueType{to, x.shape}};
  infer_values(args, to);
  return ok_status();
}

Status infer_cast_like(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_ASSIGN_OR_RETURN(ValueType like, required_input(args, 1, "target_type"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(like, 1, "target_type", all_dtypes()));
  args.outputs = {ValueType{like.dtype, x.shape}};
  infer_values(args, like.dtype);
  return ok_status();
}

StatusOr<std::unique_ptr<Kernel>> make_cast(const MakeArgs&) {
  return std::unique_ptr<Kernel>(std::make_unique<CastKernel>());
}

}  // namespace

void register_cast_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"Cast", infer_cast, make_cast});
  table.push_back(OpDef{"CastLike", infer_cast_like, make_cast});
}

}  // namespace kiln::kernels
