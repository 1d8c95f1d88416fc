// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss kernels. Expected values are worked out by
// hand from the ONNX spec.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

// Scores [N=2, C=3] (already log-probabilities for NLL), targets 2 and 0.
const Tensor kScores = f32({2, 3}, {-1, -2, -3, -0.5f, -1.5f, -2.5f});
const Tensor kTargets = i64({2}, {2, 0});

std::vector<float> nll(const Attributes& a, std::optional<Tensor> weight = std::nullopt) {
  auto y = run_op("NegativeLogLikelihoodLoss",
                  {value(kScores), value(kTargets), weight ? value(*weight) : absent()}, a);
  EXPECT_TRUE(y.ok()) << y.status().to_string();
  return y.ok() ? values_of<float>((*y)[0]) : std::vector<float>{};
}

TEST(LossKernels, NllReductions) {
  EXPECT_EQ(nll(attrs({{"reduction", std::string("none")}})), (std::vector<float>{3, 0.5f}));
  EXPECT_EQ(nll(attrs({{"reduction", std::string("sum")}})), (std::vector<float>{3.5f}));
  EXPECT_EQ(nll({}), (std::vector<float>{1.75f}));  // mean is the default
}

TEST(LossKernels, NllWeightsAndIgnoreIndex) {
  const Tensor w = f32({3}, {1, 2, 4});
  EXPECT_EQ(nll(attrs({{"reduction", std::string("none")}}), w), (std::vector<float>{12, 0.5f}));
  // Weighted mean divides by the weights of the picked classes: (12 + 0.5) / (4 + 1).
  EXPECT_EQ(nll({}, w), (std::vector<float>{2.5f}));
  // An ignored element contributes neither loss nor weight.
  EXPECT_EQ(nll(attrs({{"ignore_index", int64_t{2}}})), (std::vector<float>{0.5f}));
  // Everything ignored: 0 / 0.
  auto all = run_op("NegativeLogLikelihoodLoss", {value(kScores), value(i64({2}, {1, 1}))},
                    attrs({{"ignore_index", int64_t{1}}}));
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_TRUE(std::isnan(values_of<float>((*all)[0])[0]));
}

TEST(LossKernels, NllSpatialDims) {
  // [N=1, C=2, D=2]: element j picks x[0, t_j, j].
  auto y = run_op("NegativeLogLikelihoodLoss",
                  {value(f32({1, 2, 2}, {-1, -2, -3, -4})), value(i64({1, 2}, {1, 0}))},
                  attrs({{"reduction", std::string("none")}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{1, 2}));
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{3, 2}));
}

TEST(LossKernels, SoftmaxCrossEntropyAndLogProb) {
  // softmax([0, ln 3]) = [1/4, 3/4].
  const double ln3 = std::log(3.0);
  auto y = run_op("SoftmaxCrossEntropyLoss",
                  {value(f64({2, 2}, {0, ln3, 0, ln3})), value(i32({2}, {0, 1}))},
                  attrs({{"reduction", std::string("none")}}), 2);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const std::vector<double> loss = values_of<double>((*y)[0]);
  ASSERT_EQ(loss.size(), 2u);
  EXPECT_NEAR(loss[0], std::log(4.0), 1e-15);
  EXPECT_NEAR(loss[1], -std::log(0.75), 1e-15);
  const std::vector<double> log_prob = values_of<double>((*y)[1]);
  ASSERT_EQ(log_prob.size(), 4u);
  EXPECT_NEAR(log_prob[0], -std::log(4.0), 1e-15);
  EXPECT_NEAR(log_prob[3], std::log(0.75), 1e-15);
}

TEST(LossKernels, TargetOutOfRangeIsAnErrorNamingTheElement) {
  auto y = run_op("NegativeLogLikelihoodLoss", {value(kScores), value(i64({2}, {0, 3}))});
  EXPECT_TRUE(contains(error_of(y), "element 1 [1] = 3 is out of range [0, 3)")) << error_of(y);
  auto negative = run_op("SoftmaxCrossEntropyLoss", {value(kScores), value(i64({2}, {-1, 0}))},
                         attrs({{"ignore_index", int64_t{5}}}));
  EXPECT_TRUE(contains(error_of(negative), "is not ignore_index 5")) << error_of(negative);
}

TEST(LossKernels, BadShapesAndAttributesAreRefused) {
  auto rank =
      infer_op("NegativeLogLikelihoodLoss", {type(DType::kF32, {2, 3}), type(DType::kI64, {2, 1})});
  EXPECT_TRUE(contains(error_of(rank), "must have rank 1")) << error_of(rank);
  auto classes =
      infer_op("NegativeLogLikelihoodLoss",
               {type(DType::kF32, {2, 3}), type(DType::kI64, {2}), type(DType::kF32, {4})});
  EXPECT_TRUE(contains(error_of(classes), "classes")) << error_of(classes);
  auto reduction =
      infer_op("SoftmaxCrossEntropyLoss", {type(DType::kF32, {2, 3}), type(DType::kI64, {2})},
               attrs({{"reduction", std::string("max")}}));
  EXPECT_TRUE(contains(error_of(reduction), "'reduction' must be")) << error_of(reduction);
  auto float_target =
      infer_op("SoftmaxCrossEntropyLoss", {type(DType::kF32, {2, 3}), type(DType::kF32, {2})});
  EXPECT_FALSE(float_target.ok());
}

}  // namespace
}  // namespace kiln::kernels
