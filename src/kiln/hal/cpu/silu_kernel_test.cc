// kiln's SiLU kernel (silu_kernel.h) against x * sigmoid(x) in double precision, within its
// accuracy; for the same bits on both ISAs (AVX2 and, where the CPU has it, AVX-512) at any length
// and offset, in place or not; and for the non-finite values' rules.
#include "kiln/hal/cpu/silu_kernel.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kiln/hal/cpu/vector_kernel_testing.h"

namespace kiln::hal::cpu::silu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class SiluKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 + FMA";
  }
};

std::vector<float> spread_values(int64_t n, float spread, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, spread);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

TEST_F(SiluKernelTest, MatchesTheDefinitionWithinAFewRoundings) {
  for (float spread : {0.5f, 4.0f, 30.0f}) {
    const std::vector<float> x = spread_values(4099, spread, 5);
    for (Isa isa : runnable_isas()) {
      std::vector<float> y(x.size());
      apply(x.data(), y.data(), static_cast<int64_t>(x.size()), isa);
      for (size_t i = 0; i < x.size(); ++i) {
        const double v = x[i], want = v / (1.0 + std::exp(-v));
        // exp within 2 ulp, then a division and a product, each rounded; below -87.34 the exact
        // value is below 87.4 * 2^-126 and the kernel gives -0.
        const double tolerance =
            v < -87.0 ? 2e-36 : 8 * std::numeric_limits<float>::epsilon() * std::fabs(want);
        EXPECT_LE(std::fabs(y[i] - want), tolerance)
            << fmt::format("x = {} on {}", x[i], isa_name(isa));
      }
    }
  }
}

TEST_F(SiluKernelTest, BothIsasAnyLengthAndOffsetGiveTheSameBits) {
  expect_same_bits_at_any_length_and_offset(apply, spread_values(600, 6.0f, 6));
}

TEST_F(SiluKernelTest, NonFiniteValuesAndSignedZerosFollowTheDefinition) {
  // As Mul(x, Sigmoid(x)): NaN stays NaN, +inf * 1, -inf * 0 = NaN, -0 * 0.5 = -0.
  const std::vector<float> x{kNaN, kInf, -kInf, -0.0f, 0.0f, -100.0f, 100.0f, -88.0f};
  for (Isa isa : runnable_isas()) {
    std::vector<float> y(x.size());
    apply(x.data(), y.data(), static_cast<int64_t>(x.size()), isa);
    EXPECT_TRUE(std::isnan(y[0])) << isa_name(isa);
    EXPECT_EQ(y[1], kInf) << isa_name(isa);
    EXPECT_TRUE(std::isnan(y[2])) << isa_name(isa);
    EXPECT_TRUE(y[3] == 0.0f && std::signbit(y[3])) << isa_name(isa);
    EXPECT_TRUE(y[4] == 0.0f && !std::signbit(y[4])) << isa_name(isa);
    EXPECT_TRUE(y[5] == 0.0f && std::signbit(y[5])) << y[5] << " on " << isa_name(isa);
    EXPECT_EQ(y[6], 100.0f) << isa_name(isa);
    EXPECT_LE(std::fabs(y[7]), 1e-36f) << isa_name(isa);
  }
}

}  // namespace
}  // namespace kiln::hal::cpu::silu
