// The ai.onnx.preview.training optimizers. Expected values come from ONNX's own reference
// formulas (apply_adagrad, apply_adam, apply_momentum, apply_nesterov in
// onnx/backend/test/case/node/{adagrad,adam,momentum}.py) run in numpy float64.
#include <gtest/gtest.h>

#include "tests/support/expect.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

Tensor rate() { return f64({}, {0.1}); }
Tensor step(int64_t t) { return i64({}, {t}); }
Tensor x3() { return f64({3}, {1.0, -2.0, 0.5}); }
Tensor g3() { return f64({3}, {-1.0, 0.25, 3.0}); }
Tensor h3() { return f64({3}, {2.0, 0.0, 1.0}); }
Tensor v3() { return f64({3}, {0.5, -0.5, 0.0}); }

TEST(TrainingKernels, Adagrad) {
  const Attributes a =
      attrs({{"norm_coefficient", 0.001}, {"epsilon", 1e-5}, {"decay_factor", 0.1}});
  auto y = run_op("Adagrad", {value(rate()), value(step(3)), value(x3()), value(g3()), value(h3())},
                  a, 2);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {3}, {1.0443816803320156, -2.0769199753111693, 0.42702337643912436}, 1e-12);
  expect_close((*y)[1], {3}, {2.998001, 0.061504, 10.00300025}, 1e-12);

  // Two tensors (X1, X2, G1, G2, H1, H2 -> X1', X2', H1', H2'): the same numbers split [1] + [2],
  // in f32 with an f32 rate.
  auto two =
      run_op("Adagrad",
             {value(f32({}, {0.1})), value(step(3)), value(f32({1}, {1.0})),
              value(f32({2}, {-2.0, 0.5})), value(f32({1}, {-1.0})), value(f32({2}, {0.25, 3.0})),
              value(f32({1}, {2.0})), value(f32({2}, {0.0, 1.0}))},
             a, 4);
  ASSERT_TRUE(two.ok()) << two.status().to_string();
  expect_close((*two)[0], {1}, {1.0443816803320156}, 1e-6);
  expect_close((*two)[1], {2}, {-2.0769199753111693, 0.42702337643912436}, 1e-6);
  expect_close((*two)[2], {1}, {2.998001}, 1e-6);
  expect_close((*two)[3], {2}, {0.061504, 10.00300025}, 1e-6);
}

TEST(TrainingKernels, Adam) {
  const Attributes a = attrs({{"norm_coefficient", 0.001},
                              {"norm_coefficient_post", 0.02},
                              {"alpha", 0.95},
                              {"beta", 0.85},
                              {"epsilon", 1e-5}});
  for (int64_t t : {3, 0}) {
    auto y = run_op(
        "Adam", {value(rate()), value(step(t)), value(x3()), value(g3()), value(v3()), value(h3())},
        a, 3);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    if (t == 3) {
      expect_close((*y)[0], {3}, {0.8466048926435678, 0.09549698682771318, 0.44683232172989984},
                   1e-12);
    } else {
      // T = 0: the rate is not bias-corrected.
      expect_close((*y)[0], {3}, {0.9493724514426871, -1.4880574001469138, 0.4800886907434225},
                   1e-12);
    }
    expect_close((*y)[1], {3}, {0.42505, -0.4626, 0.150025}, 1e-12);
    expect_close((*y)[2], {3}, {1.84970015, 0.0092256, 2.2004500375}, 1e-12);
  }
}

TEST(TrainingKernels, MomentumStandardAndNesterov) {
  const Attributes standard = attrs({{"norm_coefficient", 0.001},
                                     {"alpha", 0.95},
                                     {"beta", 0.1},
                                     {"mode", std::string("standard")}});
  auto y =
      run_op("Momentum", {value(rate()), value(step(3)), value(x3()), value(g3()), value(v3())},
             standard, 2);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {3}, {0.96249, -1.95498, 0.469995}, 1e-12);
  expect_close((*y)[1], {3}, {0.3751, -0.4502, 0.30005}, 1e-12);
  // T = 0: the gradient enters with weight 1, not beta.
  auto first =
      run_op("Momentum", {value(rate()), value(step(0)), value(x3()), value(g3()), value(v3())},
             standard, 2);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  expect_close((*first)[0], {3}, {1.0524, -1.9773, 0.19995}, 1e-12);
  expect_close((*first)[1], {3}, {-0.524, -0.227, 3.0005}, 1e-12);

  const Attributes nesterov = attrs({{"norm_coefficient", 0.01},
                                     {"alpha", 0.95},
                                     {"beta", 1.0},
                                     {"mode", std::string("nesterov")}});
  auto n =
      run_op("Momentum", {value(rate()), value(step(3)), value(x3()), value(g3()), value(v3())},
             nesterov, 2);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  expect_close((*n)[0], {3}, {1.147925, -1.999725, -0.085975}, 1e-12);
  expect_close((*n)[1], {3}, {-0.515, -0.245, 3.005}, 1e-12);
}

