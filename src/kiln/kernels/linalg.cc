// Linear algebra: the matrix products MatMul (numpy matmul: 1-D operands are promoted and the
// added dim dropped; batch dims broadcast), MatMulInteger, QLinearMatMul, Gemm (alpha * op(A) @
// op(B) + beta * C, C broadcast unidirectionally to [M, N]) and Einsum (any equation: explicit or
// implicit output, ellipsis, repeated labels for diagonals and traces), and the determinant Det.
//
// Batch invariance: each output element is a sum over the contracted index in increasing order,
// computed by one thread; work is split over output rows.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "kiln/kernels/broadcast.h"
#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/op_attributes.h"
#include "kiln/kernels/quantize.h"
#include "kiln/kernels/softmax_lane.h"

namespace kiln::kernels {
namespace {

// acc + a * b, wrapping for integers (no signed overflow).
template <typename C>
inline C mul_add(C acc, C a, C b) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(acc) + static_cast<U>(a) * static_cast<U>(b));
  } else {
    return acc + a * b;
  }
}

template <typename C>
inline C mul(C a, C b) {
  return mul_add<C>(C(0), a, b);
}

template <typename Acc, typename T>
std::vector<Acc> widen(const ConstBuffer& b) {
  const int64_t n = b.element_count();
  std::vector<Acc> out(static_cast<size_t>(n));
  const T* p = b.as<T>();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Acc>(load(p, i));
  return out;
}

constexpr std::array kMatmulDtypes = {DType::kF16, DType::kBF16, DType::kF32, DType::kF64,
                                      DType::kI32, DType::kI64,  DType::kU32, DType::kU64};

// ---------------------------------------------------------------------------------------------
// MatMul, MatMulInteger
//
// kiln extensions (passes::fuse_matmul folds the Adds after a MatMul into them): MatMul's attribute
// 'kiln_scale' (float products) multiplies each sum over k, as a Mul by that scalar after the
// MatMul; then its optional input 2 'kiln_bias' [N] is added to every row, then input 3
// 'kiln_residual' element by element: the same operations, in the same order, as MatMul then Mul
// then Add then Add. kiln_residual has the output's last dim and at most its rank; each other dim,
// right-aligned, is the output's or 1, broadcast (attention's mask [B, 1, 1, S] against scores
// [B, H, S, S], or a causal one [S, S]). Its
// attribute 'kiln_activation' ("gelu" or "gelu_tanh", activation.h) then applies GELU to every
// element, as a Gelu node after them; or its attribute 'kiln_softmax' = 1 then applies Softmax
// along the last axis (each row of the result), as an opset-13 Softmax node after them
// (softmax_lane.h: in double, rounded once). With the softmax, its optional input 4 'kiln_values'
// V [..., N, Dv] (f32; attention's values) then multiplies those rows: the output is the
// softmaxed scores S [..., M, N] times V, [..., M, Dv], as a second MatMul(S, V) after them would
// compute it. V's leading dims broadcast to the scores' without adding any (the output keeps the
// scores' leading dims), so a kernel may compute the scores a block of rows at a time and never
// hold all of them.

// `a` and `b` name the operands in errors (MatMul: input 0 'A', input 1 'B'; QLinearMatMul:
// input 0 'a', input 3 'b').
StatusOr<Shape> matmul_shape(const ValueType& a, const ValueType& b,
                             const std::string& a_label = "input 0 'A'",
                             const std::string& b_label = "input 1 'B'") {
  if (a.shape.empty()) return invalid_argument("{} must have rank >= 1, got a scalar", a_label);
  if (b.shape.empty()) return invalid_argument("{} must have rank >= 1, got a scalar", b_label);
  Shape as = a.shape;
  Shape bs = b.shape;
  if (as.size() == 1) as.insert(as.begin(), DimExpr(1));
  if (bs.size() == 1) bs.push_back(DimExpr(1));
  KILN_RETURN_IF_ERROR(
      check_dims_equal(bs[bs.size() - 2], as.back(),
                       fmt::format("{} {} contracted dim (K = last dim of {} {})", b_label,
                                   shape_to_string(b.shape), a_label, shape_to_string(a.shape))));
  std::vector<Shape> batches{Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2)};
  std::vector<std::string> labels{a_label + " batch dims", b_label + " batch dims"};
  KILN_ASSIGN_OR_RETURN(Shape out, broadcast_shapes(batches, labels));
  if (a.shape.size() > 1) out.push_back(as[as.size() - 2]);
  if (b.shape.size() > 1) out.push_back(bs.back());
  return out;
}

// The shape of softmaxed `scores` [..., M, N] times kiln_values `values` [..., N, Dv]: [..., M, Dv]
// with the scores' leading dims, which the values' must broadcast to without adding any.
StatusOr<Shape> attended_shape(const ValueType& scores, const ValueType& values, bool softmax) {
  if (!softmax) {
    return invalid_argument("input 4 'kiln_values' needs the attribute '{}' = 1",
                            kMatmulSoftmaxAttribute);
  }
  if (scores.dtype != DType::kF32) {
    return unimplemented("input 4 'kiln_values' needs an f32 product, got {}",
                         dtype_name(scores.dtype));
  }
  KILN_RETURN_IF_ERROR(check_same_dtype(values, 4, "kiln_values", scores.dtype, "input 0 'A'"));
  if (values.shape.size() < 2 || values.shape.size() > scores.shape.size()) {
    return invalid_argument(
        "input 4 'kiln_values' {} must have rank 2 to {} (the scores' rank, {})",
        shape_to_string(values.shape), scores.shape.size(), shape_to_string(scores.shape));
  }
  KILN_ASSIGN_OR_RETURN(
      Shape out, matmul_shape(scores, values, "the softmaxed scores", "input 4 'kiln_values'"));
  for (size_t i = 0; i + 2 < out.size(); ++i) {
    KILN_RETURN_IF_ERROR(check_dims_equal(
        out[i], scores.shape[i],
        fmt::format("input 4 'kiln_values' {} broadcast against the scores {}, dim {}",
                    shape_to_string(values.shape), shape_to_string(scores.shape), i)));
  }
  return out;
}

