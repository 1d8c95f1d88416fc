// Matrix-product kernels (linalg.cc). Expected values are hand-computed or taken from the ONNX
// operator documentation examples.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/kernels/activation.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/kernel.h"
#include "kiln/kernels/op_attributes.h"
#include "tests/support/expect.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

Attributes equation(const char* text) { return attrs({{"equation", std::string(text)}}); }

StatusOr<Shape> infer_shape(std::string_view op, std::vector<ValueType> inputs,
                            const Attributes& attributes) {
  InferArgs args{attributes, {}, {}, 1, {}, {}, {}, {}};
  for (ValueType& v : inputs) {
    args.inputs.emplace_back(std::move(v));
    args.constants.push_back(nullptr);
  }
  KILN_RETURN_IF_ERROR(find_op_def(op)->infer(args));
  return args.outputs[0].shape;
}

TEST(MatMul, IntegersOneDOperandsAndBatchBroadcast) {
  // [2] @ [2, 3] -> [3]
  EXPECT_EQ(
      values_of<int32_t>(run_one("MatMul", {i32({2}, {1, 2}), i32({2, 3}, {1, 2, 3, 4, 5, 6})})),
      (std::vector<int32_t>{9, 12, 15}));
  // [2, 1, 2] @ [2] -> [2, 1]
  EXPECT_EQ(
      values_of<int64_t>(run_one("MatMul", {i64({2, 1, 2}, {1, 2, 3, 4}), i64({2}, {10, 1})})),
      (std::vector<int64_t>{12, 34}));
  // [2, 1, 2] @ [1, 2, 1]: B's batch of 1 broadcasts.
  auto y = run_one("MatMul", {f64({2, 1, 2}, {1, 2, 3, 4}), f64({1, 2, 1}, {1, -1})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->shape(), (ConcreteShape{2, 1, 1}));
  EXPECT_EQ(values_of<double>(y), (std::vector<double>{-1, -1}));
  auto s =
      infer_shape("MatMul", {{DType::kF32, {sym("N"), 1, 4, 8}}, {DType::kF32, {3, 8, 2}}}, {});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(shape_to_string(*s), "[N,3,4,2]");
}

// kiln's MatMul bias (input 2 'kiln_bias', passes::fuse_matmul): added to every row after the
// product, NaN included; its shape rule wants [N] for a B of rank >= 2.
TEST(MatMul, KilnBiasAddsPerColumn) {
  // [[1, 2], [3, 4]] @ [[1, 0, 2], [0, 1, -1]] = [[1, 2, 0], [3, 4, 2]], + [10, NaN, -1].
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto y = run_one("MatMul", {f64({2, 2}, {1, 2, 3, 4}), f64({2, 3}, {1, 0, 2, 0, 1, -1}),
                              f64({3}, {10, nan, -1})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const std::vector<double> v = values_of<double>(y);
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v[0], 11);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], -1);
  EXPECT_EQ(v[3], 13);
  EXPECT_TRUE(std::isnan(v[4]));
  EXPECT_EQ(v[5], 1);
  auto f = run_one("MatMul", {f32({1, 2}, {1, 2}), f32({2, 1}, {3, 4}), f32({1}, {0.5f})});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(values_of<float>(f), (std::vector<float>{11.5f}));

  auto s = infer_shape(
      "MatMul", {{DType::kF32, {sym("B"), sym("S"), 8}}, {DType::kF32, {8, 5}}, {DType::kF32, {5}}},
      {});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(shape_to_string(*s), "[B,S,5]");
  EXPECT_TRUE(has_error(
      infer_shape("MatMul", {{DType::kF32, {2, 8}}, {DType::kF32, {8, 5}}, {DType::kF32, {4}}}, {})
          .status(),
      StatusCode::kInvalidArgument, {"input 2 'kiln_bias' dim 0"}));
  EXPECT_TRUE(has_error(
      infer_shape("MatMul", {{DType::kF32, {2, 8}}, {DType::kF32, {8, 5}}, {DType::kF32, {1, 5}}},
                  {})
          .status(),
      StatusCode::kInvalidArgument, {"input 2 'kiln_bias'"}));
  EXPECT_TRUE(has_error(
      infer_shape("MatMul", {{DType::kF32, {2, 8}}, {DType::kF32, {8}}, {DType::kF32, {1}}}, {})
          .status(),
      StatusCode::kInvalidArgument, {"input 2 'kiln_bias' needs input 1 'B' of rank >= 2"}));
  EXPECT_FALSE(
      infer_shape("MatMul", {{DType::kF32, {2, 8}}, {DType::kF32, {8, 5}}, {DType::kF64, {5}}}, {})
          .ok());
}