TEST(TrainingKernels, SymbolicShapesAndBadInput) {
  const ValueType r = type(DType::kF32, {});
  const ValueType t = type(DType::kI64, {});
  const ValueType x = type(DType::kF32, {sym("N"), 4});
  const ValueType y = type(DType::kF64, {3});
  auto shapes = infer_op("Adagrad", {r, t, x, y, x, y, x, y}, {}, 4);
  ASSERT_TRUE(shapes.ok()) << shapes.status().to_string();
  ASSERT_EQ(shapes->size(), 4u);
  EXPECT_EQ((*shapes)[0].shape, (Shape{sym("N"), 4}));
  EXPECT_EQ((*shapes)[1].dtype, DType::kF64);
  EXPECT_EQ((*shapes)[2].shape, (Shape{sym("N"), 4}));
  EXPECT_EQ((*shapes)[3].shape, (Shape{3}));

  auto arity = infer_op("Adam", {r, t, x, x, x}, {}, 3);
  EXPECT_TRUE(contains(error_of(arity),
                       "5 inputs: expected R, T and then n >= 1 of each of X, G, "
                       "V, H"))
      << error_of(arity);
  auto outputs = infer_op("Adagrad", {r, t, x, x, x}, {}, 1);
  EXPECT_TRUE(contains(error_of(outputs), "1 outputs: 1 tensors to optimize need 2 (X_new, H_new)"))
      << error_of(outputs);
  auto shape = infer_op("Adagrad", {r, t, x, type(DType::kF32, {sym("N"), 5}), x}, {}, 2);
  EXPECT_TRUE(contains(error_of(shape), "input 3 'G1' dim 1 (the shape of input 2 'X1')"))
      << error_of(shape);
  auto dtype = infer_op("Adagrad", {r, t, x, type(DType::kF64, {sym("N"), 4}), x}, {}, 2);
  EXPECT_TRUE(contains(error_of(dtype), "input 3 'G1' must have dtype f32 like input 2 'X1'"))
      << error_of(dtype);
  auto step_type = infer_op("Adagrad", {r, type(DType::kI32, {}), x, x, x}, {}, 2);
  EXPECT_TRUE(contains(error_of(step_type), "input 1 'T'")) << error_of(step_type);
  auto rate_shape = infer_op("Adagrad", {type(DType::kF32, {2}), t, x, x, x}, {}, 2);
  EXPECT_TRUE(contains(error_of(rate_shape), "input 0 'R' must be a scalar"))
      << error_of(rate_shape);
  auto mode = infer_op("Momentum", {r, t, x, x, x},
                       attrs({{"norm_coefficient", 0.0},
                              {"alpha", 0.9},
                              {"beta", 0.1},
                              {"mode", std::string("heavy")}}),
                       2);
  EXPECT_TRUE(contains(error_of(mode), "attribute 'mode' must be \"standard\" or \"nesterov\""))
      << error_of(mode);
  auto required = infer_op("Momentum", {r, t, x, x, x}, attrs({{"alpha", 0.9}}), 2);
  EXPECT_TRUE(contains(error_of(required), "attribute 'beta' is required")) << error_of(required);
  auto unknown = infer_op("Adam", {r, t, x, x, x, x}, attrs({{"decay_factor", 0.1}}), 3);
  EXPECT_TRUE(contains(error_of(unknown), "attribute 'decay_factor' is not supported"))
      << error_of(unknown);
}

}  // namespace
}  // namespace kiln::kernels