Status infer_matmul(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(
      args.attributes, {kActivationAttribute, kMatmulScaleAttribute, kMatmulSoftmaxAttribute}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 5));
  KILN_ASSIGN_OR_RETURN(ValueType a, required_input(args, 0, "A"));
  KILN_RETURN_IF_ERROR(check_dtype(a, 0, "A", kMatmulDtypes));
  KILN_RETURN_IF_ERROR(read_matmul_activation(args.attributes, a.dtype).status());
  KILN_RETURN_IF_ERROR(read_matmul_scale(args.attributes, a.dtype).status());
  KILN_ASSIGN_OR_RETURN(const bool softmax, read_matmul_softmax(args.attributes, a.dtype));
  KILN_ASSIGN_OR_RETURN(ValueType b, required_input(args, 1, "B"));
  KILN_RETURN_IF_ERROR(check_same_dtype(b, 1, "B", a.dtype, "input 0 'A'"));
  KILN_ASSIGN_OR_RETURN(Shape out, matmul_shape(a, b));
  if (const ValueType* bias = optional_input(args, 2)) {
    // kiln's bias (passes::fuse_matmul): one value per column of a B of rank >= 2.
    KILN_RETURN_IF_ERROR(check_same_dtype(*bias, 2, "kiln_bias", a.dtype, "input 0 'A'"));
    KILN_RETURN_IF_ERROR(check_rank(*bias, 2, "kiln_bias", 1));
    if (b.shape.size() < 2) {
      return invalid_argument("input 2 'kiln_bias' needs input 1 'B' of rank >= 2, got {}",
                              shape_to_string(b.shape));
    }
    KILN_RETURN_IF_ERROR(
        check_dims_equal(bias->shape[0], b.shape.back(),
                         fmt::format("input 2 'kiln_bias' dim 0 (one per column of input 1 'B' {})",
                                     shape_to_string(b.shape))));
  }
  if (const ValueType* residual = optional_input(args, 3)) {
    // kiln's residual (passes::fuse_matmul): one value per output element, or one broadcast over
    // the output's dims, right-aligned, where its own dim is 1 (not the last) or absent.
    KILN_RETURN_IF_ERROR(check_same_dtype(*residual, 3, "kiln_residual", a.dtype, "input 0 'A'"));
    const size_t rank = residual->shape.size();
    if (rank < 1 || rank > out.size()) {
      return invalid_argument(
          "input 3 'kiln_residual' {} must have rank 1 to {} (the product's {})",
          shape_to_string(residual->shape), out.size(), shape_to_string(out));
    }
    const size_t lead = out.size() - rank;
    for (size_t i = 0; i < rank; ++i) {
      if (i + 1 < rank && residual->shape[i] == DimExpr(1)) continue;
      KILN_RETURN_IF_ERROR(
          check_dims_equal(residual->shape[i], out[lead + i],
                           fmt::format("input 3 'kiln_residual' dim {} (the product's shape {})", i,
                                       shape_to_string(out))));
    }
  }
  if (softmax && b.shape.size() < 2) {
    // The softmax runs along B's columns, which a 1-D B does not give the output.
    return invalid_argument("attribute '{}' needs input 1 'B' of rank >= 2, got {}",
                            kMatmulSoftmaxAttribute, shape_to_string(b.shape));
  }
  if (const ValueType* values = optional_input(args, 4)) {
    if (a.shape.size() < 2) {
      // A 1-D A drops the scores' rows, which V's product needs.
      return invalid_argument("input 4 'kiln_values' needs input 0 'A' of rank >= 2, got {}",
                              shape_to_string(a.shape));
    }
    KILN_ASSIGN_OR_RETURN(out,
                          attended_shape(ValueType{a.dtype, std::move(out)}, *values, softmax));
  }
  args.outputs = {ValueType{a.dtype, std::move(out)}};
  return ok_status();
}

// A zero point: a scalar or [1], or [count] (per row of A / per column of B).
Status check_zero_point(const ValueType& z, size_t index, std::string_view name, DType expected,
                        std::string_view expected_from, const DimExpr& count,
                        std::string_view per) {
  KILN_RETURN_IF_ERROR(check_same_dtype(z, index, name, expected, expected_from));
  if (z.shape.empty() || (z.shape.size() == 1 && z.shape[0] == DimExpr(1))) return ok_status();
  if (z.shape.size() == 1) {
    return check_dims_equal(z.shape[0], count,
                            fmt::format("{} dim 0 (one per {})", input_label(index, name), per));
  }
  return unimplemented("{} of shape {} is not supported (a scalar or one value per {})",
                       input_label(index, name), shape_to_string(z.shape), per);
}

Status infer_matmul_integer(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 4));
  KILN_ASSIGN_OR_RETURN(ValueType a, required_input(args, 0, "A"));
  KILN_RETURN_IF_ERROR(check_dtype(a, 0, "A", {DType::kU8, DType::kI8}));
  KILN_ASSIGN_OR_RETURN(ValueType b, required_input(args, 1, "B"));
  KILN_RETURN_IF_ERROR(check_dtype(b, 1, "B", {DType::kU8, DType::kI8}));
  KILN_ASSIGN_OR_RETURN(Shape out, matmul_shape(a, b));
  if (const ValueType* z = optional_input(args, 2)) {
    const DimExpr rows = a.shape.size() > 1 ? a.shape[a.shape.size() - 2] : DimExpr(1);
    KILN_RETURN_IF_ERROR(
        check_zero_point(*z, 2, "a_zero_point", a.dtype, "input 0 'A'", rows, "row of A"));
  }
  if (const ValueType* z = optional_input(args, 3)) {
    const DimExpr cols = b.shape.size() > 1 ? b.shape.back() : DimExpr(1);
    KILN_RETURN_IF_ERROR(
        check_zero_point(*z, 3, "b_zero_point", b.dtype, "input 1 'B'", cols, "column of B"));
  }
  args.outputs = {ValueType{DType::kI32, std::move(out)}};
  return ok_status();
}

