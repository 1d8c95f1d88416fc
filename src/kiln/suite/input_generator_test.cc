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
}

TEST(InputGenerator, HalfFloatsStayInRange) {
  // [0, 1): many draws round up to 1.0 in f16/bf16 and must step back below it.
  Generator g{Generator::Distribution::kUniform, 5, 0, 1};
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    auto t = generate_tensor(g, "x", dtype, {2000});
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    std::set<double> seen;
    for (int64_t i = 0; i < t->element_count(); ++i) {
      const double v = element_as_double(*t, i);
      ASSERT_GE(v, 0) << dtype_name(dtype);
      ASSERT_LT(v, 1) << dtype_name(dtype);
      seen.insert(v);
    }
    EXPECT_GT(seen.size(), 100u) << dtype_name(dtype);
  }
  Generator normal{Generator::Distribution::kNormal, 5};
  auto n = generate_tensor(normal, "x", DType::kF16, {100});
  ASSERT_TRUE(n.ok());
  for (int64_t i = 0; i < n->element_count(); ++i)
    ASSERT_TRUE(std::isfinite(element_as_double(*n, i)));
}

TEST(InputGenerator, EveryIntegerDtype) {
  Generator g{Generator::Distribution::kUniform, 0, 0, 3};
  for (DType dtype : {DType::kI16, DType::kU16, DType::kU32, DType::kU64}) {
    auto t = generate_tensor(g, "x", dtype, {200});
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    std::set<int64_t> seen;
    for (int64_t i = 0; i < t->element_count(); ++i) seen.insert(element_as_int64(*t, i));
    EXPECT_EQ(seen, (std::set<int64_t>{0, 1, 2, 3})) << dtype_name(dtype);
  }
  // A normal draw far past the dtype clamps to its ends, also for 64-bit types.
  Generator wide{Generator::Distribution::kNormal, 1};
  wide.stddev = 1e30;
  auto u64 = generate_tensor(wide, "x", DType::kU64, {50});
  ASSERT_TRUE(u64.ok());
  for (uint64_t v : u64->values<uint64_t>()) ASSERT_TRUE(v == 0 || v == UINT64_MAX) << v;
  auto i64 = generate_tensor(wide, "x", DType::kI64, {50});
  ASSERT_TRUE(i64.ok());
  for (int64_t v : i64->values<int64_t>()) ASSERT_TRUE(v == INT64_MIN || v == INT64_MAX) << v;
  EXPECT_EQ(
      generate_tensor(Generator{Generator::Distribution::kUniform, 0, -1, 2}, "x", DType::kU16, {4})
          .status()
          .code(),
      StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace kiln::suite
