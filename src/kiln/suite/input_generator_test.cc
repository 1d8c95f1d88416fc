#include "kiln/suite/input_generator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

namespace kiln::suite {
namespace {

TEST(InputGenerator, UniformFloatsStayInRangeAndAreReproducible) {
  Generator g{Generator::Distribution::kUniform, 42, -2, 3};
  auto a = generate_tensor(g, "data", DType::kF32, {4, 1000});
  auto b = generate_tensor(g, "data", DType::kF32, {4, 1000});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(std::memcmp(a->data(), b->data(), a->byte_size()), 0);
  double sum = 0;
  for (float v : a->values<float>()) {
    ASSERT_GE(v, -2.0f);
    ASSERT_LT(v, 3.0f);
    sum += v;
  }
  EXPECT_NEAR(sum / 4000, 0.5, 0.1);
}

TEST(InputGenerator, FirstSampleOfABatchEqualsTheBatchOfOne) {
  for (auto distribution : {Generator::Distribution::kUniform, Generator::Distribution::kNormal}) {
    Generator g{distribution, 3};
    auto one = generate_tensor(g, "x", DType::kF32, {1, 3, 5});
    auto three = generate_tensor(g, "x", DType::kF32, {3, 3, 5});
    ASSERT_TRUE(one.ok() && three.ok());
    EXPECT_EQ(std::memcmp(one->data(), three->data(), one->byte_size()), 0);
  }
}

TEST(InputGenerator, SeedAndNameChangeTheValues) {
  Generator g{Generator::Distribution::kUniform, 1};
  Generator h{Generator::Distribution::kUniform, 2};
  auto a = generate_tensor(g, "x", DType::kF32, {64});
  auto b = generate_tensor(h, "x", DType::kF32, {64});
  auto c = generate_tensor(g, "y", DType::kF32, {64});
  EXPECT_NE(std::memcmp(a->data(), b->data(), a->byte_size()), 0);
  EXPECT_NE(std::memcmp(a->data(), c->data(), a->byte_size()), 0);
}

TEST(InputGenerator, NormalHasTheRequestedMoments) {
  Generator g{Generator::Distribution::kNormal, 9};
  g.mean = 5;
  g.stddev = 2;
  auto t = generate_tensor(g, "x", DType::kF64, {20000});
  ASSERT_TRUE(t.ok());
  double sum = 0, sq = 0;
  for (double v : t->values<double>()) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += v * v;
  }
  const double mean = sum / 20000, var = sq / 20000 - mean * mean;
  EXPECT_NEAR(mean, 5, 0.05);
  EXPECT_NEAR(std::sqrt(var), 2, 0.05);
}

TEST(InputGenerator, IntegersCoverTheClosedRange) {
  Generator g{Generator::Distribution::kUniform, 0, -1, 2};
  auto t = generate_tensor(g, "x", DType::kI64, {1000});
  ASSERT_TRUE(t.ok());
  std::set<int64_t> seen(t->values<int64_t>().begin(), t->values<int64_t>().end());
  EXPECT_EQ(seen, (std::set<int64_t>{-1, 0, 1, 2}));
  auto b = generate_tensor(g, "x", DType::kBool, {100});
  for (uint8_t v : b->values<uint8_t>()) ASSERT_LE(v, 1);
}

TEST(InputGenerator, RefusesRangesThatDoNotFit) {
  Generator g{Generator::Distribution::kUniform, 0, -1, 300};
  auto t = generate_tensor(g, "x", DType::kU8, {4});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kOutOfRange);
  Generator empty{Generator::Distribution::kUniform, 0, 0.2, 0.7};
  EXPECT_FALSE(generate_tensor(empty, "x", DType::kI32, {4}).ok());
  EXPECT_EQ(generate_tensor(g, "x", DType::kF16, {4}).status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln::suite
