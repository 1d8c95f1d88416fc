// Reduce* and ArgMax/ArgMin kernels. Expected values are worked out by hand from the ONNX spec.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

std::vector<float> iota_f32(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

TEST(ReduceKernels, SumAlongAxisInput) {
  // [3,2,2] holding 1..12, summed over axis 1.
  auto y = run_op("ReduceSum", {value(f32({3, 2, 2}, iota_f32(12))), constant(i64({1}, {1}))},
                  attrs({{"keepdims", int64_t{1}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{3, 1, 2}));
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{4, 6, 12, 14, 20, 22}));
}

// A channels-last tensor reduced over its spatial axes sums runs of adjacent outputs together
// (reduce.cc, reduce_by_columns): each output must add the same terms in the same order as when
// the reduced axes are innermost, so the bits equal those of the channels-first transpose's
// reduction. 70 channels: a full run of 64 and a partial one; a NaN in one channel.
TEST(ReduceKernels, ChannelsLastSpatialReductionHasTheChannelsFirstBits) {
  const int64_t n = 2, h = 5, w = 7, c = 70;
  std::vector<float> nhwc(n * h * w * c), nchw(nhwc.size());
  uint32_t state = 12345;
  for (float& v : nhwc) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1 << 24) + 0.01f;  // (0, 1)
  }
  nhwc[3 * c + 9] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < c; ++k)
          nchw[((i * c + k) * h + y) * w + x] = nhwc[((i * h + y) * w + x) * c + k];
  for (const char* op :
       {"ReduceSum", "ReduceMean", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceSumSquare"}) {
    SCOPED_TRACE(op);
    auto last = run_op(op, {value(f32({n, h, w, c}, nhwc)), constant(i64({2}, {1, 2}))});
    auto first = run_op(op, {value(f32({n, c, h, w}, nchw)), constant(i64({2}, {2, 3}))});
    ASSERT_TRUE(last.ok()) << last.status().to_string();
    ASSERT_TRUE(first.ok()) << first.status().to_string();
    EXPECT_EQ((*last)[0].shape(), (ConcreteShape{n, 1, 1, c}));
    const std::vector<float> a = values_of<float>((*last)[0]), b = values_of<float>((*first)[0]);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    EXPECT_TRUE(std::isnan(a[9]));
    EXPECT_FALSE(std::isnan(a[10]));
  }
}

TEST(ReduceKernels, EmptyAxesReduceAllOrNothing) {
  auto all = run_op("ReduceSum", {value(f32({3, 2, 2}, iota_f32(12))), constant(i64({0}, {}))});
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ((*all)[0].shape(), (ConcreteShape{1, 1, 1}));
  EXPECT_EQ(values_of<float>((*all)[0]), (std::vector<float>{78}));

  auto none = run_op("ReduceSum", {value(f32({3, 2, 2}, iota_f32(12))), constant(i64({0}, {}))},
                     attrs({{"noop_with_empty_axes", int64_t{1}}}));
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ((*none)[0].shape(), (ConcreteShape{3, 2, 2}));
  EXPECT_EQ(values_of<float>((*none)[0]), iota_f32(12));

  // A no-op returns the input even where one value would change (x^2 for SumSquare).
  auto square = run_op("ReduceSumSquare", {value(f32({2}, {2, -3}))},
                       attrs({{"noop_with_empty_axes", int64_t{1}}}));
  ASSERT_TRUE(square.ok()) << square.status().to_string();
  EXPECT_EQ(values_of<float>((*square)[0]), (std::vector<float>{2, -3}));

  // No axes input at all: every axis; keepdims = 0 gives a scalar.
  auto scalar =
      run_op("ReduceSum", {value(f32({2, 2}, {1, 2, 3, 4}))}, attrs({{"keepdims", int64_t{0}}}));
  ASSERT_TRUE(scalar.ok()) << scalar.status().to_string();
  EXPECT_TRUE((*scalar)[0].shape().empty());
  EXPECT_EQ(values_of<float>((*scalar)[0]), (std::vector<float>{10}));
}

