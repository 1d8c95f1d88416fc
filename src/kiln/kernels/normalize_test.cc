// Softmax family and normalization kernels. Expected values are worked out by hand from the
// ONNX spec's formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/expect.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

void expect_near(const std::vector<float>& got, const std::vector<double>& want,
                 double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(SoftmaxKernels, LastAxisByDefault) {
  auto y = run_op("Softmax", {value(f32({2, 2}, {0, std::log(3.0f), 1, 1}))});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(values_of<float>((*y)[0]), {0.25, 0.75, 0.5, 0.5});
}

TEST(SoftmaxKernels, AxisZeroAndLargeValues) {
  // Columns: [1000, 1001] -> [1/(1+e), e/(1+e)]; exp(1000) alone would overflow.
  auto y =
      run_op("Softmax", {value(f32({2, 2}, {1000, 0, 1001, 0}))}, attrs({{"axis", int64_t{0}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const double e = std::exp(1.0);
  expect_near(values_of<float>((*y)[0]), {1 / (1 + e), 0.5, e / (1 + e), 0.5});
}

TEST(SoftmaxKernels, LogSoftmaxAndHardmax) {
  auto log = run_op("LogSoftmax", {value(f32({1, 2}, {1000, 1000}))});
  ASSERT_TRUE(log.ok()) << log.status().to_string();
  expect_near(values_of<float>((*log)[0]), {-std::log(2.0), -std::log(2.0)});
  // Hardmax marks the first maximum of each row.
  auto hard = run_op("Hardmax", {value(f32({2, 3}, {3, 3, 1, 0, 5, 5}))});
  ASSERT_TRUE(hard.ok()) << hard.status().to_string();
  EXPECT_EQ(values_of<float>((*hard)[0]), (std::vector<float>{1, 0, 0, 0, 1, 0}));
}

// A lane holding a NaN or +inf is NaN throughout (its max is NaN or +inf, and inf - inf is NaN),
// and so is a lane of -inf only; a -inf beside finite values is an exact 0 (log: -inf). ONNX
// Runtime 1.30 gives the same NaN for each of these rows; the CPU backend's oneDNN softmax must
// match (hal/cpu nan_propagation_test.cc).
TEST(SoftmaxKernels, LanesWithNaNOrInfinity) {
  const float nan = NAN, inf = INFINITY;
  const Tensor x = f32({4, 3}, {nan, 1, 2, 1, 2, -inf, inf, 1, 2, -inf, -inf, -inf});
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    SCOPED_TRACE(op);
    const bool log = std::string(op) == "LogSoftmax";
    auto rows = run_op(op, {value(x)});
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    const std::vector<float> r = values_of<float>((*rows)[0]);
    for (int i : {0, 1, 2, 6, 7, 8, 9, 10, 11}) EXPECT_TRUE(std::isnan(r[i])) << "element " << i;
    const double e = std::exp(1.0);
    if (log) {
      EXPECT_NEAR(r[3], -std::log(1 + e), 1e-6);
      EXPECT_NEAR(r[4], 1 - std::log(1 + e), 1e-6);
      EXPECT_EQ(r[5], -inf);
    } else {
      EXPECT_NEAR(r[3], 1 / (1 + e), 1e-6);
      EXPECT_NEAR(r[4], e / (1 + e), 1e-6);
      EXPECT_EQ(r[5], 0.0f);
    }
    // Along axis 0: column 0 holds the NaN, column 1 is finite, column 2 has a -inf.
    auto cols = run_op(op, {value(x)}, attrs({{"axis", int64_t{0}}}));
    ASSERT_TRUE(cols.ok()) << cols.status().to_string();
    const std::vector<float> c = values_of<float>((*cols)[0]);
    for (int i = 0; i < 12; ++i) {
      EXPECT_EQ(std::isnan(c[i]), i % 3 == 0) << "element " << i << ": " << c[i];
    }
    EXPECT_EQ(c[11], log ? -inf : 0.0f);
  }
}

TEST(SoftmaxKernels, RejectsBadInput) {
  auto axis = infer_op("Softmax", {type(DType::kF32, {2, 3})}, attrs({{"axis", int64_t{2}}}));
  EXPECT_TRUE(contains(error_of(axis), "attribute 'axis' = 2")) << error_of(axis);
  auto dtype = infer_op("LogSoftmax", {type(DType::kI32, {2, 3})});
  EXPECT_TRUE(contains(error_of(dtype), "dtype")) << error_of(dtype);
  auto sym_shape = infer_op("Hardmax", {type(DType::kF16, {sym("N"), 3})});
  ASSERT_TRUE(sym_shape.ok()) << sym_shape.status().to_string();
  EXPECT_EQ((*sym_shape)[0].shape, (Shape{sym("N"), 3}));
}

TEST(LayerNormKernels, NormalizesScalesAndReportsStatistics) {
  // Rows [1,3] (mean 2, var 1) and [0,4] (mean 2, var 4); Scale [1,2], B [0,1].
  auto y =
      run_op("LayerNormalization",
             {value(f32({2, 2}, {1, 3, 0, 4})), value(f32({2}, {1, 2})), value(f32({2}, {0, 1}))},
             attrs({{"epsilon", 0.0}}), 3);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(values_of<float>((*y)[0]), {-1, 3, -1, 3});
  EXPECT_EQ((*y)[1].shape(), (ConcreteShape{2, 1}));
  EXPECT_EQ((*y)[1].dtype(), DType::kF32);
  expect_near(values_of<float>((*y)[1]), {2, 2});
  expect_near(values_of<float>((*y)[2]), {1, 0.5});
}

TEST(LayerNormKernels, AxisZeroWithBroadcastScaleAndNoBias) {
  // All four values normalized together: mean 2.5, var 1.25; Scale [1] broadcasts.
  auto y = run_op("LayerNormalization", {value(f64({2, 2}, {1, 2, 3, 4})), value(f64({1}, {2}))},
                  attrs({{"axis", int64_t{0}}, {"epsilon", 0.0}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const double s = 1 / std::sqrt(1.25);
  const std::vector<double> want = {-3 * s, -s, s, 3 * s};
  auto got = values_of<double>((*y)[0]);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-12);
}

TEST(LayerNormKernels, HalfAndBFloat16StoreRoundedResults) {
  // Rows [1,3] -> [-1, 1] with eps 0; -1 and 1 are exact in both formats.
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    auto make = [&](ConcreteShape shape, std::vector<float> v) {
      Tensor t = Tensor::create(dtype, std::move(shape)).value();
      auto bits = t.mutable_values<uint16_t>();
      for (size_t i = 0; i < v.size(); ++i) {
        bits[i] = dtype == DType::kF16 ? float_to_half_bits(v[i]) : float_to_bfloat16_bits(v[i]);
      }
      return t;
    };
    auto y =
        run_op("LayerNormalization",
               {value(make({1, 2}, {1, 3})), value(make({2}, {1, 1})), value(make({2}, {0, 0.5}))},
               attrs({{"epsilon", 0.0}}), 2);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    EXPECT_EQ((*y)[0].dtype(), dtype);
    EXPECT_EQ((*y)[1].dtype(), DType::kF32);  // stash_type 1
    auto bits = values_of<uint16_t>((*y)[0]);
    auto f = [&](uint16_t b) {
      return dtype == DType::kF16 ? half_bits_to_float(b) : bfloat16_bits_to_float(b);
    };
    EXPECT_EQ(f(bits[0]), -1.0f);
    EXPECT_EQ(f(bits[1]), 1.5f);
    EXPECT_EQ(values_of<float>((*y)[1])[0], 2.0f);
  }
}

TEST(LayerNormKernels, SymbolicShapesAndBadInput) {
  auto t = infer_op("LayerNormalization",
                    {type(DType::kF32, {sym("N"), sym("T"), 8}), type(DType::kF32, {8})}, {}, 3);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)[0].shape, (Shape{sym("N"), sym("T"), 8}));
  EXPECT_EQ((*t)[1].shape, (Shape{sym("N"), sym("T"), 1}));
  auto wrong_scale =
      infer_op("LayerNormalization", {type(DType::kF32, {2, 8}), type(DType::kF32, {4})});
  EXPECT_TRUE(contains(error_of(wrong_scale), "input 1 'Scale' dim 0")) << error_of(wrong_scale);
  auto wrong_dtype =
      infer_op("LayerNormalization", {type(DType::kF32, {2, 8}), type(DType::kF64, {8})});
  EXPECT_TRUE(contains(error_of(wrong_dtype), "must have dtype f32")) << error_of(wrong_dtype);
  auto stash = infer_op("LayerNormalization", {type(DType::kF32, {2, 8}), type(DType::kF32, {8})},
                        attrs({{"stash_type", int64_t{16}}}));
  ASSERT_FALSE(stash.ok());
  EXPECT_EQ(stash.status().code(), StatusCode::kUnimplemented);
  auto no_scale = infer_op("LayerNormalization",
                           {type(DType::kF32, {2, 8}), std::nullopt, type(DType::kF32, {8})});
  EXPECT_TRUE(contains(error_of(no_scale), "'Scale' is required")) << error_of(no_scale);
}

TEST(InstanceNormKernels, PerSampleAndChannel) {
  // The ONNX example: channel 0 [-1,0,1], channel 1 [2,3,4]; var 2/3 each.
  auto y = run_op("InstanceNormalization", {value(f32({1, 2, 1, 3}, {-1, 0, 1, 2, 3, 4})),
                                            value(f32({2}, {1, 1.5})), value(f32({2}, {0, 1}))});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const double d = std::sqrt(2.0 / 3.0 + 1e-5);
  expect_near(values_of<float>((*y)[0]), {-1 / d, 0, 1 / d, 1 - 1.5 / d, 1, 1 + 1.5 / d});
  auto bad = infer_op("InstanceNormalization", {type(DType::kF32, {1, 2, 3}),
                                                type(DType::kF32, {3}), type(DType::kF32, {2})});
  EXPECT_TRUE(contains(error_of(bad), "input 1 'scale' dim 0 (channels of input) must be 2, got 3"))
      << error_of(bad);
}

TEST(LpNormKernels, P1P2AndZeroRows) {
  auto two = run_op("LpNormalization", {value(f32({2, 2}, {3, 4, 0, 0}))});
  ASSERT_TRUE(two.ok()) << two.status().to_string();
  expect_near(values_of<float>((*two)[0]), {0.6, 0.8, 0, 0});
  auto one = run_op("LpNormalization", {value(f32({2, 2}, {3, -4, 1, 1}))},
                    attrs({{"p", int64_t{1}}, {"axis", int64_t{0}}}));
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  expect_near(values_of<float>((*one)[0]), {0.75, -0.8, 0.25, 0.2});
  auto p3 = infer_op("LpNormalization", {type(DType::kF32, {2})}, attrs({{"p", int64_t{3}}}));
  EXPECT_TRUE(contains(error_of(p3), "'p' must be 1 or 2")) << error_of(p3);
}

TEST(LrnKernels, WindowAcrossChannels) {
  // alpha/size = 1, beta = 1, bias = 1: y = x / (1 + sum of squares in the window).
  auto y = run_op("LRN", {value(f32({1, 3, 1, 1}, {1, 2, 3}))},
                  attrs({{"size", int64_t{3}}, {"alpha", 3.0}, {"beta", 1.0}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(values_of<float>((*y)[0]), {1.0 / 6, 2.0 / 15, 3.0 / 14});
  // size 2: window [c, c + 1].
  auto even = run_op("LRN", {value(f32({1, 3, 1}, {1, 2, 3}))},
                     attrs({{"size", int64_t{2}}, {"alpha", 2.0}, {"beta", 1.0}}));
  ASSERT_TRUE(even.ok()) << even.status().to_string();
  expect_near(values_of<float>((*even)[0]), {1.0 / 6, 2.0 / 14, 3.0 / 10});
  auto no_size = infer_op("LRN", {type(DType::kF32, {1, 3, 2, 2})});
  EXPECT_TRUE(contains(error_of(no_size), "'size' is required")) << error_of(no_size);
  auto zero = infer_op("LRN", {type(DType::kF32, {1, 3, 2, 2})}, attrs({{"size", int64_t{0}}}));
  EXPECT_TRUE(contains(error_of(zero), "'size' must be >= 1")) << error_of(zero);
}

TEST(MvnKernels, DefaultAxesPerChannel) {
  // [1,2,2,1]: channel 0 holds [1,3] (mean 2, std 1), channel 1 [5,5] (std 0).
  auto y = run_op("MeanVarianceNormalization", {value(f32({1, 2, 2, 1}, {1, 3, 5, 5}))});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(values_of<float>((*y)[0]), {-1, 1, 0, 0});
  auto rank3 = infer_op("MeanVarianceNormalization", {type(DType::kF32, {1, 2, 3})});
  EXPECT_TRUE(contains(error_of(rank3), "attribute 'axes' element 2 = 3")) << error_of(rank3);
  auto custom = run_op("MeanVarianceNormalization", {value(f32({2, 2}, {1, 3, 2, 2}))},
                       attrs({{"axes", std::vector<int64_t>{1}}}));
  ASSERT_TRUE(custom.ok()) << custom.status().to_string();
  expect_near(values_of<float>((*custom)[0]), {-1, 1, 0, 0});
}

TEST(BatchNormKernels, InferenceWithMixedParameterTypesAndRelu) {
  // Channel 0: (x - 1) / 2 * 1 + 0; channel 1: (x - 3) / 1 * 2 - 1.
  std::vector<In> in = {value(f32({1, 2, 1, 2}, {1, 2, 3, 4})), value(f64({2}, {1, 2})),
                        value(f64({2}, {0, -1})), value(f32({2}, {1, 3})), value(f32({2}, {4, 1}))};
  auto y = run_op("BatchNormalization", in, attrs({{"epsilon", 0.0}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(values_of<float>((*y)[0]), {0, 0.5, -1, 1});
  auto relu = run_op("BatchNormalization", in,
                     attrs({{"epsilon", 0.0}, {"kiln_activation", std::string("relu")}}));
  ASSERT_TRUE(relu.ok()) << relu.status().to_string();
  expect_near(values_of<float>((*relu)[0]), {0, 0.5, 0, 1});
  // Rank 2 ([N, C]) works too.
  auto flat = run_op("BatchNormalization",
                     {value(f32({1, 2}, {3, 3})), value(f32({2}, {1, 1})), value(f32({2}, {0, 0})),
                      value(f32({2}, {1, 3})), value(f32({2}, {4, 1}))},
                     attrs({{"epsilon", 0.0}}));
  ASSERT_TRUE(flat.ok()) << flat.status().to_string();
  expect_near(values_of<float>((*flat)[0]), {1, 0});
}

// Training mode, worked by hand: X [N=2, C=2, 1, 2]; channel 0 holds 1, 3, 5, 7 (mean 4,
// population variance 5), channel 1 holds 0, 0, 2, 2 (mean 1, variance 1). epsilon 0,
// momentum 0.5, input_mean 0 and input_var 1: running_mean = 0.5 * (0, 0) + 0.5 * (4, 1),
// running_var = 0.5 * (1, 1) + 0.5 * (5, 1).
TEST(BatchNormKernels, TrainingModeUsesBatchStatistics) {
  const double r5 = 1 / std::sqrt(5.0);
  const Attributes a = attrs({{"training_mode", int64_t{1}}, {"epsilon", 0.0}, {"momentum", 0.5}});
  auto y = run_op("BatchNormalization",
                  {value(f32({2, 2, 1, 2}, {1, 3, 0, 0, 5, 7, 2, 2})), value(f32({2}, {1, 2})),
                   value(f32({2}, {0, 1})), value(f64({2}, {0, 0})), value(f64({2}, {1, 1}))},
                  a, 3);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {2, 2, 1, 2}, {-3 * r5, -r5, -1, -1, r5, 3 * r5, 3, 3}, 1e-6);
  EXPECT_EQ((*y)[1].dtype(), DType::kF64);
  expect_close((*y)[1], {2}, {2, 0.5}, 1e-12);
  expect_close((*y)[2], {2}, {3, 1}, 1e-12);
  // Y alone (the running statistics are optional outputs).
  auto only = run_op("BatchNormalization",
                     {value(f32({2, 2, 1, 2}, {1, 3, 0, 0, 5, 7, 2, 2})), value(f32({2}, {1, 2})),
                      value(f32({2}, {0, 1})), value(f32({2}, {0, 0})), value(f32({2}, {1, 1}))},
                     a, 1);
  ASSERT_TRUE(only.ok()) << only.status().to_string();
  expect_close((*only)[0], {2, 2, 1, 2}, {-3 * r5, -r5, -1, -1, r5, 3 * r5, 3, 3}, 1e-6);
  // NaN in a channel spreads to that channel's outputs and statistics only.
  auto nan = run_op("BatchNormalization",
                    {value(f32({1, 2, 1, 2}, {std::nan(""), 1, 2, 4})), value(f32({2}, {1, 1})),
                     value(f32({2}, {0, 0})), value(f32({2}, {0, 0})), value(f32({2}, {1, 1}))},
                    a, 3);
  ASSERT_TRUE(nan.ok()) << nan.status().to_string();
  EXPECT_TRUE(std::isnan(element_as_double((*nan)[0], 1)));
  EXPECT_TRUE(std::isnan(element_as_double((*nan)[1], 0)));
  EXPECT_NEAR(element_as_double((*nan)[1], 1), 1.5, 1e-6);
}

TEST(BatchNormKernels, RejectsTrainingAndBadShapes) {
  std::vector<std::optional<ValueType>> types = {type(DType::kF32, {sym("N"), 3, 4}),
                                                 type(DType::kF32, {3}), type(DType::kF32, {3}),
                                                 type(DType::kF32, {3}), type(DType::kF32, {3})};
  auto ok = infer_op("BatchNormalization", types);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)[0].shape, (Shape{sym("N"), 3, 4}));
  types[3] = type(DType::kF64, {3});
  auto training = infer_op("BatchNormalization", types, attrs({{"training_mode", int64_t{1}}}), 3);
  ASSERT_TRUE(training.ok()) << training.status().to_string();
  ASSERT_EQ(training->size(), 3u);
  EXPECT_EQ((*training)[0].shape, (Shape{sym("N"), 3, 4}));
  EXPECT_EQ((*training)[1].dtype, DType::kF64);
  EXPECT_EQ((*training)[2].shape, (Shape{3}));
  auto mode = infer_op("BatchNormalization", types, attrs({{"training_mode", int64_t{2}}}));
  EXPECT_TRUE(contains(error_of(mode), "attribute 'training_mode' must be 0 or 1, got 2"))
      << error_of(mode);
  auto outputs = infer_op("BatchNormalization", types, {}, 3);
  EXPECT_EQ(outputs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(error_of(outputs), "exist only in training mode")) << error_of(outputs);
  auto four = infer_op("BatchNormalization", types, attrs({{"training_mode", int64_t{1}}}), 4);
  EXPECT_FALSE(four.ok());
  auto act =
      infer_op("BatchNormalization", types, attrs({{"kiln_activation", std::string("tanh")}}));
  EXPECT_TRUE(contains(error_of(act), "got \"tanh\"")) << error_of(act);
  auto clip =
      infer_op("BatchNormalization", types, attrs({{"kiln_activation", std::string("clip")}}));
  EXPECT_EQ(clip.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(error_of(clip), "\"clip\" is not supported on this op")) << error_of(clip);
  types[4] = type(DType::kF32, {4});
  auto shape = infer_op("BatchNormalization", types);
  EXPECT_TRUE(
      contains(error_of(shape), "input 4 'input_var' dim 0 (channels of X) must be 3, got 4"))
      << error_of(shape);
  types[0] = type(DType::kF32, {3});
  auto rank = infer_op("BatchNormalization", types);
  EXPECT_TRUE(contains(error_of(rank), "rank >= 2")) << error_of(rank);
}

}  // namespace
}  // namespace kiln::kernels
