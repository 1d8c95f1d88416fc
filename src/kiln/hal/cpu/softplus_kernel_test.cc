// kiln's Softplus kernel (softplus_kernel.h) against log(1 + e^x) in double precision: within 2
// ulp over every 401st float from -100 to 100 and at the edges; the same bits on both ISAs (AVX2
// and, where the CPU has it, AVX-512) at any length and offset, in place or not; and the
// non-finite values' rules.
#include "kiln/hal/cpu/softplus_kernel.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kiln/hal/cpu/vector_kernel_testing.h"

namespace kiln::hal::cpu::softplus {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class SoftplusKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 + FMA";
  }
};

// log(1 + e^v) in double, without overflow.
double exact(double v) { return std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v))); }

// The distance in units in the last place of the float nearest `want`.
double ulps(float got, double want) {
  const float nearest = static_cast<float>(want);
  const float next = std::nextafter(nearest, kInf);
  return std::fabs(got - want) / (static_cast<double>(next) - nearest);
}

TEST_F(SoftplusKernelTest, WithinTwoUlpOfTheDefinition) {
  // Every 401st float in [-100, 100], from the bits: all exponents and mantissas alike.
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x80000000u; bits += 401) {
    const float v = std::bit_cast<float>(bits);
    if (v > 100.0f) break;
    x.push_back(v);
    x.push_back(-v);
  }
  for (Isa isa : runnable_isas()) {
    std::vector<float> y(x.size());
    apply(x.data(), y.data(), static_cast<int64_t>(x.size()), isa);
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = exact(x[i]);
      // Below -87.34 the kernel gives 0 where the exact value is below 2^-126 (not normal).
      if (x[i] < -87.33654f) {
        EXPECT_EQ(y[i], 0.0f) << fmt::format("x = {} on {}", x[i], isa_name(isa));
        continue;
      }
      const double u = ulps(y[i], want);
      if (u > worst) worst = u, at = i;
    }
    EXPECT_LE(worst, 2.0) << fmt::format("x = {}: {} against {} on {}", x[at], y[at], exact(x[at]),
                                         isa_name(isa));
  }
}

TEST_F(SoftplusKernelTest, BothIsasAnyLengthAndOffsetGiveTheSameBits) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 10.0f);
  std::vector<float> x(600);
  for (float& v : x) v = dist(rng);
  expect_same_bits_at_any_length_and_offset(apply, x);
}

TEST_F(SoftplusKernelTest, NonFiniteValuesAndZerosFollowTheDefinition) {
  // NaN stays NaN; +inf gives +inf, -inf 0; +-0 give ln 2; large x gives x itself.
  const std::vector<float> x{kNaN, kInf, -kInf, -0.0f, 0.0f, -100.0f, 100.0f, 3e38f};
  for (Isa isa : runnable_isas()) {
    std::vector<float> y(x.size());
    apply(x.data(), y.data(), static_cast<int64_t>(x.size()), isa);
    EXPECT_TRUE(std::isnan(y[0])) << isa_name(isa);
    EXPECT_EQ(y[1], kInf) << isa_name(isa);
    EXPECT_EQ(y[2], 0.0f) << isa_name(isa);
    EXPECT_EQ(y[3], static_cast<float>(std::log(2.0))) << isa_name(isa);
    EXPECT_EQ(y[4], static_cast<float>(std::log(2.0))) << isa_name(isa);
    EXPECT_EQ(y[5], 0.0f) << isa_name(isa);
    EXPECT_EQ(y[6], 100.0f) << isa_name(isa);
    EXPECT_EQ(y[7], 3e38f) << isa_name(isa);
  }
}

}  // namespace
}  // namespace kiln::hal::cpu::softplus