TEST(ReduceKernels, NonAdjacentAxes) {
  // x[i,j,k] = 12i + 4j + k over [2,3,4]; summing i and k: 32j + 60.
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i);
  auto y = run_op("ReduceSum", {value(f32({2, 3, 4}, x)), constant(i64({2}, {0, -1}))},
                  attrs({{"keepdims", int64_t{0}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{3}));
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{60, 92, 124}));
  // Mean over the same axes divides by 8.
  auto m = run_op("ReduceMean", {value(f32({2, 3, 4}, x))},
                  attrs({{"axes", std::vector<int64_t>{2, 0}}, {"keepdims", int64_t{1}}}));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)[0].shape(), (ConcreteShape{1, 3, 1}));
  EXPECT_EQ(values_of<float>((*m)[0]), (std::vector<float>{7.5f, 11.5f, 15.5f}));
}

TEST(ReduceKernels, EveryReductionOnOneRow) {
  const Tensor x = f64({1, 4}, {1, -2, 3, 4});
  auto run = [&](const char* op) {
    auto y = run_op(op, {value(x)}, attrs({{"axes", std::vector<int64_t>{1}}}));
    EXPECT_TRUE(y.ok()) << op << ": " << y.status().to_string();
    return y.ok() ? values_of<double>((*y)[0])[0] : 0.0;
  };
  EXPECT_DOUBLE_EQ(run("ReduceMean"), 1.5);
  EXPECT_DOUBLE_EQ(run("ReduceMax"), 4);
  EXPECT_DOUBLE_EQ(run("ReduceMin"), -2);
  EXPECT_DOUBLE_EQ(run("ReduceProd"), -24);
  EXPECT_DOUBLE_EQ(run("ReduceL1"), 10);
  EXPECT_DOUBLE_EQ(run("ReduceL2"), std::sqrt(30.0));
  EXPECT_DOUBLE_EQ(run("ReduceSumSquare"), 30);
  EXPECT_DOUBLE_EQ(run("ReduceLogSum"), std::log(6.0));
  EXPECT_DOUBLE_EQ(run("ReduceLogSumExp"),
                   std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(3.0) + std::exp(4.0)));
}

TEST(ReduceKernels, LogSumExpIsStableForLargeValues) {
  auto y = run_op("ReduceLogSumExp", {value(f32({2}, {1000, 1000}))});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_FLOAT_EQ(values_of<float>((*y)[0])[0], 1000.0f + std::log(2.0f));
}

TEST(ReduceKernels, MaxAndMinPropagateNaN) {
  const Tensor x = f32({3}, {1, NAN, 5});
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    auto y = run_op(op, {value(x)});
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    EXPECT_TRUE(std::isnan(values_of<float>((*y)[0])[0])) << op;
  }
}

TEST(ReduceKernels, EmptyReductionGivesIdentity) {
  const Tensor x = f32({2, 0}, {});
  auto run = [&](const char* op) {
    auto y = run_op(op, {value(x)}, attrs({{"axes", std::vector<int64_t>{1}}}));
    EXPECT_TRUE(y.ok()) << op << ": " << y.status().to_string();
    if (!y.ok()) return 0.0f;
    EXPECT_EQ((*y)[0].shape(), (ConcreteShape{2, 1})) << op;
    return values_of<float>((*y)[0])[1];
  };
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(run("ReduceMax"), -inf);
  EXPECT_EQ(run("ReduceMin"), inf);
  EXPECT_EQ(run("ReduceProd"), 1.0f);
  EXPECT_EQ(run("ReduceL2"), 0.0f);
  EXPECT_EQ(run("ReduceLogSum"), -inf);
  EXPECT_EQ(run("ReduceLogSumExp"), -inf);
  EXPECT_TRUE(std::isnan(run("ReduceMean")));
  auto sum = run_op("ReduceSum", {value(x), constant(i64({1}, {1}))});
  ASSERT_TRUE(sum.ok()) << sum.status().to_string();
  EXPECT_EQ(values_of<float>((*sum)[0]), (std::vector<float>{0, 0}));
}