// kiln's MatMul activation (attribute kiln_activation, passes::fuse_matmul): GELU of the product
// plus bias, as ONNX's Gelu computes it; only the GELU forms, on float products.
TEST(MatMul, KilnActivationAppliesGeluLast) {
  // [[1, 2]] @ [[1, -1], [1, -1]] = [[3, -3]], + bias [-1, NaN]: GELU of [2, NaN].
  for (const char* form : {"gelu", "gelu_tanh"}) {
    Attributes a;
    a.set(kActivationAttribute, std::string(form));
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto y = run_one("MatMul",
                     {f64({1, 2}, {1, 2}), f64({2, 2}, {1, -1, 1, -1}), f64({2}, {-1, nan})}, a);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    const std::vector<double> v = values_of<double>(y);
    const double want = std::string(form) == "gelu"
                            ? std::erf(std::sqrt(2.0)) + 1.0
                            : 1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (2.0 + 0.044715 * 8.0));
    EXPECT_NEAR(v[0], want, 1e-15) << form;
    EXPECT_TRUE(std::isnan(v[1])) << form;
  }
  Attributes relu;
  relu.set(kActivationAttribute, std::string("relu"));
  EXPECT_TRUE(has_error(
      infer_shape("MatMul", {{DType::kF32, {2, 8}}, {DType::kF32, {8, 5}}}, relu).status(),
      StatusCode::kUnimplemented, {"kiln_activation", "relu", "only GELU"}));
  Attributes gelu;
  gelu.set(kActivationAttribute, std::string("gelu"));
  EXPECT_TRUE(has_error(
      infer_shape("MatMul", {{DType::kI32, {2, 8}}, {DType::kI32, {8, 5}}}, gelu).status(),
      StatusCode::kUnimplemented, {"kiln_activation", "needs a float product"}));
  Attributes unknown;
  unknown.set(kActivationAttribute, std::string("swiglu"));
  EXPECT_TRUE(has_error(
      infer_shape("MatMul", {{DType::kF32, {2, 8}}, {DType::kF32, {8, 5}}}, unknown).status(),
      StatusCode::kInvalidArgument, {"kiln_activation", "swiglu"}));
}

