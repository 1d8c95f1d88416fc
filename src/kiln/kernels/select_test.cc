// Unique kernels. Expected values are the ONNX backend test data's
// (onnx/backend/test/case/node/unique.py, numpy.unique) or worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/expect.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

using Ints = std::vector<int64_t>;

// Runs Unique on a constant input (its count is then known to infer); four outputs.
std::vector<Tensor> unique(const Tensor& x, const Attributes& a = {}) {
  auto y = run_op("Unique", {constant(x)}, a, 4);
  EXPECT_TRUE(y.ok()) << y.status().to_string();
  return y.ok() ? *y : std::vector<Tensor>(4);
}

TEST(UniqueKernels, WithoutAxis) {
  const Tensor x = f32({6}, {2, 1, 1, 3, 4, 3});
  auto s = unique(x);
  expect_close(s[0], {4}, {1, 2, 3, 4}, 0);
  EXPECT_EQ(values_of<int64_t>(s[1]), (Ints{1, 0, 3, 4}));
  EXPECT_EQ(values_of<int64_t>(s[2]), (Ints{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(values_of<int64_t>(s[3]), (Ints{2, 1, 2, 1}));
  auto u = unique(x, attrs({{"sorted", int64_t{0}}}));
  expect_close(u[0], {4}, {2, 1, 3, 4}, 0);
  EXPECT_EQ(values_of<int64_t>(u[1]), (Ints{0, 1, 3, 4}));
  EXPECT_EQ(values_of<int64_t>(u[2]), (Ints{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(values_of<int64_t>(u[3]), (Ints{1, 2, 2, 1}));
  // A 2-D input without axis is flattened.
  auto m = unique(i32({2, 2}, {7, -1, 7, 0}));
  EXPECT_EQ(values_of<int32_t>(m[0]), (std::vector<int32_t>{-1, 0, 7}));
  EXPECT_EQ(values_of<int64_t>(m[2]), (Ints{2, 0, 2, 1}));
}

TEST(UniqueKernels, WithAxis) {
  auto rows = unique(f32({3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4}), attrs({{"axis", int64_t{0}}}));
  expect_close(rows[0], {2, 3}, {1, 0, 0, 2, 3, 4}, 0);
  EXPECT_EQ(values_of<int64_t>(rows[1]), (Ints{0, 2}));
  EXPECT_EQ(values_of<int64_t>(rows[2]), (Ints{0, 0, 1}));
  EXPECT_EQ(values_of<int64_t>(rows[3]), (Ints{2, 1}));
  // sorted_with_axis_3d.
  auto mid = unique(f32({2, 4, 2}, {1, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0, 1, 2, 1, 0, 1}),
                    attrs({{"axis", int64_t{1}}}));
  expect_close(mid[0], {2, 3, 2}, {0, 1, 1, 1, 2, 1, 0, 1, 1, 1, 2, 1}, 0);
  EXPECT_EQ(values_of<int64_t>(mid[1]), (Ints{1, 0, 2}));
  EXPECT_EQ(values_of<int64_t>(mid[2]), (Ints{1, 0, 2, 0}));
  EXPECT_EQ(values_of<int64_t>(mid[3]), (Ints{2, 1, 1}));
  // sorted_with_negative_axis.
  auto cols = unique(f32({3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 3}), attrs({{"axis", int64_t{-1}}}));
  expect_close(cols[0], {3, 2}, {0, 1, 0, 1, 3, 2}, 0);
  EXPECT_EQ(values_of<int64_t>(cols[1]), (Ints{1, 0}));
  EXPECT_EQ(values_of<int64_t>(cols[2]), (Ints{1, 0, 0}));
  EXPECT_EQ(values_of<int64_t>(cols[3]), (Ints{2, 1}));
}

TEST(UniqueKernels, NaNAndSignedZero) {
  // NaNs are one value sorted last; -0.0 equals 0.0 (the first occurrence is kept).
  auto s = unique(f64({5}, {NAN, -0.0, 1, 0.0, NAN}));
  const std::vector<double> y = values_of<double>(s[0]);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[0], 0.0);
  EXPECT_TRUE(std::signbit(y[0]));
  EXPECT_EQ(y[1], 1.0);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(values_of<int64_t>(s[1]), (Ints{1, 2, 0}));
  EXPECT_EQ(values_of<int64_t>(s[2]), (Ints{2, 0, 1, 0, 2}));
  EXPECT_EQ(values_of<int64_t>(s[3]), (Ints{2, 1, 2}));
}

TEST(UniqueKernels, CountIsADataDependentSize) {
  const OpDef* op = find_op_def("Unique");
  ASSERT_NE(op, nullptr);
  ASSERT_NE(op->data_sizes, nullptr);
  const Attributes axis1 = attrs({{"axis", int64_t{1}}});
  InferArgs args{axis1, {}, {}, 4, {}, {}, {}, {}};
  args.inputs = {type(DType::kI64, {sym("B"), sym("T"), 3})};
  args.constants = {nullptr};
  args.data_dim = [](size_t i) -> StatusOr<DimExpr> {
    return DimExpr::symbol(fmt::format("u{}", i));
  };
  ASSERT_TRUE(op->infer(args).ok());
  ASSERT_EQ(args.outputs.size(), 4u);
  EXPECT_EQ(args.outputs[0].shape, (Shape{sym("B"), sym("u0"), 3}));
  EXPECT_EQ(args.outputs[1].shape, (Shape{sym("u0")}));
  EXPECT_EQ(args.outputs[2].shape, (Shape{sym("T")}));
  EXPECT_EQ(args.outputs[3].dtype, DType::kI64);
  // Without axis the inverse indices cover every element.
  auto flat = infer_op("Unique", {type(DType::kF32, {4, 5})}, {}, 3, {});
  EXPECT_FALSE(flat.ok());  // nobody binds the count here
  EXPECT_TRUE(contains(error_of(flat), "depends on the data of input 0 'X'")) << error_of(flat);
  auto sizes = op->data_sizes({}, std::vector<Tensor>{f32({6}, {2, 1, 1, 3, 4, 3})});
  ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
  EXPECT_EQ(*sizes, (Ints{4}));
  // One output only.
  auto one = run_op("Unique", {constant(i64({3}, {5, 5, 4}))}, {}, 1);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(values_of<int64_t>((*one)[0]), (Ints{4, 5}));
}

TEST(UniqueKernels, RejectsBadInput) {
  auto axis = infer_op("Unique", {type(DType::kF32, {2, 3})}, attrs({{"axis", int64_t{2}}}), 4);
  EXPECT_TRUE(contains(error_of(axis), "attribute 'axis'")) << error_of(axis);
  auto sorted = infer_op("Unique", {type(DType::kF32, {2, 3})}, attrs({{"sorted", int64_t{3}}}));
  EXPECT_TRUE(contains(error_of(sorted), "'sorted' must be 0 or 1")) << error_of(sorted);
  auto outputs = infer_op("Unique", {type(DType::kF32, {2, 3})}, {}, 5);
  EXPECT_TRUE(contains(error_of(outputs), "outputs")) << error_of(outputs);
}

}  // namespace
}  // namespace kiln::kernels
