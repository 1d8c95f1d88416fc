// MaxUnpool kernels. Expected values are the ONNX backend test data's
// (onnx/backend/test/case/node/maxunpool.py) or worked out by hand.
#include <gtest/gtest.h>

#include "tests/support/expect.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

Attributes window_2x2() {
  return attrs(
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
}

TEST(MaxUnpoolKernels, OnnxCases) {
  const Tensor indices = i64({1, 1, 2, 2}, {5, 7, 13, 15});
  auto y =
      run_op("MaxUnpool", {value(f32({1, 1, 2, 2}, {1, 2, 3, 4})), value(indices)}, window_2x2());
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {1, 1, 4, 4}, {0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}, 0);
  // With output_shape 5x5, the values keep their 4x4 coordinates.
  auto z = run_op(
      "MaxUnpool",
      {value(f32({1, 1, 2, 2}, {5, 6, 7, 8})), value(indices), constant(i64({4}, {1, 1, 5, 5}))},
      window_2x2());
  ASSERT_TRUE(z.ok()) << z.status().to_string();
  expect_close((*z)[0], {1, 1, 5, 5},
               {0, 0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 0, 0, 7, 0, 8, 0, 0, 0, 0, 0, 0}, 0);
}

TEST(MaxUnpoolKernels, PadsAndOneSpatialDim) {
  // 1-D: in 3, kernel 3, stride 2, pads 1 + 1: (3 - 1) * 2 - 2 + 3 = 5 outputs per channel.
  auto y =
      run_op("MaxUnpool",
             {value(f64({1, 2, 3}, {1, 2, 3, 4, 5, 6})), value(i64({1, 2, 3}, {0, 2, 4, 5, 8, 9}))},
             attrs({{"kernel_shape", std::vector<int64_t>{3}},
                    {"strides", std::vector<int64_t>{2}},
                    {"pads", std::vector<int64_t>{1, 1}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {1, 2, 5}, {1, 0, 2, 0, 3, 4, 0, 0, 5, 6}, 0);
}

TEST(MaxUnpoolKernels, SymbolicShapesAndBadInput) {
  auto t = infer_op("MaxUnpool",
                    {type(DType::kF32, {sym("N"), 3, sym("H"), 4}),
                     type(DType::kI64, {sym("N"), 3, sym("H"), 4})},
                    window_2x2());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)[0].shape, (Shape{sym("N"), 3, sym("H") * DimExpr(2), 8}));

  auto range = run_op("MaxUnpool", {value(f32({1, 1, 1, 1}, {1})), value(i64({1, 1, 1, 1}, {4}))},
                      window_2x2());
  EXPECT_TRUE(contains(error_of(range), "input 1 'I' element 0 = 4 is out of range [0, 3]"))
      << error_of(range);
  auto small = run_op("MaxUnpool",
                      {value(f32({1, 1, 1, 1}, {1})), value(i64({1, 1, 1, 1}, {0})),
                       constant(i64({4}, {1, 1, 1, 2}))},
                      window_2x2());
  EXPECT_TRUE(contains(error_of(small), "input 2 'output_shape' element 2")) << error_of(small);
  auto length = infer_op(
      "MaxUnpool",
      {type(DType::kF32, {1, 1, 2, 2}), type(DType::kI64, {1, 1, 2, 2}), type(DType::kI64, {3})},
      window_2x2(), 1, {nullptr, nullptr, nullptr}, {nullptr, nullptr, nullptr});
  EXPECT_FALSE(length.ok());
  auto kernel =
      infer_op("MaxUnpool", {type(DType::kF32, {1, 1, 2, 2}), type(DType::kI64, {1, 1, 2, 2})});
  EXPECT_TRUE(contains(error_of(kernel), "attribute 'kernel_shape' is required"))
      << error_of(kernel);
  auto dims =
      infer_op("MaxUnpool", {type(DType::kF32, {1, 1, 2, 2}), type(DType::kI64, {1, 1, 2, 3})},
               window_2x2());
  EXPECT_TRUE(contains(error_of(dims), "input 1 'I' dim 3")) << error_of(dims);
  auto window =
      infer_op("MaxUnpool", {type(DType::kF32, {1, 1, 2, 2}), type(DType::kI64, {1, 1, 2, 2})},
               attrs({{"kernel_shape", std::vector<int64_t>{2}}}));
  EXPECT_TRUE(contains(error_of(window), "for 2 spatial dims")) << error_of(window);
}

}  // namespace
}  // namespace kiln::kernels