TEST(ReduceKernels, IntegersWrapAndTruncate) {
  const int32_t big = std::numeric_limits<int32_t>::max();
  auto sum = run_op("ReduceSum", {value(i32({2}, {big, 1}))});
  ASSERT_TRUE(sum.ok()) << sum.status().to_string();
  EXPECT_EQ(values_of<int32_t>((*sum)[0])[0], std::numeric_limits<int32_t>::min());

  auto mean = run_op("ReduceMean", {value(i64({2}, {-1, -2}))});
  ASSERT_TRUE(mean.ok()) << mean.status().to_string();
  EXPECT_EQ(values_of<int64_t>((*mean)[0])[0], -1);  // -1.5 toward zero

  auto prod = run_op("ReduceProd", {value(make_tensor<uint8_t>(DType::kU8, {2}, {16, 17}))});
  ASSERT_TRUE(prod.ok()) << prod.status().to_string();
  EXPECT_EQ(values_of<uint8_t>((*prod)[0])[0], 16);  // 272 mod 256

  auto max = run_op("ReduceMax", {value(make_tensor<int8_t>(DType::kI8, {3}, {-5, 7, -128}))});
  ASSERT_TRUE(max.ok()) << max.status().to_string();
  EXPECT_EQ(values_of<int8_t>((*max)[0])[0], 7);
}

TEST(ReduceKernels, HalfInputsRoundOnce) {
  Tensor x = Tensor::create(DType::kF16, {3}).value();
  auto bits = x.mutable_values<uint16_t>();
  bits[0] = float_to_half_bits(0.5f);
  bits[1] = float_to_half_bits(0.25f);
  bits[2] = float_to_half_bits(2.0f);
  auto y = run_op("ReduceSum", {value(x)});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].dtype(), DType::kF16);
  EXPECT_EQ(half_bits_to_float(values_of<uint16_t>((*y)[0])[0]), 2.75f);
}

TEST(ReduceKernels, SymbolicShapes) {
  auto keep = infer_op("ReduceMean", {type(DType::kF32, {sym("N"), 3, sym("W")})},
                       attrs({{"axes", std::vector<int64_t>{-1}}}));
  ASSERT_TRUE(keep.ok()) << keep.status().to_string();
  EXPECT_EQ((*keep)[0].shape, (Shape{sym("N"), 3, 1}));
  auto drop = infer_op("ReduceMax", {type(DType::kF32, {sym("N"), 3, sym("W")})},
                       attrs({{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t{0}}}));
  ASSERT_TRUE(drop.ok()) << drop.status().to_string();
  EXPECT_EQ((*drop)[0].shape, (Shape{3}));
  // Axes from a shape computation work when the values are constants.
  const std::vector<DimExpr> axes = {DimExpr(1)};
  auto sum = infer_op("ReduceSum", {type(DType::kF32, {sym("N"), 3}), type(DType::kI64, {1})},
                      attrs({{"keepdims", int64_t{0}}}), 1, {}, {nullptr, &axes});
  ASSERT_TRUE(sum.ok()) << sum.status().to_string();
  EXPECT_EQ((*sum)[0].shape, (Shape{sym("N")}));
}