struct MatmulDims {
  int64_t m = 1, k = 1, n = 1;
  std::vector<int64_t> a_batch, b_batch;  // per output batch: the batch of A and of B
};

MatmulDims matmul_dims(ConcreteShape as, ConcreteShape bs) {
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  MatmulDims d;
  d.m = as[as.size() - 2];
  d.k = as.back();
  d.n = bs.back();
  ConcreteShape a_batch(as.begin(), as.end() - 2);
  ConcreteShape b_batch(bs.begin(), bs.end() - 2);
  const ConcreteShape batch = broadcast_concrete(a_batch, b_batch);
  d.a_batch = broadcast_index_map(a_batch, batch);
  d.b_batch = broadcast_index_map(b_batch, batch);
  return d;
}

// The epilogue of a fused MatMul (passes::fuse_matmul), in the order it applies.
struct MatmulEpilogue {
  std::optional<float> scale;  // times this, float products only
  bool bias = false, residual = false;
  // With a residual: for each row of the output (its dims but the last, row-major), the row of
  // the residual added to it (the same row where it does not broadcast).
  std::vector<int64_t> residual_rows;
  FusedActivation activation;
  bool softmax = false;  // Softmax along each row, last (float products only)
  // With kiln_values: the product of the softmaxed scores and V (f32 only).
  std::optional<MatmulDims> values;
};

// y = a @ b per batch, then * scale when set (floats), then + bias[j] on every row when `bias` is
// set, then + residual row residual_rows[row] when set, then the activation, then the softmax of
// the row when set; y fully written.
template <typename C>
void matmul_core(const MatmulDims& d, const C* a, const C* b, C* y, const C* bias = nullptr,
                 const C* residual = nullptr, std::span<const int64_t> residual_rows = {},
                 const FusedActivation& activation = {}, std::optional<float> scale = std::nullopt,
                 bool softmax = false) {
  const auto batches = static_cast<int64_t>(d.a_batch.size());
  const int64_t m = d.m, k = d.k, n = d.n;
  parallel_rows(batches * m, k * n, [&](int64_t job) {
    const int64_t bi = job / m;
    const int64_t i = job % m;
    const C* ar = a + d.a_batch[bi] * m * k + i * k;
    const C* bm = b + d.b_batch[bi] * k * n;
    C* row = y + job * n;
    std::fill(row, row + n, C(0));
    for (int64_t kk = 0; kk < k; ++kk) {
      const C av = ar[kk];
      const C* br = bm + kk * n;
      for (int64_t j = 0; j < n; ++j) row[j] = mul_add<C>(row[j], av, br[j]);
    }
    if constexpr (std::is_floating_point_v<C>) {  // infer allows a scale on floats only
      if (scale) {
        const C s = static_cast<C>(*scale);
        for (int64_t j = 0; j < n; ++j) row[j] = row[j] * s;
      }
    }
    if (bias != nullptr) {
      for (int64_t j = 0; j < n; ++j) row[j] = row[j] + bias[j];
    }
    if (residual != nullptr) {
      const C* r = residual + residual_rows[static_cast<size_t>(job)] * n;
      for (int64_t j = 0; j < n; ++j) row[j] = row[j] + r[j];
    }
    if constexpr (std::is_floating_point_v<C>) {  // infer allows no activation on integers
      if (activation.kind != FusedActivation::Kind::kNone) {
        for (int64_t j = 0; j < n; ++j) row[j] = activation.apply(row[j]);
      }
      if (softmax) {
        softmax_lane(
            n, [row](int64_t j) { return static_cast<double>(row[j]); },
            [row](int64_t j, double r) { row[j] = static_cast<C>(r); });
      }
    }
  });
}

class MatMulKernel : public Kernel {
 public:
  MatMulKernel(MatmulDims d, MatmulEpilogue e) : d_(std::move(d)), e_(std::move(e)) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (!std::is_same_v<T, Bool>) {
        using C = compute_t<T>;
        if constexpr (std::is_same_v<T, float>) {
          if (e_.values) {
            // The scores in full, then their product with V, as MatMul(S, V) after them.
            std::vector<float> scores(d_.a_batch.size() * static_cast<size_t>(d_.m * d_.n));
            matmul_core<float>(d_, in[0].as<T>(), in[1].as<T>(), scores.data(),
                               e_.bias ? in[2].as<T>() : nullptr,
                               e_.residual ? in[3].as<T>() : nullptr, e_.residual_rows,
                               e_.activation, e_.scale, e_.softmax);
            matmul_core<float>(*e_.values, scores.data(), in[4].as<T>(), out[0].as<T>());
            return ok_status();
          }
        }
        if constexpr (std::is_same_v<T, C>) {
          matmul_core<C>(d_, in[0].as<T>(), in[1].as<T>(), out[0].as<T>(),
                         e_.bias ? in[2].as<T>() : nullptr, e_.residual ? in[3].as<T>() : nullptr,
                         e_.residual_rows, e_.activation, e_.scale, e_.softmax);
        } else {
          const std::vector<C> a = widen<C, T>(in[0]);
          const std::vector<C> b = widen<C, T>(in[1]);
          const std::vector<C> bias = e_.bias ? widen<C, T>(in[2]) : std::vector<C>();
          const std::vector<C> residual = e_.residual ? widen<C, T>(in[3]) : std::vector<C>();
          const int64_t total = out[0].element_count();
          std::vector<C> y(static_cast<size_t>(total));
          matmul_core<C>(d_, a.data(), b.data(), y.data(), e_.bias ? bias.data() : nullptr,
                         e_.residual ? residual.data() : nullptr, e_.residual_rows, e_.activation,
                         e_.scale, e_.softmax);
          for (int64_t i = 0; i < total; ++i) store(out[0].as<T>(), i, y[i]);
        }
        return ok_status();
      } else {
        return internal_error("MatMul has no {} instance", dtype_name(in[0].dtype));
      }
    });
  }

 private:
  MatmulDims d_;
  MatmulEpilogue e_;
};