// kiln's MatMul scale (attribute kiln_scale, passes::fuse_matmul): each sum times it, before the
// bias; on float products only, and a value an f32 holds.
TEST(MatMul, KilnScaleMultipliesTheSumBeforeTheBias) {
  // [[1, 2]] @ [[1, 3], [1, 3]] = [[3, 9]], * 0.5 = [[1.5, 4.5]], + bias [1, NaN].
  Attributes a;
  a.set(kMatmulScaleAttribute, 0.5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto y =
      run_one("MatMul", {f32({1, 2}, {1, 2}), f32({2, 2}, {1, 3, 1, 3}), f32({2}, {1, nan})}, a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const std::vector<float> v = values_of<float>(y);
  EXPECT_EQ(v[0], 2.5f);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_TRUE(
      has_error(infer_shape("MatMul", {{DType::kI32, {2, 8}}, {DType::kI32, {8, 5}}}, a).status(),
                StatusCode::kUnimplemented, {"kiln_scale", "needs a float product", "i32"}));
  Attributes inexact;
  inexact.set(kMatmulScaleAttribute, 0.1);
  EXPECT_TRUE(has_error(
      infer_shape("MatMul", {{DType::kF32, {2, 8}}, {DType::kF32, {8, 5}}}, inexact).status(),
      StatusCode::kInvalidArgument, {"kiln_scale", "not an f32 value"}));
  Attributes text;
  text.set(kMatmulScaleAttribute, std::string("half"));
  EXPECT_FALSE(infer_shape("MatMul", {{DType::kF32, {2, 8}}, {DType::kF32, {8, 5}}}, text).ok());
}

// kiln's MatMul softmax (attribute kiln_softmax, passes::fuse_matmul): Softmax along each row of
// the product after its scale and bias, hand-computed; a NaN makes its row NaN. Only 0 or 1, on
// float products with a B of rank >= 2 and without kiln_activation.
TEST(MatMul, KilnSoftmaxNormalizesEachRowLast) {
  // [[1, 2], [0, 1]] @ [[1, 0, 0], [0, 1, 0]] = [[1, 2, 0], [0, 1, 0]], * 2, + bias [0, 0, NaN]
  // in row 1 only by a NaN of A: row 0 is softmax([2, 4, 0]), row 1 NaN.
  Attributes a;
  a.set(kMatmulScaleAttribute, 2.0);
  a.set(kMatmulSoftmaxAttribute, int64_t{1});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto y = run_one("MatMul", {f64({2, 2}, {1, 2, nan, 1}), f64({2, 3}, {1, 0, 0, 0, 1, 0})}, a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const std::vector<double> v = values_of<double>(y);
  const double sum = std::exp(2.0) + std::exp(4.0) + std::exp(0.0);
  EXPECT_NEAR(v[0], std::exp(2.0) / sum, 1e-15);
  EXPECT_NEAR(v[1], std::exp(4.0) / sum, 1e-15);
  EXPECT_NEAR(v[2], 1.0 / sum, 1e-15);
  for (size_t i = 3; i < 6; ++i) EXPECT_TRUE(std::isnan(v[i])) << i;
  const std::vector<ValueType> floats = {{DType::kF32, {2, 8}}, {DType::kF32, {8, 5}}};
  Attributes softmax_only;
  softmax_only.set(kMatmulSoftmaxAttribute, int64_t{1});
  Attributes two;
  two.set(kMatmulSoftmaxAttribute, int64_t{2});
  EXPECT_TRUE(has_error(infer_shape("MatMul", floats, two).status(), StatusCode::kInvalidArgument,
                        {"kiln_softmax", "0 or 1", "2"}));
  EXPECT_TRUE(has_error(
      infer_shape("MatMul", {{DType::kI32, {2, 8}}, {DType::kI32, {8, 5}}}, softmax_only).status(),
      StatusCode::kUnimplemented, {"kiln_softmax", "needs a float product", "i32"}));
  EXPECT_TRUE(
      has_error(infer_shape("MatMul", {{DType::kF32, {2, 8}}, {DType::kF32, {8}}}, a).status(),
                StatusCode::kInvalidArgument, {"kiln_softmax", "input 1 'B' of rank >= 2", "[8]"}));
  Attributes with_gelu = a;
  with_gelu.set(kActivationAttribute, std::string("gelu"));
  EXPECT_TRUE(has_error(infer_shape("MatMul", floats, with_gelu).status(),
                        StatusCode::kInvalidArgument, {"kiln_softmax", "kiln_activation"}));
  Attributes off;
  off.set(kMatmulSoftmaxAttribute, int64_t{0});
  auto plain = run_one("MatMul", {f64({1, 2}, {1, 2}), f64({2, 1}, {1, 1})}, off);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(values_of<double>(plain), std::vector<double>{3.0});
}

// kiln's attention values (input 4 'kiln_values', passes::fuse_matmul): the softmaxed product
// times V, the bits of MatMul(softmax, mask) then MatMul(P, V); V of rank 2 broadcasts over the
// scores' leading dims. Equal scores give each row the mean of V's rows (hand-computed). Errors:
// no kiln_softmax, a product other than f32, V of rank 1 or above the scores', V's rows other
// than the scores' columns, V's leading dims adding to the scores', a 1-D A (no rows).
TEST(MatMul, KilnValuesMultipliesTheProbabilitiesByV) {
  Attributes softmax;
  softmax.set(kMatmulSoftmaxAttribute, int64_t{1});
  softmax.set(kMatmulScaleAttribute, 0.5);
  std::vector<float> q(2 * 3 * 4), k(2 * 4 * 5), mask(2 * 5), v(2 * 5 * 6);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.7f * static_cast<float>(i));
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.3f * static_cast<float>(i));
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = i % 4 == 3 ? -1e4f : 0.0f;
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * static_cast<float>(i) - 2.0f;
  const Tensor tq = f32({2, 3, 4}, q), tk = f32({2, 4, 5}, k), tmask = f32({2, 1, 5}, mask);
  for (const Tensor& tv :
       {f32({2, 5, 6}, v), f32({5, 6}, std::vector<float>(v.begin(), v.begin() + 30))}) {
    auto scores = run_op("MatMul", {value(tq), value(tk), absent(), value(tmask)}, softmax);
    ASSERT_TRUE(scores.ok()) << scores.status().to_string();
    auto unfused = run_one("MatMul", {(*scores)[0], tv});
    ASSERT_TRUE(unfused.ok()) << unfused.status().to_string();
    auto fused =
        run_op("MatMul", {value(tq), value(tk), absent(), value(tmask), value(tv)}, softmax);
    ASSERT_TRUE(fused.ok()) << fused.status().to_string();
    EXPECT_EQ((*fused)[0].shape(), (ConcreteShape{2, 3, 6}));
    ASSERT_EQ((*fused)[0].byte_size(), unfused->byte_size());
    EXPECT_EQ(std::memcmp((*fused)[0].data(), unfused->data(), unfused->byte_size()), 0)
        << shape_to_string(tv.shape());
  }
  // K of zeros: every score 0, each probability 1/3, each output row the mean of V's rows.
  auto mean = run_op("MatMul",
                     {value(f32({1, 2}, {1, 2})), value(f32({2, 3}, {0, 0, 0, 0, 0, 0})), absent(),
                      absent(), value(f32({3, 2}, {1, 2, 3, 4, 5, 6}))},
                     softmax);
  ASSERT_TRUE(mean.ok()) << mean.status().to_string();
  const std::vector<float> got = values_of<float>((*mean)[0]);
  EXPECT_NEAR(got[0], 3.0f, 1e-6f);
  EXPECT_NEAR(got[1], 4.0f, 1e-6f);

  // Both products' multiply-adds: 2 x 3 rows of 5 scores over 4, then 2 x 3 x 6 outputs over 5.
  const ConcreteShape qs{2, 3, 4}, ks{2, 4, 5}, vs{2, 5, 6}, ys{2, 3, 6};
  const std::vector<const ConcreteShape*> in_dims{&qs, &ks, nullptr, nullptr, &vs};
  const std::vector<const ConcreteShape*> out_dims{&ys};
  EXPECT_EQ(multiply_adds("MatMul", softmax, in_dims, out_dims), 2.0 * 3 * 5 * 4 + 2.0 * 3 * 6 * 5);

  auto infer = [](const std::vector<ValueType>& in, const Attributes& a) {
    return infer_op("MatMul", {in[0], in[1], std::nullopt, std::nullopt, in[2]}, a);
  };
  const ValueType q3{DType::kF32, {2, 3, 4}}, k3{DType::kF32, {2, 4, 5}};
  auto ok = infer({q3, k3, {DType::kF32, {5, 6}}}, softmax);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)[0].shape, (Shape{DimExpr(2), DimExpr(3), DimExpr(6)}));
  EXPECT_TRUE(has_error(infer({q3, k3, {DType::kF32, {2, 5, 6}}}, {}).status(),
                        StatusCode::kInvalidArgument, {"kiln_values", "kiln_softmax"}));
  EXPECT_TRUE(has_error(
      infer({{DType::kF64, {2, 3, 4}}, {DType::kF64, {2, 4, 5}}, {DType::kF64, {2, 5, 6}}}, softmax)
          .status(),
      StatusCode::kUnimplemented, {"kiln_values", "f32", "f64"}));
  EXPECT_TRUE(has_error(infer({{DType::kF32, {4}}, k3, {DType::kF32, {5, 6}}}, softmax).status(),
                        StatusCode::kInvalidArgument, {"kiln_values", "input 0 'A' of rank >= 2"}));
  EXPECT_TRUE(has_error(infer({q3, k3, {DType::kF32, {5}}}, softmax).status(),
                        StatusCode::kInvalidArgument, {"kiln_values", "[5]", "rank 2 to 3"}));
  EXPECT_TRUE(has_error(infer({q3, k3, {DType::kF32, {1, 2, 5, 6}}}, softmax).status(),
                        StatusCode::kInvalidArgument, {"kiln_values", "rank 2 to 3"}));
  EXPECT_TRUE(has_error(infer({q3, k3, {DType::kF32, {2, 4, 6}}}, softmax).status(),
                        StatusCode::kInvalidArgument, {"kiln_values"}));
  EXPECT_TRUE(has_error(
      infer({{DType::kF32, {1, 3, 4}}, {DType::kF32, {1, 4, 5}}, {DType::kF32, {2, 5, 6}}}, softmax)
          .status(),
      StatusCode::kInvalidArgument, {"kiln_values", "broadcast against the scores"}));
}

