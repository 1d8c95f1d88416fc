// CumSum and TopK kernels. Expected values are worked out by hand from the ONNX spec.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

TEST(CumSumKernels, ExclusiveAndReverse) {
  const Tensor x = f64({5}, {1, 2, 3, 4, 5});
  const Tensor axis = i32({}, {0});
  auto run = [&](int64_t exclusive, int64_t reverse) {
    auto y = run_op("CumSum", {value(x), constant(axis)},
                    attrs({{"exclusive", exclusive}, {"reverse", reverse}}));
    EXPECT_TRUE(y.ok()) << y.status().to_string();
    return y.ok() ? values_of<double>((*y)[0]) : std::vector<double>{};
  };
  EXPECT_EQ(run(0, 0), (std::vector<double>{1, 3, 6, 10, 15}));
  EXPECT_EQ(run(1, 0), (std::vector<double>{0, 1, 3, 6, 10}));
  EXPECT_EQ(run(0, 1), (std::vector<double>{15, 14, 12, 9, 5}));
  EXPECT_EQ(run(1, 1), (std::vector<double>{14, 12, 9, 5, 0}));
}

TEST(CumSumKernels, AxisReadAtRunTime) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto rows = run_op("CumSum", {value(x), value(i64({}, {-1}))});
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  EXPECT_EQ(values_of<float>((*rows)[0]), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  auto cols = run_op("CumSum", {value(x), value(i32({1}, {0}))});
  ASSERT_TRUE(cols.ok()) << cols.status().to_string();
  EXPECT_EQ(values_of<float>((*cols)[0]), (std::vector<float>{1, 2, 3, 5, 7, 9}));
  // An out-of-range axis known only at run time is a Status, not an out-of-bounds access.
  auto bad = run_op("CumSum", {value(x), value(i64({}, {2}))});
  EXPECT_TRUE(contains(error_of(bad), "input 1 'axis' = 2 is out of range")) << error_of(bad);
  // A constant one is rejected at compile time.
  const Tensor minus3 = i64({}, {-3});
  auto early = infer_op("CumSum", {type(DType::kF32, {2, 3}), type(DType::kI64, {})}, {}, 1,
                        {nullptr, &minus3});
  EXPECT_TRUE(contains(error_of(early), "input 1 'axis' = -3")) << error_of(early);
}

TEST(CumSumKernels, IntegersWrap) {
  const int32_t big = std::numeric_limits<int32_t>::max();
  auto y = run_op("CumSum", {value(i32({2}, {big, 1})), constant(i32({}, {0}))});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<int32_t>((*y)[0]),
            (std::vector<int32_t>{big, std::numeric_limits<int32_t>::min()}));
}

TEST(CumSumKernels, RejectsBadInput) {
  auto matrix_axis = infer_op("CumSum", {type(DType::kF32, {2}), type(DType::kI64, {2})});
  EXPECT_TRUE(contains(error_of(matrix_axis), "must be a scalar")) << error_of(matrix_axis);
  auto float_axis = infer_op("CumSum", {type(DType::kF32, {2}), type(DType::kF32, {})});
  EXPECT_TRUE(contains(error_of(float_axis), "input 1 'axis' must have dtype"))
      << error_of(float_axis);
  auto flag = infer_op("CumSum", {type(DType::kF32, {2}), type(DType::kI64, {})},
                       attrs({{"reverse", int64_t{2}}}));
  EXPECT_TRUE(contains(error_of(flag), "'reverse' must be 0 or 1")) << error_of(flag);
  auto shape = infer_op("CumSum", {type(DType::kF16, {sym("N"), 3}), type(DType::kI64, {})});
  ASSERT_TRUE(shape.ok()) << shape.status().to_string();
  EXPECT_EQ((*shape)[0].shape, (Shape{sym("N"), 3}));
}

TEST(TopKKernels, LargestAlongAxis) {
  auto y = run_op("TopK", {value(f32({2, 4}, {0, 1, 2, 3, 7, 4, 6, 5})), constant(i64({1}, {3}))},
                  attrs({{"axis", int64_t{1}}}), 2);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{2, 3}));
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{3, 2, 1, 7, 6, 5}));
  EXPECT_EQ((*y)[1].dtype(), DType::kI64);
  EXPECT_EQ(values_of<int64_t>((*y)[1]), (std::vector<int64_t>{3, 2, 1, 0, 2, 3}));
}