StatusOr<std::unique_ptr<Kernel>> make_matmul(const MakeArgs& args) {
  MatmulEpilogue e;
  e.bias = args.inputs.size() > 2 && args.inputs[2];
  e.residual = args.inputs.size() > 3 && args.inputs[3];
  const MatmulDims scores = matmul_dims(args.input_dims(0), args.input_dims(1));
  if (args.inputs.size() > 4 && args.inputs[4]) {
    if (args.inputs[0]->dtype != DType::kF32) {
      return unimplemented("MatMul's input 4 'kiln_values' needs f32, got {}",
                           dtype_name(args.inputs[0]->dtype));
    }
    // The scores' shape: the output's, with the scores' columns last (infer_matmul).
    ConcreteShape scores_shape = args.output_dims(0);
    scores_shape.back() = scores.n;
    e.values = matmul_dims(scores_shape, args.input_dims(4));
  }
  if (e.residual) {
    ConcreteShape residual_rows = args.input_dims(3), output_rows = args.output_dims(0);
    if (!output_rows.empty()) {  // the output's rank, which infer_matmul checked
      residual_rows.pop_back();
      output_rows.pop_back();
    }
    e.residual_rows = broadcast_index_map(residual_rows, output_rows);
  }
  KILN_ASSIGN_OR_RETURN(e.activation,
                        read_matmul_activation(args.attributes, args.inputs[0]->dtype));
  KILN_ASSIGN_OR_RETURN(e.scale, read_matmul_scale(args.attributes, args.inputs[0]->dtype));
  KILN_ASSIGN_OR_RETURN(e.softmax, read_matmul_softmax(args.attributes, args.inputs[0]->dtype));
  return std::unique_ptr<Kernel>(std::make_unique<MatMulKernel>(scores, std::move(e)));
}

// The exact integer sums of MatMulInteger and QLinearMatMul: (a - a_zero_point) @
// (b - b_zero_point). Per-row zero points of A step every K elements; per-column ones of B every
// element.
std::vector<int64_t> matmul_integer_sums(const MatmulDims& d, const ConstBuffer& a,
                                         const ConstBuffer* a_zero, const ConstBuffer& b,
                                         const ConstBuffer* b_zero, int64_t total) {
  const std::vector<int64_t> ac = centered(a, a_zero, d.k);
  const std::vector<int64_t> bc = centered(b, b_zero, 1);
  std::vector<int64_t> y(static_cast<size_t>(total));
  matmul_core<int64_t>(d, ac.data(), bc.data(), y.data());
  return y;
}

class MatMulIntegerKernel : public Kernel {
 public:
  explicit MatMulIntegerKernel(MatmulDims d) : d_(std::move(d)) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t total = out[0].element_count();
    const std::vector<int64_t> y =
        matmul_integer_sums(d_, in[0], in.size() > 2 ? &in[2] : nullptr, in[1],
                            in.size() > 3 ? &in[3] : nullptr, total);
    int32_t* dst = out[0].as<int32_t>();
    for (int64_t i = 0; i < total; ++i) dst[i] = static_cast<int32_t>(y[i]);
    return ok_status();
  }

 private:
  MatmulDims d_;
};

StatusOr<std::unique_ptr<Kernel>> make_matmul_integer(const MakeArgs& args) {
  return std::unique_ptr<Kernel>(
      std::make_unique<MatMulIntegerKernel>(matmul_dims(args.input_dims(0), args.input_dims(1))));
}

// QLinearMatMul: a (0), a_scale (1), a_zero_point (2), b (3), b_scale (4), b_zero_point (5),
// y_scale (6), y_zero_point (7). MatMulInteger's sums requantized (quantize.h) to y_zero_point's
// dtype. a_zero_point is per tensor or per row of a; b_scale and b_zero_point per tensor or per
// column of b; a_scale, y_scale and y_zero_point per tensor.
Status infer_qlinear_matmul(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 8, 8));
  KILN_ASSIGN_OR_RETURN(ValueType a, required_input(args, 0, "a"));
  KILN_RETURN_IF_ERROR(check_dtype(a, 0, "a", {DType::kU8, DType::kI8}));
  KILN_ASSIGN_OR_RETURN(ValueType b, required_input(args, 3, "b"));
  KILN_RETURN_IF_ERROR(check_dtype(b, 3, "b", {DType::kU8, DType::kI8}));
  KILN_ASSIGN_OR_RETURN(Shape out, matmul_shape(a, b, "input 0 'a'", "input 3 'b'"));
  const DimExpr rows = a.shape.size() > 1 ? a.shape[a.shape.size() - 2] : DimExpr(1);
  const DimExpr cols = b.shape.size() > 1 ? b.shape.back() : DimExpr(1);
  KILN_ASSIGN_OR_RETURN(ValueType a_scale, required_input(args, 1, "a_scale"));
  KILN_RETURN_IF_ERROR(check_quant_scale(a_scale, 1, "a_scale", nullptr, ""));
  KILN_ASSIGN_OR_RETURN(ValueType a_zero, required_input(args, 2, "a_zero_point"));
  KILN_RETURN_IF_ERROR(
      check_quant_zero_point(a_zero, 2, "a_zero_point", a.dtype, "input 0 'a'", &rows, "row of a"));
  KILN_ASSIGN_OR_RETURN(ValueType b_scale, required_input(args, 4, "b_scale"));
  KILN_RETURN_IF_ERROR(check_quant_scale(b_scale, 4, "b_scale", &cols, "column of b"));
  KILN_ASSIGN_OR_RETURN(ValueType b_zero, required_input(args, 5, "b_zero_point"));
  KILN_RETURN_IF_ERROR(check_quant_zero_point(b_zero, 5, "b_zero_point", b.dtype, "input 3 'b'",
                                              &cols, "column of b"));
  KILN_ASSIGN_OR_RETURN(ValueType y_scale, required_input(args, 6, "y_scale"));
  KILN_RETURN_IF_ERROR(check_quant_scale(y_scale, 6, "y_scale", nullptr, ""));
  KILN_ASSIGN_OR_RETURN(ValueType y_zero, required_input(args, 7, "y_zero_point"));
  KILN_RETURN_IF_ERROR(check_dtype(y_zero, 7, "y_zero_point", {DType::kU8, DType::kI8}));
  KILN_RETURN_IF_ERROR(
      check_quant_zero_point(y_zero, 7, "y_zero_point", y_zero.dtype, "", nullptr, ""));
  args.outputs = {ValueType{y_zero.dtype, std::move(out)}};
  return ok_status();
}

