// finite_guard.h's parts alone: the vectorized bound check at every length and position of the
// value that breaks it, the input bound a conv's weights and bias give, and GuardedStep's choice
// of path. The guard inside a conv (fused and fallback paths giving the same bits, NaN kept) is
// tested in conv_op_test.cc and nan_propagation_test.cc.
#include "kiln/hal/cpu/finite_guard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Values in [-bound, bound], the bounds themselves included.
std::vector<float> within(size_t n, float bound) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = i % 7 == 0 ? bound : i % 7 == 1 ? -bound : bound * (static_cast<float>(i % 5) - 2) / 3;
  }
  return v;
}

TEST(AllWithinTest, ValuesUpToTheBoundPass) {
  for (size_t n : {0, 1, 7, 8, 15, 16, 17, 100, 16384, 16385, 40000}) {
    const std::vector<float> v = within(n, 3.5f);
    EXPECT_TRUE(all_within(v.data(), static_cast<int64_t>(n), 3.5f)) << n;
  }
}

// Each bad value at each position of short spans (the vector loops' bodies and tails) and at
// positions across the parallel chunks of a long one.
TEST(AllWithinTest, ANonFiniteOrLargerValueAnywhereFails) {
  const float bound = 3.5f;
  const float bad[] = {kNaN,
                       -kNaN,
                       kInf,
                       -kInf,
                       std::nextafter(bound, kInf),
                       -std::nextafter(bound, kInf),
                       std::numeric_limits<float>::max()};
  for (float b : bad) {
    for (size_t n = 1; n <= 40; ++n) {
      for (size_t at = 0; at < n; ++at) {
        std::vector<float> v = within(n, bound);
        v[at] = b;
        EXPECT_FALSE(all_within(v.data(), static_cast<int64_t>(n), bound))
            << "value " << b << " at " << at << " of " << n;
      }
    }
    for (size_t at : {0, 16383, 16384, 20000, 39999}) {
      std::vector<float> v = within(40000, bound);
      v[at] = b;
      EXPECT_FALSE(all_within(v.data(), 40000, bound)) << "value " << b << " at " << at;
    }
  }
}

TEST(AllWithinTest, OnlyTheCountedValuesAreRead) {
  std::vector<float> v = within(20, 1.0f);
  v[13] = kNaN;
  EXPECT_TRUE(all_within(v.data(), 13, 1.0f));
  EXPECT_FALSE(all_within(v.data(), 14, 1.0f));
}

TEST(ConvInputBoundTest, IsTwoToThe120OverTheLargestChannelSum) {
  // Channel 0 sums |w| to 1.5, channel 1 to 6.
  const Tensor w = testing::f32({2, 1, 2, 2}, {0.5f, -0.25f, 0.5f, 0.25f, -3, 1, 1, 1});
  const Tensor b = testing::f32({2}, {0.0f, -2.0f});
  const std::optional<float> bound = conv_input_bound(w, &b);
  ASSERT_TRUE(bound.has_value());
  EXPECT_EQ(*bound, static_cast<float>(std::ldexp(1.0, 120) / 6.0));
}

TEST(ConvInputBoundTest, ZeroWeightsStillExcludeTheInfinities) {
  const Tensor w = testing::f32({1, 2, 1, 1}, {0.0f, -0.0f});
  const Tensor b = testing::f32({1}, {1.0f});
  EXPECT_EQ(conv_input_bound(w, &b), std::numeric_limits<float>::max());
}

TEST(ConvInputBoundTest, NoBoundForNonFiniteWeightsOrBadBiases) {
  const Tensor ok_w = testing::f32({1, 2, 1, 1}, {1.0f, 2.0f});
  const Tensor ok_b = testing::f32({1}, {1.0f});
  EXPECT_TRUE(conv_input_bound(ok_w, &ok_b).has_value());
  EXPECT_FALSE(conv_input_bound(testing::f32({1, 2, 1, 1}, {1.0f, kNaN}), &ok_b));
  EXPECT_FALSE(conv_input_bound(testing::f32({1, 2, 1, 1}, {-kInf, 1.0f}), &ok_b));
  for (float bad : {kNaN, kInf, -0.0f, 0x1p121f}) {
    const Tensor b = testing::f32({1}, {bad});
    EXPECT_FALSE(conv_input_bound(ok_w, &b)) << "bias " << bad;
  }
}

// A step that records that it ran, and answers same_bits_at_any_team_size as told.
class MarkStep : public Step {
 public:
  MarkStep(std::string name, std::vector<std::string>& ran, bool same_bits = true)
      : name_(std::move(name)), ran_(ran), same_bits_(same_bits) {}
  Status run(const ExecContext&) override {
    ran_.push_back(name_);
    return ok_status();
  }
  std::string describe() const override { return name_; }
  bool same_bits_at_any_team_size() const override { return same_bits_; }

 private:
  std::string name_;
  std::vector<std::string>& ran_;
  bool same_bits_;
};

TEST(GuardedStepTest, RunsTheFusedStepsOnlyWhileEveryCheckHolds) {
  std::vector<float> input = within(50, 2.0f), residual = within(30, 8.0f);
  std::vector<std::string> ran;
  std::vector<std::unique_ptr<Step>> fused, fallback;
  fused.push_back(std::make_unique<MarkStep>("fused", ran));
  fallback.push_back(std::make_unique<MarkStep>("plain", ran));
  fallback.push_back(std::make_unique<MarkStep>("activation", ran));
  GuardedStep step({{BufferRef::at(reinterpret_cast<std::byte*>(input.data())), 50, 2.0f},
                    {BufferRef::at(reinterpret_cast<std::byte*>(residual.data())), 30, 8.0f}},
                   std::move(fused), std::move(fallback), "plain and activation");
  EXPECT_EQ(step.describe(), "fused, else plain and activation");
  const ExecContext ctx;
  ASSERT_TRUE(step.run(ctx).ok());
  EXPECT_EQ(ran, (std::vector<std::string>{"fused"}));
  for (std::vector<float>* broken : {&input, &residual}) {
    const float kept = (*broken)[17];
    (*broken)[17] = kNaN;
    ran.clear();
    ASSERT_TRUE(step.run(ctx).ok());
    EXPECT_EQ(ran, (std::vector<std::string>{"plain", "activation"}));
    (*broken)[17] = kept;
  }
}

TEST(GuardedStepTest, KeepsTheBitsAtAnyTeamSizeOnlyWhenEveryStepDoes) {
  std::vector<std::string> ran;
  for (bool fused_same : {true, false}) {
    for (bool fallback_same : {true, false}) {
      std::vector<std::unique_ptr<Step>> fused, fallback;
      fused.push_back(std::make_unique<MarkStep>("fused", ran, fused_same));
      fallback.push_back(std::make_unique<MarkStep>("plain", ran, fallback_same));
      const GuardedStep step({}, std::move(fused), std::move(fallback), "plain");
      EXPECT_EQ(step.same_bits_at_any_team_size(), fused_same && fallback_same);
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
