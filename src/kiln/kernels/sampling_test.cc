// GridSample kernels. Expected values are the ONNX backend test data's
// (onnx/backend/test/case/node/gridsample.py) or worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/expect.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

StatusOr<Tensor> grid_sample(const Tensor& x, const Tensor& grid, const Attributes& a) {
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> y, run_op("GridSample", {value(x), value(grid)}, a));
  return y[0];
}

// The ONNX cases' 1x1x3x2 input.
const Tensor& small_map() {
  static const Tensor x = f32({1, 1, 3, 2}, {0, 1, 2, 3, 4, 5});
  return x;
}

TEST(GridSampleKernels, PaddingModes) {
  const Tensor grid = f32({1, 2, 4, 2}, {-10, -10, -5, -5, -0.2, -0.2, 10, 10,  //
                                         10, 10, -0.2, -0.2, 5, 5, 10, 10});
  auto run = [&](const char* padding) {
    auto y = grid_sample(small_map(), grid, attrs({{"padding_mode", std::string(padding)}}));
    EXPECT_TRUE(y.ok()) << y.status().to_string();
    return y.ok() ? *y : Tensor();
  };
  expect_close(run("zeros"), {1, 1, 2, 4}, {0, 0, 1.7, 0, 0, 1.7, 0, 0}, 1e-5);
  expect_close(run("border"), {1, 1, 2, 4}, {0, 0, 1.7, 5, 5, 1.7, 5, 5}, 1e-5);
  expect_close(run("reflection"), {1, 1, 2, 4}, {2.5, 0, 1.7, 2.5, 2.5, 1.7, 5, 2.5}, 1e-5);
}

TEST(GridSampleKernels, ModesAndAlignCorners) {
  const Tensor grid = f32({1, 2, 4, 2}, {-1, -1, -0.5, -0.5, -0.2, -0.2, 0, 0,  //
                                         0, 0, -0.2, -0.2, 0.5, 0.5, 1, 1});
  auto run = [&](const Attributes& a) {
    auto y = grid_sample(small_map(), grid, a);
    EXPECT_TRUE(y.ok()) << y.status().to_string();
    return y.ok() ? *y : Tensor();
  };
  expect_close(run(attrs({{"mode", std::string("bilinear")}})), {1, 1, 2, 4},
               {0, 0.5, 1.7, 2.5, 2.5, 1.7, 4.5, 1.25}, 1e-5);
  expect_close(run(attrs({{"align_corners", int64_t{1}}})), {1, 1, 2, 4},
               {0, 1.25, 2, 2.5, 2.5, 2, 3.75, 5}, 1e-5);
  // Nearest rounds half to even: x = 0.5 reads column 0, x = 1.5 column 2 (outside: 0).
  expect_close(run(attrs({{"mode", std::string("nearest")}})), {1, 1, 2, 4},
               {0, 0, 2, 2, 2, 2, 5, 0}, 0);
  expect_close(run(attrs({{"mode", std::string("bicubic")}})), {1, 1, 2, 4},
               {-0.1406, 0.3828, 1.7556, 2.9688, 2.9688, 1.7556, 5.1445, 1.3906}, 1e-4);
}

// Bicubic taps outside the map read the padding one by one, also when the location lies beyond
// the border (x = 1.6 > W - 0.5 here): expected values from ONNX Runtime 1.30.
TEST(GridSampleKernels, BicubicPadsEachTap) {
  const Tensor grid = f32({1, 1, 3, 2}, {1.1, 0.5, -1.2, -1.1, 0.3, 1.2});
  auto run = [&](const char* padding) {
    auto y = grid_sample(
        small_map(), grid,
        attrs({{"mode", std::string("bicubic")}, {"padding_mode", std::string(padding)}}));
    EXPECT_TRUE(y.ok()) << y.status().to_string();
    return y.ok() ? *y : Tensor();
  };
  expect_close(run("border"), {1, 1, 1, 3}, {4.6891866, -0.16668777, 4.8720026}, 1e-5);
  expect_close(run("reflection"), {1, 1, 1, 3}, {4.7971864, -0.49874938, 5.0640025}, 1e-5);
}