class QLinearMatMulKernel : public Kernel {
 public:
  explicit QLinearMatMulKernel(MatmulDims d) : d_(std::move(d)) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t total = out[0].element_count();
    const std::vector<int64_t> acc = matmul_integer_sums(d_, in[0], &in[2], in[3], &in[5], total);
    const Requantization r =
        make_requantization(in[1], in[4], in[6], in[7], nullptr, d_.n, /*inner=*/1);
    requantize(r, acc.data(), out[0]);
    return ok_status();
  }

 private:
  MatmulDims d_;
};

StatusOr<std::unique_ptr<Kernel>> make_qlinear_matmul(const MakeArgs& args) {
  return std::unique_ptr<Kernel>(
      std::make_unique<QLinearMatMulKernel>(matmul_dims(args.input_dims(0), args.input_dims(3))));
}

// ---------------------------------------------------------------------------------------------
// Gemm

Status infer_gemm(InferArgs& args) {
  KILN_RETURN_IF_ERROR(
      check_known_attributes(args.attributes, {"alpha", "beta", "transA", "transB"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 4));
  KILN_ASSIGN_OR_RETURN(ValueType a, required_input(args, 0, "A"));
  KILN_RETURN_IF_ERROR(check_dtype(a, 0, "A", kMatmulDtypes));
  KILN_RETURN_IF_ERROR(check_rank(a, 0, "A", 2));
  KILN_ASSIGN_OR_RETURN(ValueType b, required_input(args, 1, "B"));
  KILN_RETURN_IF_ERROR(check_same_dtype(b, 1, "B", a.dtype, "input 0 'A'"));
  KILN_RETURN_IF_ERROR(check_rank(b, 1, "B", 2));
  KILN_ASSIGN_OR_RETURN(GemmAttributes p, read_gemm_attributes(args.attributes, a.dtype));
  const DimExpr& m = a.shape[p.trans_a ? 1 : 0];
  const DimExpr& k = a.shape[p.trans_a ? 0 : 1];
  const DimExpr& n = b.shape[p.trans_b ? 0 : 1];
  KILN_RETURN_IF_ERROR(check_dims_equal(
      b.shape[p.trans_b ? 1 : 0], k,
      fmt::format("input 1 'B' dim {} (K, the inner dim of input 0 'A' {} with transA={})",
                  p.trans_b ? 1 : 0, shape_to_string(a.shape), p.trans_a ? 1 : 0)));
  Shape out{m, n};
  if (const ValueType* c = optional_input(args, 2)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*c, 2, "C", a.dtype, "input 0 'A'"));
    KILN_RETURN_IF_ERROR(check_rank_range(*c, 2, "C", 0, 2));
    const size_t offset = 2 - c->shape.size();
    for (size_t i = 0; i < c->shape.size(); ++i) {
      if (c->shape[i] == DimExpr(1)) continue;
      KILN_RETURN_IF_ERROR(check_dims_equal(
          c->shape[i], out[offset + i],
          fmt::format("input 2 'C' dim {} (must broadcast to the output [M, N] = {})", i,
                      shape_to_string(out))));
    }
  }
  args.outputs = {ValueType{a.dtype, std::move(out)}};
  return ok_status();
}

class GemmKernel : public Kernel {
 public:
  GemmKernel(GemmAttributes p, int64_t m, int64_t k, int64_t n, std::vector<int64_t> c_map)
      : p_(p), m_(m), k_(k), n_(n), c_map_(std::move(c_map)) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (!std::is_same_v<T, Bool>) {
        using C = compute_t<T>;
        const bool has_c = in.size() > 2 && in[2].data != nullptr;
        const T* a = in[0].as<T>();
        const T* b = in[1].as<T>();
        const C alpha = static_cast<C>(p_.alpha);
        const C beta = static_cast<C>(p_.beta);
        T* y = out[0].as<T>();
        const int64_t m = m_, k = k_, n = n_;
        parallel_rows(m, k * n, [&](int64_t i) {
          std::vector<C> row(static_cast<size_t>(n), C(0));
          for (int64_t kk = 0; kk < k; ++kk) {
            const C av = load(a, p_.trans_a ? kk * m + i : i * k + kk);
            for (int64_t j = 0; j < n; ++j) {
              row[j] = mul_add<C>(row[j], av, load(b, p_.trans_b ? j * k + kk : kk * n + j));
            }
          }
          for (int64_t j = 0; j < n; ++j) {
            C v = mul<C>(row[j], alpha);
            if (has_c) v = mul_add<C>(v, beta, load(in[2].as<T>(), c_map_[i * n + j]));
            store(y, i * n + j, v);
          }
        });
        return ok_status();
      } else {
        return internal_error("Gemm has no {} instance", dtype_name(in[0].dtype));
      }
    });
  }

 private:
  GemmAttributes p_;
  int64_t m_, k_, n_;
  std::vector<int64_t> c_map_;
};

StatusOr<std::unique_ptr<Kernel>> make_gemm(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(GemmAttributes p,
                        read_gemm_attributes(args.attributes, args.inputs[0]->dtype));
  const ConcreteShape a = args.input_dims(0);
  const ConcreteShape y = args.output_dims(0);
  std::vector<int64_t> c_map;
  if (args.inputs.size() > 2 && args.inputs[2]) {
    c_map = broadcast_index_map(args.input_dims(2), y);
  }
  return std::unique_ptr<Kernel>(
      std::make_unique<GemmKernel>(p, y[0], a[p.trans_a ? 0 : 1], y[1], std::move(c_map)));
}