TEST(ReduceKernels, RejectsBadInput) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out_of_range = run_op("ReduceMean", {value(x)}, attrs({{"axes", std::vector<int64_t>{2}}}));
  EXPECT_TRUE(contains(error_of(out_of_range), "attribute 'axes' element 0 = 2 is out of range"))
      << error_of(out_of_range);
  auto twice = run_op("ReduceSum", {value(x), constant(i64({2}, {1, -1}))});
  EXPECT_TRUE(contains(error_of(twice), "twice")) << error_of(twice);
  auto keepdims = run_op("ReduceMin", {value(x)}, attrs({{"keepdims", int64_t{2}}}));
  EXPECT_TRUE(contains(error_of(keepdims), "'keepdims' must be 0 or 1")) << error_of(keepdims);
  auto both = run_op("ReduceMax", {value(x), constant(i64({1}, {0}))},
                     attrs({{"axes", std::vector<int64_t>{0}}}));
  EXPECT_TRUE(contains(error_of(both), "both")) << error_of(both);
  auto runtime_axes = run_op("ReduceSum", {value(x), value(i64({1}, {0}))});
  ASSERT_FALSE(runtime_axes.ok());
  EXPECT_EQ(runtime_axes.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(error_of(runtime_axes), "known at compile time"));
  auto boolean = run_op("ReduceSum", {value(make_tensor<uint8_t>(DType::kBool, {1}, {1}))});
  EXPECT_TRUE(contains(error_of(boolean), "dtype")) << error_of(boolean);
  auto unknown = run_op("ReduceSum", {value(x)}, attrs({{"axes", std::vector<int64_t>{0}}}));
  EXPECT_TRUE(contains(error_of(unknown), "attribute 'axes' is not supported"))
      << error_of(unknown);
  const std::vector<DimExpr> symbolic_axes = {sym("A")};
  auto symbolic = infer_op("ReduceSum", {type(DType::kF32, {2, 3}), type(DType::kI64, {1})}, {}, 1,
                           {}, {nullptr, &symbolic_axes});
  EXPECT_TRUE(contains(error_of(symbolic), "symbolic")) << error_of(symbolic);
}

TEST(ReduceKernels, MakeRecoversAxesFromShapesWhenNotConstant) {
  const OpDef* k = find_op_def("ReduceSum");
  ASSERT_NE(k, nullptr);
  Attributes a = attrs({{"keepdims", int64_t{0}}});
  // [2,3] -> [3]: only axis 0 can have been reduced.
  MakeArgs unique{a,
                  {type(DType::kF32, {2, 3}), type(DType::kI64, {1})},
                  {nullptr, nullptr},
                  {type(DType::kF32, {3})}};
  auto kernel = k->make(unique);
  ASSERT_TRUE(kernel.ok()) << kernel.status().to_string();
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = Tensor::create(DType::kF32, {3}).value();
  const int64_t axes_data = 0;
  const ConcreteShape axes_dims = {1};
  ConstBuffer in[2] = {{x.dtype(), x.shape(), x.data()},
                       {DType::kI64, axes_dims, reinterpret_cast<const std::byte*>(&axes_data)}};
  MutableBuffer out{y.dtype(), y.shape(), y.mutable_data()};
  ASSERT_TRUE((*kernel)->run(in, {&out, 1}).ok());
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{5, 7, 9}));
  // [2,2] -> [2]: axis 0 or 1; make must refuse to guess.
  MakeArgs ambiguous{a,
                     {type(DType::kF32, {2, 2}), type(DType::kI64, {1})},
                     {nullptr, nullptr},
                     {type(DType::kF32, {2})}};
  auto refused = k->make(ambiguous);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented);
}