TEST(MatMul, KilnResidualAddsPerElementAfterTheBias) {
  // [[1, 2], [3, 4]] @ [[1], [1]] = [[3], [7]], + bias [1], + residual [[0.5], [NaN]].
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto y = run_one("MatMul", {f64({2, 2}, {1, 2, 3, 4}), f64({2, 1}, {1, 1}), f64({1}, {1}),
                              f64({2, 1}, {0.5, nan})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const std::vector<double> v = values_of<double>(y);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], 4.5);
  EXPECT_TRUE(std::isnan(v[1]));
  auto s = infer_shape("MatMul",
                       {{DType::kF32, {sym("B"), 3, 8}},
                        {DType::kF32, {8, 5}},
                        {DType::kF32, {5}},
                        {DType::kF32, {sym("B"), 3, 5}}},
                       {});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(shape_to_string(*s), "[B,3,5]");
  EXPECT_TRUE(has_error(infer_shape("MatMul",
                                    {{DType::kF32, {2, 3, 8}},
                                     {DType::kF32, {8, 5}},
                                     {DType::kF32, {5}},
                                     {DType::kF32, {2, 4, 5}}},
                                    {})
                            .status(),
                        StatusCode::kInvalidArgument, {"input 3 'kiln_residual' dim 1"}));
  EXPECT_TRUE(has_error(infer_shape("MatMul",
                                    {{DType::kF32, {3, 8}},
                                     {DType::kF32, {8, 5}},
                                     {DType::kF32, {5}},
                                     {DType::kF32, {1, 3, 5}}},
                                    {})
                            .status(),
                        StatusCode::kInvalidArgument, {"input 3 'kiln_residual'", "rank 1 to 2"}));
}