// ---------------------------------------------------------------------------------------------
// Einsum. Labels are letters (a-z, A-Z); "..." stands for the dims not labelled, broadcast
// across operands (right-aligned). Without "->" the output is "..." followed by the labels that
// occur once, in alphabetical order (numpy). Each output element sums, in row-major order of the
// contracted labels, the product of the operands in input order.

constexpr int kLetters = 52;

int label_id(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

char label_char(int id) { return static_cast<char>(id < 26 ? 'a' + id : 'A' + id - 26); }

// One term: label ids in order, kEllipsis where "..." stood.
constexpr int kEllipsis = -1;

struct Equation {
  std::vector<std::vector<int>> inputs;
  std::vector<int> output;
  bool explicit_output = false;
};

StatusOr<std::vector<int>> parse_term(std::string_view term, std::string_view what) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '.') {
      if (ellipsis || term.substr(i, 3) != "...") {
        return invalid_argument("attribute 'equation': {} has a stray '.' or a second \"...\"",
                                what);
      }
      ellipsis = true;
      labels.push_back(kEllipsis);
      i += 2;
      continue;
    }
    const int id = label_id(term[i]);
    if (id < 0) {
      return invalid_argument("attribute 'equation': {} has character '{}' (labels are letters)",
                              what, term[i]);
    }
    labels.push_back(id);
  }
  return labels;
}

StatusOr<Equation> parse_equation(const Attributes& attributes, size_t input_count) {
  KILN_ASSIGN_OR_RETURN(std::string raw, attributes.get_string("equation", ""));
  std::string text;
  for (char c : raw) {
    if (c != ' ' && c != '\t' && c != '\n') text.push_back(c);
  }
  if (text.empty()) return invalid_argument("attribute 'equation' is required");
  Equation eq;
  std::string_view lhs = text;
  const size_t arrow = text.find("->");
  if (arrow != std::string::npos) {
    lhs = std::string_view(text).substr(0, arrow);
    eq.explicit_output = true;
    KILN_ASSIGN_OR_RETURN(eq.output,
                          parse_term(std::string_view(text).substr(arrow + 2), "the output"));
  }
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    const std::string_view term =
        lhs.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    KILN_ASSIGN_OR_RETURN(std::vector<int> labels,
                          parse_term(term, fmt::format("operand {}", eq.inputs.size())));
    eq.inputs.push_back(std::move(labels));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (eq.inputs.size() != input_count) {
    return invalid_argument("attribute 'equation' \"{}\" has {} operands, the node {} inputs", raw,
                            eq.inputs.size(), input_count);
  }
  std::array<int, kLetters> count{};
  bool any_ellipsis = false;
  for (const auto& term : eq.inputs) {
    for (int id : term) {
      if (id == kEllipsis) {
        any_ellipsis = true;
      } else {
        ++count[id];
      }
    }
  }
  if (eq.explicit_output) {
    std::array<bool, kLetters> seen{};
    for (int id : eq.output) {
      if (id == kEllipsis) {
        if (!any_ellipsis) {
          return invalid_argument(
              "attribute 'equation': the output has \"...\" but no operand does");
        }
        continue;
      }
      if (seen[id] || count[id] == 0) {
        return invalid_argument(
            "attribute 'equation': output label '{}' is repeated or occurs in no operand",
            label_char(id));
      }
      seen[id] = true;
    }
  } else {
    if (any_ellipsis) eq.output.push_back(kEllipsis);
    // Alphabetical as numpy orders them: uppercase before lowercase.
    for (int id = 26; id < kLetters; ++id) {
      if (count[id] == 1) eq.output.push_back(id);
    }
    for (int id = 0; id < 26; ++id) {
      if (count[id] == 1) eq.output.push_back(id);
    }
  }
  return eq;
}

// Dims of every label and of the broadcast ellipsis.
struct EinsumDims {
  std::array<std::optional<DimExpr>, kLetters> label;
  Shape ellipsis;
};

StatusOr<EinsumDims> einsum_dims(const Equation& eq, std::span<const Shape> shapes) {
  EinsumDims d;
  std::vector<Shape> ellipses;
  std::vector<std::string> names;
  for (size_t i = 0; i < eq.inputs.size(); ++i) {
    const std::vector<int>& term = eq.inputs[i];
    const Shape& shape = shapes[i];
    const bool has_ellipsis = std::find(term.begin(), term.end(), kEllipsis) != term.end();
    const size_t letters = term.size() - (has_ellipsis ? 1 : 0);
    if (has_ellipsis ? shape.size() < letters : shape.size() != letters) {
      return invalid_argument(
          "input {} has rank {}, but its term in attribute 'equation' has {} "
          "labels{}",
          i, shape.size(), letters, has_ellipsis ? " and \"...\"" : "");
    }
    const size_t ellipsis_rank = shape.size() - letters;
    size_t dim = 0;
    for (int id : term) {
      if (id == kEllipsis) {
        ellipses.emplace_back(shape.begin() + dim, shape.begin() + dim + ellipsis_rank);
        names.push_back(fmt::format("input {} \"...\" dims", i));
        dim += ellipsis_rank;
        continue;
      }
      if (!d.label[id]) {
        d.label[id] = shape[dim];
      } else {
        KILN_RETURN_IF_ERROR(
            check_dims_equal(shape[dim], *d.label[id],
                             fmt::format("input {} dim {} (label '{}')", i, dim, label_char(id))));
      }
      ++dim;
    }
  }
  if (!ellipses.empty()) {
    KILN_ASSIGN_OR_RETURN(d.ellipsis, broadcast_shapes(ellipses, names));
  }
  return d;
}