TEST(TopKKernels, TiesGoToTheLowerIndex) {
  const Tensor x = i32({5}, {2, 1, 3, 1, 3});
  auto largest = run_op("TopK", {value(x), constant(i64({1}, {3}))}, {}, 2);
  ASSERT_TRUE(largest.ok()) << largest.status().to_string();
  EXPECT_EQ(values_of<int32_t>((*largest)[0]), (std::vector<int32_t>{3, 3, 2}));
  EXPECT_EQ(values_of<int64_t>((*largest)[1]), (std::vector<int64_t>{2, 4, 0}));
  auto smallest =
      run_op("TopK", {value(x), constant(i64({1}, {2}))}, attrs({{"largest", int64_t{0}}}), 2);
  ASSERT_TRUE(smallest.ok()) << smallest.status().to_string();
  EXPECT_EQ(values_of<int32_t>((*smallest)[0]), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(values_of<int64_t>((*smallest)[1]), (std::vector<int64_t>{1, 3}));
}

TEST(TopKKernels, AxisZeroAndNaN) {
  // Per column of [[1, NaN], [2, 0]]: NaN ranks above every number.
  auto y = run_op("TopK", {value(f32({2, 2}, {1, NAN, 2, 0})), constant(i64({1}, {1}))},
                  attrs({{"axis", int64_t{0}}}), 2);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  auto v = values_of<float>((*y)[0]);
  EXPECT_EQ(v[0], 2);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(values_of<int64_t>((*y)[1]), (std::vector<int64_t>{1, 0}));
}

TEST(TopKKernels, SymbolicShapesAndBadInput) {
  const Tensor k3 = i64({1}, {3});
  auto t = infer_op("TopK", {type(DType::kF32, {sym("N"), 10}), type(DType::kI64, {1})}, {}, 2,
                    {nullptr, &k3});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)[0].shape, (Shape{sym("N"), 3}));
  EXPECT_EQ((*t)[1].dtype, DType::kI64);
  // k from a shape computation may be symbolic: the output dim is that expression.
  const std::vector<DimExpr> k_sym = {sym("K")};
  auto s = infer_op("TopK", {type(DType::kF32, {4, sym("M")}), type(DType::kI64, {1})}, {}, 2, {},
                    {nullptr, &k_sym});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ((*s)[0].shape, (Shape{4, sym("K")}));

  auto too_big = run_op("TopK", {value(f32({3}, {1, 2, 3})), constant(i64({1}, {4}))}, {}, 2);
  EXPECT_TRUE(contains(error_of(too_big), "'K' = 4 exceeds")) << error_of(too_big);
  auto negative = run_op("TopK", {value(f32({3}, {1, 2, 3})), constant(i64({1}, {-1}))}, {}, 2);
  EXPECT_TRUE(contains(error_of(negative), "must be >= 0")) << error_of(negative);
  // A k nobody knows before the run needs a size bound from the data (none here).
  auto runtime_k = run_op("TopK", {value(f32({3}, {1, 2, 3})), value(i64({1}, {1}))}, {}, 2);
  EXPECT_TRUE(contains(error_of(runtime_k), "data-dependent size 0")) << error_of(runtime_k);
  auto axis = run_op("TopK", {value(f32({3}, {1, 2, 3})), constant(i64({1}, {1}))},
                     attrs({{"axis", int64_t{1}}}), 2);
  EXPECT_TRUE(contains(error_of(axis), "attribute 'axis' = 1")) << error_of(axis);
  auto one_output = run_op("TopK", {value(f32({3}, {1, 2, 3})), constant(i64({1}, {1}))}, {}, 1);
  EXPECT_TRUE(contains(error_of(one_output), "outputs")) << error_of(one_output);
}

TEST(ScanKernels, TopKTakesARuntimeKAsADataDependentSize) {
  const OpDef* k = find_op_def("TopK");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->compile_time_inputs, 0u);
  EXPECT_EQ(find_op_def("CumSum")->compile_time_inputs, 0u);
  EXPECT_EQ(find_op_def("ReduceSum")->compile_time_inputs, 1u << 1);

  // Without anyone to bind k, infer says it must be known at compile time.
  auto unknown =
      infer_op("TopK", {type(DType::kF32, {sym("N"), 10}), type(DType::kI64, {1})}, {}, 2);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnimplemented);
  // With data_dim, k is a fresh size on both outputs.
  const Attributes none;
  InferArgs args{none, {}, {}, 2, {}, {}, {}, {}};
  args.inputs = {type(DType::kF32, {sym("N"), 10}), type(DType::kI64, {1})};
  args.constants = {nullptr, nullptr};
  args.data_dim = [](size_t i) -> StatusOr<DimExpr> {
    return DimExpr::symbol(fmt::format("k{}", i));
  };
  ASSERT_TRUE(k->infer(args).ok());
  EXPECT_EQ(args.outputs[0].shape, (Shape{sym("N"), sym("k0")}));
  EXPECT_EQ(args.outputs[1].shape, (Shape{sym("N"), sym("k0")}));

  // data_sizes reads k and checks it against the axis.
  ASSERT_NE(k->data_sizes, nullptr);
  const Tensor x = f32({2, 10}, std::vector<float>(20, 1.f));
  auto sizes = k->data_sizes({}, std::vector<Tensor>{x, i64({1}, {4})});
  ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
  EXPECT_EQ(*sizes, (std::vector<int64_t>{4}));
  auto too_big = k->data_sizes({}, std::vector<Tensor>{x, i64({1}, {11})});
  EXPECT_TRUE(contains(error_of(too_big), "'K' = 11 is out of range [0, 10]")) << error_of(too_big);
  auto negative = k->data_sizes({}, std::vector<Tensor>{x, i64({1}, {-2})});
  EXPECT_FALSE(negative.ok());
  auto two = k->data_sizes({}, std::vector<Tensor>{x, i64({2}, {1, 2})});
  EXPECT_TRUE(contains(error_of(two), "must hold one i64 value, got 2")) << error_of(two);
  // Through compute_data_sizes, infer checks the inputs first (a float k crashed the size
  // computation of a crafted module; found by fuzz_module_load).
  auto float_k = compute_data_sizes(*k, {}, std::vector<Tensor>{x, f32({1}, {2.f})}, 2);
  EXPECT_TRUE(contains(error_of(float_k), "input 1 'K' must have dtype i64")) << error_of(float_k);
  auto relu = compute_data_sizes(*find_op_def("Relu"), {}, std::vector<Tensor>{x}, 1);
  EXPECT_TRUE(contains(error_of(relu), "'Relu' has no data-dependent sizes")) << error_of(relu);
}

}  // namespace
}  // namespace kiln::kernels