// The location is computed in the grid's precision: in f32, x = ((g + 1) * 11 - 1) / 2 for
// g = 2/11 - 1 rounds to exactly 0.5, and nearest picks column 0 (half to even), as ONNX Runtime.
TEST(GridSampleKernels, NearestTieInTheGridsPrecision) {
  std::vector<double> ramp(11);
  for (int i = 0; i < 11; ++i) ramp[i] = i;
  const auto g = static_cast<float>(2.0 / 11 - 1);
  auto y = grid_sample(f32({1, 1, 1, 11}, ramp), f32({1, 1, 1, 2}, std::vector<float>{g, 0.f}),
                       attrs({{"mode", std::string("nearest")}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<float>(*y), (std::vector<float>{0}));
}

TEST(GridSampleKernels, BilinearOnnxCaseAndNaN) {
  // test_gridsample's first row: a 4x4 ramp sampled at x = -1, -0.6, ..., 1 on y = -1.
  std::vector<double> ramp(16);
  for (int i = 0; i < 16; ++i) ramp[i] = i;
  const Tensor x = f64({1, 1, 4, 4}, ramp);
  const Tensor grid = f64({1, 1, 6, 2}, {-1, -1, -0.6, -1, -0.2, -1, 0.2, -1, 0.6, -1, 1, -1});
  auto y = grid_sample(x, grid, {});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close(*y, {1, 1, 1, 6}, {0, 0.15, 0.55, 0.95, 1.35, 0.75}, 1e-12);
  // A NaN coordinate gives NaN; an infinite one reads zeros.
  auto nan = grid_sample(x, f64({1, 1, 2, 2}, {NAN, 0, INFINITY, 0}), {});
  ASSERT_TRUE(nan.ok()) << nan.status().to_string();
  EXPECT_TRUE(std::isnan(values_of<double>(*nan)[0]));
  EXPECT_EQ(values_of<double>(*nan)[1], 0.0);
}

TEST(GridSampleKernels, SymbolicShapesAndBadInput) {
  auto t = infer_op("GridSample", {type(DType::kF32, {sym("N"), 3, sym("H"), sym("W")}),
                                   type(DType::kF32, {sym("N"), sym("P"), 5, 2})});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)[0].shape, (Shape{sym("N"), 3, sym("P"), 5}));

  auto pair =
      infer_op("GridSample", {type(DType::kF32, {1, 1, 3, 2}), type(DType::kF32, {1, 2, 4, 3})});
  EXPECT_TRUE(contains(error_of(pair), "input 1 'grid' dim 3")) << error_of(pair);
  auto batch =
      infer_op("GridSample", {type(DType::kF32, {2, 1, 3, 2}), type(DType::kF32, {3, 2, 4, 2})});
  EXPECT_TRUE(contains(error_of(batch), "input 1 'grid' dim 0")) << error_of(batch);
  auto rank =
      infer_op("GridSample", {type(DType::kF32, {1, 1, 2, 3, 2}), type(DType::kF32, {1, 2, 4, 2})});
  EXPECT_TRUE(contains(error_of(rank), "input 0 'X' must have rank 4")) << error_of(rank);
  auto mode =
      infer_op("GridSample", {type(DType::kF32, {1, 1, 3, 2}), type(DType::kF32, {1, 2, 4, 2})},
               attrs({{"mode", std::string("area")}}));
  EXPECT_TRUE(contains(error_of(mode), "attribute 'mode' must be")) << error_of(mode);
  auto padding =
      infer_op("GridSample", {type(DType::kF32, {1, 1, 3, 2}), type(DType::kF32, {1, 2, 4, 2})},
               attrs({{"padding_mode", std::string("wrap")}}));
  EXPECT_TRUE(contains(error_of(padding), "attribute 'padding_mode' must be")) << error_of(padding);
  auto ints =
      infer_op("GridSample", {type(DType::kI32, {1, 1, 3, 2}), type(DType::kF32, {1, 2, 4, 2})});
  EXPECT_TRUE(contains(error_of(ints), "input 0 'X' must have dtype")) << error_of(ints);
}

}  // namespace
}  // namespace kiln::kernels