Status infer_einsum(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"equation"}));
  if (args.inputs.empty()) return invalid_argument("expects at least 1 input, got 0");
  KILN_RETURN_IF_ERROR(check_arity(args, 1, args.inputs.size()));
  KILN_ASSIGN_OR_RETURN(Equation eq, parse_equation(args.attributes, args.inputs.size()));
  std::vector<Shape> shapes;
  DType dtype = DType::kF32;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const std::string name = fmt::format("Inputs{}", i);
    KILN_ASSIGN_OR_RETURN(ValueType v, required_input(args, i, name));
    if (i == 0) {
      KILN_RETURN_IF_ERROR(check_dtype(v, 0, name, numeric_dtypes()));
      dtype = v.dtype;
    } else {
      KILN_RETURN_IF_ERROR(check_same_dtype(v, i, name, dtype, "input 0 'Inputs0'"));
    }
    shapes.push_back(v.shape);
  }
  KILN_ASSIGN_OR_RETURN(EinsumDims d, einsum_dims(eq, shapes));
  Shape out;
  for (int id : eq.output) {
    if (id == kEllipsis) {
      out.insert(out.end(), d.ellipsis.begin(), d.ellipsis.end());
    } else {
      out.push_back(*d.label[id]);
    }
  }
  args.outputs = {ValueType{dtype, std::move(out)}};
  return ok_status();
}

// The loop nest: axes are output axes first, then contracted ones; each operand has a stride per
// axis (0 where it does not depend on it; a label repeated in one operand adds its strides, which
// walks the diagonal).
struct EinsumPlan {
  std::vector<int64_t> out_sizes, sum_sizes;
  std::vector<std::vector<int64_t>> out_strides, sum_strides;  // [operand][axis]
};

StatusOr<EinsumPlan> plan_einsum(const Equation& eq, std::span<const ConcreteShape> shapes) {
  std::vector<Shape> symbolic;
  for (const ConcreteShape& s : shapes) symbolic.push_back(shape_from_concrete(s));
  KILN_ASSIGN_OR_RETURN(EinsumDims d, einsum_dims(eq, symbolic));
  const size_t e_rank = d.ellipsis.size();
  // Axis ids: labels 0..51, ellipsis dim j is kLetters + j.
  const size_t axis_count = kLetters + e_rank;
  std::vector<int64_t> size(axis_count, 0);
  std::vector<bool> used(axis_count, false);
  for (int id = 0; id < kLetters; ++id) {
    if (d.label[id]) {
      size[id] = d.label[id]->constant_value().value_or(0);
      used[id] = true;
    }
  }
  for (size_t j = 0; j < e_rank; ++j) {
    size[kLetters + j] = d.ellipsis[j].constant_value().value_or(0);
    used[kLetters + j] = true;
  }
  std::vector<size_t> out_axes;
  std::vector<bool> is_out(axis_count, false);
  for (int id : eq.output) {
    if (id == kEllipsis) {
      for (size_t j = 0; j < e_rank; ++j) out_axes.push_back(kLetters + j);
    } else {
      out_axes.push_back(static_cast<size_t>(id));
    }
  }
  for (size_t a : out_axes) is_out[a] = true;
  std::vector<size_t> sum_axes;
  for (size_t a = 0; a < axis_count; ++a) {
    if (used[a] && !is_out[a]) sum_axes.push_back(a);
  }
  // Per operand: stride of every axis.
  std::vector<std::vector<int64_t>> strides(shapes.size(), std::vector<int64_t>(axis_count, 0));
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::vector<int64_t> rm = row_major_strides(shapes[i]);
    const std::vector<int>& term = eq.inputs[i];
    const bool has_ellipsis = std::find(term.begin(), term.end(), kEllipsis) != term.end();
    const size_t own_e_rank = shapes[i].size() - (term.size() - (has_ellipsis ? 1 : 0));
    size_t dim = 0;
    for (int id : term) {
      if (id == kEllipsis) {
        for (size_t j = 0; j < own_e_rank; ++j, ++dim) {
          // Right-aligned with the broadcast ellipsis; a size-1 dim broadcasts (stride 0).
          if (shapes[i][dim] != 1) strides[i][kLetters + (e_rank - own_e_rank) + j] += rm[dim];
        }
        continue;
      }
      strides[i][id] += rm[dim];
      ++dim;
    }
  }
  EinsumPlan p;
  for (size_t a : out_axes) p.out_sizes.push_back(size[a]);
  for (size_t a : sum_axes) p.sum_sizes.push_back(size[a]);
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::vector<int64_t> os, ss;
    for (size_t a : out_axes) os.push_back(strides[i][a]);
    for (size_t a : sum_axes) ss.push_back(strides[i][a]);
    p.out_strides.push_back(std::move(os));
    p.sum_strides.push_back(std::move(ss));
  }
  return p;
}

class EinsumKernel : public Kernel {
 public:
  explicit EinsumKernel(EinsumPlan plan) : p_(std::move(plan)) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (!std::is_same_v<T, Bool>) {
        using C = compute_t<T>;
        const size_t operands = in.size();
        const int64_t total = out[0].element_count();
        int64_t sum_total = 1;
        for (int64_t s : p_.sum_sizes) sum_total *= s;
        T* y = out[0].as<T>();
        parallel_rows(total, sum_total * static_cast<int64_t>(operands), [&](int64_t flat) {
          // Base offsets of this output element in each operand.
          std::vector<int64_t> base(operands, 0);
          int64_t rest = flat;
          for (size_t a = p_.out_sizes.size(); a-- > 0;) {
            const int64_t idx = rest % p_.out_sizes[a];
            rest /= p_.out_sizes[a];
            for (size_t i = 0; i < operands; ++i) base[i] += idx * p_.out_strides[i][a];
          }
          std::vector<int64_t> counter(p_.sum_sizes.size(), 0);
          std::vector<int64_t> offset = base;
          C acc = C(0);
          for (int64_t s = 0; s < sum_total; ++s) {
            C prod = load(in[0].as<T>(), offset[0]);
            for (size_t i = 1; i < operands; ++i)
              prod = mul<C>(prod, load(in[i].as<T>(), offset[i]));
            acc = mul_add<C>(acc, prod, C(1));
            // Odometer step over the contracted axes, last fastest.
            for (size_t a = counter.size(); a-- > 0;) {
              ++counter[a];
              for (size_t i = 0; i < operands; ++i) offset[i] += p_.sum_strides[i][a];
              if (counter[a] < p_.sum_sizes[a]) break;
              for (size_t i = 0; i < operands; ++i) {
                offset[i] -= p_.sum_strides[i][a] * p_.sum_sizes[a];
              }
              counter[a] = 0;
            }
          }
          store(y, flat, acc);
        });
        return ok_status();
      } else {
        return internal_error("Einsum has no {} instance", dtype_name(in[0].dtype));
      }
    });
  }

 private:
  EinsumPlan p_;
};