TEST(ReduceKernels, ResultsDoNotDependOnThreadsOrBatch) {
  // Large enough to take the parallel path; values with rounding-sensitive sums.
  const int64_t rows = 64, cols = 4096;
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f / static_cast<float>(1 + (i * 7919) % 1013);
  const Tensor big = f32({rows, cols}, x);
  auto run_with = [&](int threads, const Tensor& t, const char* op, int64_t axis) {
    omp_set_num_threads(threads);
    auto y = run_op(op, {value(t)}, attrs({{"axes", std::vector<int64_t>{axis}}}));
    EXPECT_TRUE(y.ok()) << y.status().to_string();
    return y.ok() ? values_of<float>((*y)[0]) : std::vector<float>{};
  };
  const int saved = omp_get_max_threads();
  for (const char* op : {"ReduceMean", "ReduceLogSumExp", "ReduceL2"}) {
    for (int64_t axis : {0, 1}) {
      EXPECT_EQ(run_with(1, big, op, axis), run_with(4, big, op, axis)) << op << " axis " << axis;
    }
    // Row 5 alone gives row 5 of the batch, bit for bit.
    const Tensor row =
        f32({1, cols}, std::vector<float>(x.begin() + 5 * cols, x.begin() + 6 * cols));
    EXPECT_EQ(run_with(4, row, op, 1)[0], run_with(4, big, op, 1)[5]) << op;
  }
  omp_set_num_threads(saved);
}

TEST(ArgKernels, FirstOrLastExtreme) {
  const Tensor x = f32({2, 3}, {2, 7, 7, 3, 1, 1});
  auto max = run_op("ArgMax", {value(x)}, attrs({{"axis", int64_t{1}}}));
  ASSERT_TRUE(max.ok()) << max.status().to_string();
  EXPECT_EQ((*max)[0].dtype(), DType::kI64);
  EXPECT_EQ((*max)[0].shape(), (ConcreteShape{2, 1}));
  EXPECT_EQ(values_of<int64_t>((*max)[0]), (std::vector<int64_t>{1, 0}));
  auto last = run_op("ArgMax", {value(x)},
                     attrs({{"axis", int64_t{-1}}, {"select_last_index", int64_t{1}}}));
  ASSERT_TRUE(last.ok()) << last.status().to_string();
  EXPECT_EQ(values_of<int64_t>((*last)[0]), (std::vector<int64_t>{2, 0}));
  auto min = run_op(
      "ArgMin", {value(x)},
      attrs({{"axis", int64_t{1}}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}}));
  ASSERT_TRUE(min.ok()) << min.status().to_string();
  EXPECT_EQ((*min)[0].shape(), (ConcreteShape{2}));
  EXPECT_EQ(values_of<int64_t>((*min)[0]), (std::vector<int64_t>{0, 2}));
  // Axis 0 (the default): per column.
  auto col = run_op("ArgMin", {value(x)});
  ASSERT_TRUE(col.ok()) << col.status().to_string();
  EXPECT_EQ(values_of<int64_t>((*col)[0]), (std::vector<int64_t>{0, 1, 1}));
}

TEST(ArgKernels, NaNIsTheExtremeAsInNumpy) {
  auto y = run_op("ArgMax", {value(f32({3}, {1, NAN, 5}))});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<int64_t>((*y)[0])[0], 1);
}

TEST(ArgKernels, ShapesAndBadInput) {
  auto sym_shape = infer_op("ArgMax", {type(DType::kI32, {sym("N"), 4})},
                            attrs({{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}));
  ASSERT_TRUE(sym_shape.ok()) << sym_shape.status().to_string();
  EXPECT_EQ((*sym_shape)[0].shape, (Shape{sym("N")}));
  EXPECT_EQ((*sym_shape)[0].dtype, DType::kI64);
  auto empty = infer_op("ArgMin", {type(DType::kF32, {0, 4})});
  EXPECT_TRUE(contains(error_of(empty), "is 0")) << error_of(empty);
  auto axis = infer_op("ArgMin", {type(DType::kF32, {2, 4})}, attrs({{"axis", int64_t{2}}}));
  EXPECT_TRUE(contains(error_of(axis), "attribute 'axis' = 2 is out of range")) << error_of(axis);
  auto scalar = infer_op("ArgMax", {type(DType::kF32, {})});
  EXPECT_FALSE(scalar.ok());
}

}  // namespace
}  // namespace kiln::kernels