// A kiln_residual with the output's last dim broadcasts over its dims of 1 (attention's mask):
// [2, 1, 2] against the output [2, 3, 2] adds batch b's row to each of its 3 rows; one of a lower
// rank, right-aligned ([1, 2] or [2]; a causal mask [S, S] against [B, H, S, S]), adds its row to
// every row. Its last dim never broadcasts, and a dim that is neither 1 nor the output's is
// refused.
TEST(MatMul, KilnResidualBroadcastsOverItsDimsOfOne) {
  // A: 2 batches of 3 x 1 rows [1..6]; B [1, 2] = [1, 10]: row i of batch b is (x, 10 x).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto y = run_op("MatMul", {value(f64({2, 3, 1}, {1, 2, 3, 4, 5, 6})), value(f64({1, 2}, {1, 10})),
                             absent(), value(f64({2, 1, 2}, {0.5, -1, 100, nan}))});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(shape_to_string(y->at(0).shape()), "[2,3,2]");
  const std::vector<double> v = values_of<double>(y->at(0));
  const std::vector<double> want{1.5, 9, 2.5, 19, 3.5, 29, 104, nan, 105, nan, 106, nan};
  ASSERT_EQ(v.size(), want.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(v[i])) << i;
    } else {
      EXPECT_EQ(v[i], want[i]) << i;
    }
  }
  for (const Tensor& row : {f64({1, 2}, {0.5, -1}), f64({2}, {0.5, -1})}) {
    auto every_row = run_op("MatMul", {value(f64({2, 3, 1}, {1, 2, 3, 4, 5, 6})),
                                       value(f64({1, 2}, {1, 10})), absent(), value(row)});
    ASSERT_TRUE(every_row.ok()) << every_row.status().to_string();
    EXPECT_EQ(values_of<double>(every_row->at(0)),
              (std::vector<double>{1.5, 9, 2.5, 19, 3.5, 29, 4.5, 39, 5.5, 49, 6.5, 59}))
        << shape_to_string(row.shape());
  }
  for (const Shape& mask : {Shape{sym("B"), 1, 1, sym("S")}, Shape{sym("S"), sym("S")}}) {
    auto s = infer_op("MatMul", {type(DType::kF32, {sym("B"), 4, sym("S"), 8}),
                                 type(DType::kF32, {sym("B"), 4, 8, sym("S")}), std::nullopt,
                                 type(DType::kF32, mask)});
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(shape_to_string(s->at(0).shape), "[B,4,S,S]");
  }
  for (const Shape& bad : {Shape{2, 1, 6, 1}, Shape{2, 2, 1, 6}, Shape{5, 6}}) {
    EXPECT_TRUE(has_error(
        infer_op("MatMul", {type(DType::kF32, {2, 4, 6, 8}), type(DType::kF32, {2, 4, 8, 6}),
                            std::nullopt, type(DType::kF32, bad)})
            .status(),
        StatusCode::kInvalidArgument, {"input 3 'kiln_residual' dim"}))
        << shape_to_string(bad);
  }
}