StatusOr<std::unique_ptr<Kernel>> make_einsum(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(Equation eq, parse_equation(args.attributes, args.inputs.size()));
  std::vector<ConcreteShape> shapes;
  for (size_t i = 0; i < args.inputs.size(); ++i) shapes.push_back(args.input_dims(i));
  KILN_ASSIGN_OR_RETURN(EinsumPlan plan, plan_einsum(eq, shapes));
  return std::unique_ptr<Kernel>(std::make_unique<EinsumKernel>(std::move(plan)));
}

// Multiply-adds: every output element over the shared dim (A's last for MatMul; Gemm's A is
// [M, K], or [K, M] with transA). A MatMul with kiln_values counts both products: the scores (a
// row of N, V's rows, per output row) over K, then the output over N.
double matmul_multiply_adds(const Attributes&, std::span<const ConcreteShape* const> in,
                            std::span<const ConcreteShape* const> out) {
  const ConcreteShape* a = dims_at(in, 0);
  const ConcreteShape* y = dims_at(out, 0);
  if (a == nullptr || y == nullptr || a->empty()) return 0;
  const double outputs = product_as_double(*y), k = static_cast<double>(a->back());
  const ConcreteShape* v = dims_at(in, 4);
  if (v == nullptr || v->size() < 2 || y->empty() || y->back() == 0) return outputs * k;
  const auto n = static_cast<double>((*v)[v->size() - 2]);
  return outputs / static_cast<double>(y->back()) * n * k + outputs * n;
}
double gemm_multiply_adds(const Attributes& attributes, std::span<const ConcreteShape* const> in,
                          std::span<const ConcreteShape* const> out) {
  const ConcreteShape* a = dims_at(in, 0);
  const ConcreteShape* y = dims_at(out, 0);
  if (a == nullptr || y == nullptr || a->size() != 2) return 0;
  auto trans_a = attributes.get_int("transA", 0);
  const bool transposed = trans_a.ok() && *trans_a != 0;
  return product_as_double(*y) * static_cast<double>(transposed ? (*a)[0] : (*a)[1]);
}

// ---- Det(X) ----
// The determinant of each [M, M] matrix of X [..., M, M], by LU decomposition with partial
// pivoting in double (the product of the pivots, negated per row swap); a matrix holding NaN
// gives NaN, an empty one (M = 0) gives 1.

Status infer_det(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", {DType::kF16, DType::kF32, DType::kF64}));
  KILN_RETURN_IF_ERROR(check_rank_range(x, 0, "X", 2, 64));
  const size_t rank = x.shape.size();
  KILN_RETURN_IF_ERROR(check_dims_equal(x.shape[rank - 1], x.shape[rank - 2],
                                        "input 0 'X' last dim (the matrices must be square)"));
  args.outputs = {ValueType{x.dtype, Shape(x.shape.begin(), x.shape.end() - 2)}};
  return ok_status();
}

double determinant(std::vector<double>& a, int64_t m) {
  for (double v : a) {
    if (std::isnan(v)) return v;
  }
  double det = 1;
  for (int64_t c = 0; c < m; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < m; ++r) {
      if (std::abs(a[r * m + c]) > std::abs(a[pivot * m + c])) pivot = r;
    }
    if (pivot != c) {
      std::swap_ranges(a.begin() + c * m, a.begin() + (c + 1) * m, a.begin() + pivot * m);
      det = -det;
    }
    const double p = a[c * m + c];
    det *= p;
    if (p == 0) break;
    for (int64_t r = c + 1; r < m; ++r) {
      const double f = a[r * m + c] / p;
      for (int64_t k = c + 1; k < m; ++k) a[r * m + k] -= f * a[c * m + k];
    }
  }
  return det;
}

class DetKernel : public Kernel {
 public:
  DetKernel(int64_t batches, int64_t m) : batches_(batches), m_(m) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    visit_dtype(in[0].dtype, [&]<typename T>() {
      if constexpr (is_float_storage_v<T>) {
        const T* x = in[0].as<T>();
        T* y = out[0].as<T>();
        parallel_rows(batches_, m_ * m_ * m_, [&](int64_t b) {
          std::vector<double> a(static_cast<size_t>(m_ * m_));
          for (int64_t i = 0; i < m_ * m_; ++i) {
            a[i] = static_cast<double>(load(x, b * m_ * m_ + i));
          }
          store(y, b, static_cast<compute_t<T>>(determinant(a, m_)));
        });
      }
    });
    return ok_status();
  }

 private:
  int64_t batches_, m_;
};

StatusOr<std::unique_ptr<Kernel>> make_det(const MakeArgs& args) {
  const ConcreteShape x = args.input_dims(0);
  return std::unique_ptr<Kernel>(
      std::make_unique<DetKernel>(product(std::span(x).first(x.size() - 2)), x.back()));
}

}  // namespace

void register_linalg_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"Det", infer_det, make_det});
  table.push_back(OpDef{"Einsum", infer_einsum, make_einsum});
  table.push_back(OpDef{.op_type = "Gemm",
                        .infer = infer_gemm,
                        .make = make_gemm,
                        .multiply_adds = gemm_multiply_adds});
  table.push_back(OpDef{.op_type = "MatMul",
                        .infer = infer_matmul,
                        .make = make_matmul,
                        .multiply_adds = matmul_multiply_adds});
  table.push_back(OpDef{.op_type = "MatMulInteger",
                        .infer = infer_matmul_integer,
                        .make = make_matmul_integer,
                        .multiply_adds = matmul_multiply_adds});
  table.push_back(OpDef{.op_type = "QLinearMatMul",
                        .infer = infer_qlinear_matmul,
                        .make = make_qlinear_matmul,
                        .multiply_adds = matmul_multiply_adds});
}

}  // namespace kiln::kernels