TEST(MatMulInteger, PerRowZeroPoint) {
  // ONNX MatMulInteger example: A 4x3 u8, B 3x2 u8, a_zero_point 12, b_zero_point 0.
  Tensor a = u8({4, 3}, {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0});
  Tensor b = u8({3, 2}, {1, 4, 2, 5, 3, 6});
  auto y = run_one("MatMulInteger", {a, b, u8({}, {12}), u8({}, {0})});
  EXPECT_EQ(values_of<int32_t>(y),
            (std::vector<int32_t>{-38, -83, -44, -98, -50, -113, -56, -128}));
  // The same zero point given per row of A.
  auto r = run_one("MatMulInteger", {a, b, u8({4}, {12, 12, 12, 12})});
  EXPECT_EQ(values_of<int32_t>(r),
            (std::vector<int32_t>{-38, -83, -44, -98, -50, -113, -56, -128}));
}

TEST(Gemm, TransposesAlphaBetaAndBroadcastBias) {
  // A^T = [[1, 2], [3, 4]], B^T = I: alpha * A^T + beta * [10, 20] (row bias).
  auto y = run_one(
      "Gemm", {f32({2, 2}, {1, 3, 2, 4}), f32({2, 2}, {1, 0, 0, 1}), f32({2}, {10, 20})},
      attrs({{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 2.0}, {"beta", 0.5}}));
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{7, 14, 11, 18}));
  // Column bias [2, 1] and integer dtypes.
  auto c = run_one("Gemm", {i64({2, 1}, {1, 2}), i64({1, 2}, {3, 4}), i64({2, 1}, {100, 200})});
  EXPECT_EQ(values_of<int64_t>(c), (std::vector<int64_t>{103, 104, 206, 208}));
  auto bad = run_one("Gemm", {i64({2, 1}, {1, 2}), i64({1, 2}, {3, 4})}, attrs({{"alpha", 0.5}}));
  EXPECT_EQ(bad.status().code(), StatusCode::kUnimplemented);
}

TEST(Einsum, TraceDiagonalAndTranspose) {
  Tensor m = f64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(values_of<double>(run_one("Einsum", {m}, equation("ii"))), (std::vector<double>{15}));
  EXPECT_EQ(values_of<double>(run_one("Einsum", {m}, equation("ii->i"))),
            (std::vector<double>{1, 5, 9}));
  EXPECT_EQ(values_of<double>(run_one("Einsum", {m}, equation("ij -> ji"))),
            (std::vector<double>{1, 4, 7, 2, 5, 8, 3, 6, 9}));
  // Implicit output: labels that occur once, alphabetically: "ji" means "ji->ij", a transpose.
  EXPECT_EQ(values_of<double>(run_one("Einsum", {m}, equation("ji"))),
            (std::vector<double>{1, 4, 7, 2, 5, 8, 3, 6, 9}));
}

TEST(Einsum, ProductsWithEllipsisBroadcast) {
  // Implicit "ij,jk" is the matrix product [i, k].
  Tensor a = f32({2, 2}, {1, 2, 3, 4});
  Tensor b = f32({2, 2}, {5, 6, 7, 8});
  EXPECT_EQ(values_of<float>(run_one("Einsum", {a, b}, equation("ij,jk"))),
            (std::vector<float>{19, 22, 43, 50}));
  // "...ij,...jk->...ik" with batch [2] against batch [] (broadcast).
  Tensor batch = f32({2, 1, 2}, {1, 0, 0, 1});
  auto y = run_one("Einsum", {batch, b}, equation("...ij,...jk->...ik"));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->shape(), (ConcreteShape{2, 1, 2}));
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{5, 6, 7, 8}));
  // Three operands, outer product then sum: sum_i a_i * b_i * c_i.
  EXPECT_EQ(
      values_of<int64_t>(run_one("Einsum", {i64({2}, {1, 2}), i64({2}, {3, 4}), i64({2}, {5, 6})},
                                 equation("i,i,i->"))),
      (std::vector<int64_t>{63}));
}

TEST(Einsum, SymbolicShapesAndBadEquations) {
  auto s = infer_shape("Einsum", {{DType::kF32, {sym("B"), 3, 4}}, {DType::kF32, {sym("B"), 4, 5}}},
                       equation("bij,bjk->bik"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(shape_to_string(*s), "[B,3,5]");
  auto mismatch =
      infer_shape("Einsum", {{DType::kF32, {3, 4}}, {DType::kF32, {5, 6}}}, equation("ij,jk->ik"));
  EXPECT_NE(mismatch.status().message().find("label 'j'"), std::string::npos)
      << mismatch.status().to_string();
  auto rank = infer_shape("Einsum", {{DType::kF32, {3, 4, 5}}}, equation("ij->i"));
  EXPECT_EQ(rank.status().code(), StatusCode::kInvalidArgument);
  auto output = infer_shape("Einsum", {{DType::kF32, {3, 4}}}, equation("ij->iz"));
  EXPECT_NE(output.status().message().find("'z'"), std::string::npos);
  auto operands = infer_shape("Einsum", {{DType::kF32, {3, 4}}}, equation("ij,jk->ik"));
  EXPECT_NE(operands.status().message().find("2 operands"), std::string::npos);
  auto chars = infer_shape("Einsum", {{DType::kF32, {3}}}, equation("i1->i"));
  EXPECT_EQ(chars.status().code(), StatusCode::kInvalidArgument);
}

TEST(Det, BatchedPivotingNanAndEmpty) {
  // np.linalg.det of two 3x3 matrices (the second needs a row swap: its first pivot is 0).
  auto y =
      run_one("Det", {f64({2, 3, 3}, {2, -1, 0, 1, 3, 2, 0, 1, 4, 0, 1, 2, 1, 0, 3, 4, -3, 8})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->shape(), (ConcreteShape{2}));
  expect_close(*y, {2}, {24.000000000000004, -2.0}, 1e-12, 1e-12);
  // ONNX test_det_2d: [[1, 2], [3, 4]] -> -2 (rank 0 out); a singular matrix gives 0.
  y = run_one("Det", {f32({2, 2}, {1, 2, 3, 4})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->shape(), (ConcreteShape{}));
  expect_close(*y, {}, {-2});
  EXPECT_EQ(values_of<float>(run_one("Det", {f32({2, 2}, {1, 2, 2, 4})})), (std::vector<float>{0}));
  // NaN anywhere in a matrix gives NaN for that matrix only; M = 0 gives 1 (numpy).
  auto nan = run_one("Det", {f32({2, 2, 2}, {0, NAN, 0, 0, 0, 1, 1, 0})});
  ASSERT_TRUE(nan.ok()) << nan.status().to_string();
  expect_close(*nan, {2}, {NAN, -1});
  y = run_one("Det", {f32({3, 0, 0}, std::vector<double>{})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close(*y, {3}, {1, 1, 1});
}

TEST(Det, SymbolicShapesAndBadInputs) {
  auto s = infer_shape("Det", {{DType::kF16, {sym("N"), 5, 5}}}, {});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(shape_to_string(*s), "[N]");
  EXPECT_TRUE(has_error(infer_shape("Det", {{DType::kF32, {2, 3}}}, {}).status(),
                        StatusCode::kInvalidArgument, {"input 0 'X' last dim", "square"}));
  EXPECT_TRUE(has_error(infer_shape("Det", {{DType::kF32, {3}}}, {}).status(),
                        StatusCode::kInvalidArgument, {"input 0 'X' must have rank 2 to 64"}));
  EXPECT_TRUE(has_error(infer_shape("Det", {{DType::kI64, {2, 2}}}, {}).status(),
                        StatusCode::kUnimplemented, {"input 0 'X' must have dtype"}));
}

}  // namespace
}  // namespace kiln::kernels
