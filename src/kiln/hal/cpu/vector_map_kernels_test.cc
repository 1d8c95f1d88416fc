// kiln's vector kernels of one input (vector_map_kernels.h) against their definitions in double
// precision: SiLU within a few roundings, Softplus within 2 ulp and Mish within 5 ulp over every
// 401st float from -100 to 100; for each, the same bits on both ISAs (AVX2 and, where the CPU has
// it, AVX-512) at any length and offset, in place or not; and the non-finite values' rules.
#include "kiln/hal/cpu/vector_map_kernels.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kiln/hal/cpu/vector_kernel_testing.h"

namespace kiln::hal::cpu::vector_map {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class VectorMapKernelTest : public ::testing::Test {
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

std::vector<float> run(Function f, const std::vector<float>& x, Isa isa) {
  std::vector<float> y(x.size());
  apply(f, x.data(), y.data(), static_cast<int64_t>(x.size()), isa);
  return y;
}

// Every 401st float in [-100, 100], from the bits: all exponents and mantissas alike.
std::vector<float> every_401st_float() {
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x80000000u; bits += 401) {
    const float v = std::bit_cast<float>(bits);
    if (v > 100.0f) break;
    x.push_back(v);
    x.push_back(-v);
  }
  return x;
}

// log(1 + e^v) in double, without overflow.
double exact_softplus(double v) { return std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v))); }
double exact_mish(double v) { return v * std::tanh(exact_softplus(v)); }

// The distance in units in the last place of the float nearest `want`.
double ulps(float got, double want) {
  const float nearest = static_cast<float>(want);
  const float next = std::nextafter(std::fabs(nearest), kInf);
  return std::fabs(got - want) / (static_cast<double>(next) - std::fabs(nearest));
}

// The worst ulps of `f` against `exact` over every_401st_float() on each ISA, where the exact
// value is a normal float; below -87.34, where it is not, the kernel must give a zero.
void expect_within_ulps(Function f, double (*exact)(double), double bound) {
  const std::vector<float> x = every_401st_float();
  for (Isa isa : runnable_isas()) {
    const std::vector<float> y = run(f, x, isa);
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] < -87.33654f) {
        EXPECT_EQ(y[i], 0.0f) << fmt::format("{}({}) on {}", name_of(f), x[i], isa_name(isa));
        continue;
      }
      const double u = ulps(y[i], exact(x[i]));
      if (u > worst) worst = u, at = i;
    }
    EXPECT_LE(worst, bound) << fmt::format("{}({}): {} against {} on {}", name_of(f), x[at], y[at],
                                           exact(x[at]), isa_name(isa));
  }
}

void expect_same_bits_everywhere(Function f, const std::vector<float>& x) {
  expect_same_bits_at_any_length_and_offset(
      [f](const float* in, float* out, int64_t n, Isa isa) { apply(f, in, out, n, isa); }, x);
}

TEST_F(VectorMapKernelTest, SiluMatchesTheDefinitionWithinAFewRoundings) {
  for (float spread : {0.5f, 4.0f, 30.0f}) {
    const std::vector<float> x = spread_values(4099, spread, 5);
    for (Isa isa : runnable_isas()) {
      const std::vector<float> y = run(Function::kSilu, x, isa);
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

TEST_F(VectorMapKernelTest, SoftplusWithinTwoUlpOfTheDefinition) {
  expect_within_ulps(Function::kSoftplus, exact_softplus, 2.0);
}

TEST_F(VectorMapKernelTest, MishWithinFiveUlpOfTheDefinition) {
  expect_within_ulps(Function::kMish, exact_mish, 5.0);
}

TEST_F(VectorMapKernelTest, BothIsasAnyLengthAndOffsetGiveTheSameBits) {
  expect_same_bits_everywhere(Function::kSilu, spread_values(600, 6.0f, 6));
  expect_same_bits_everywhere(Function::kSoftplus, spread_values(600, 10.0f, 7));
  expect_same_bits_everywhere(Function::kMish, spread_values(600, 8.0f, 8));
}

// The edges of a function x * g(x) whose gate g goes from 0 at -inf to 1 at +inf (SiLU, Mish), as
// the op written out gives them: NaN stays NaN, +inf * 1, -inf * 0 = NaN, -0 * g(0) = -0, +0
// stays +0, -100 gives -0 (the exact value is below the smallest float), 100 * 1 = 100.
void expect_gated_edges(Function f) {
  const std::vector<float> x{kNaN, kInf, -kInf, -0.0f, 0.0f, -100.0f, 100.0f};
  for (Isa isa : runnable_isas()) {
    const std::vector<float> y = run(f, x, isa);
    const std::string where = fmt::format("{} on {}", name_of(f), isa_name(isa));
    EXPECT_TRUE(std::isnan(y[0])) << where;
    EXPECT_EQ(y[1], kInf) << where;
    EXPECT_TRUE(std::isnan(y[2])) << where;
    EXPECT_TRUE(y[3] == 0.0f && std::signbit(y[3])) << where;
    EXPECT_TRUE(y[4] == 0.0f && !std::signbit(y[4])) << where;
    EXPECT_TRUE(y[5] == 0.0f && std::signbit(y[5])) << y[5] << ": " << where;
    EXPECT_EQ(y[6], 100.0f) << where;
  }
}

TEST_F(VectorMapKernelTest, SiluNonFiniteValuesAndSignedZerosFollowTheDefinition) {
  expect_gated_edges(Function::kSilu);
  for (Isa isa : runnable_isas()) {
    EXPECT_LE(std::fabs(run(Function::kSilu, {-88.0f}, isa)[0]), 1e-36f) << isa_name(isa);
  }
}

TEST_F(VectorMapKernelTest, SoftplusNonFiniteValuesAndZerosFollowTheDefinition) {
  // NaN stays NaN; +inf gives +inf, -inf 0; +-0 give ln 2; large x gives x itself.
  const std::vector<float> x{kNaN, kInf, -kInf, -0.0f, 0.0f, -100.0f, 100.0f, 3e38f};
  for (Isa isa : runnable_isas()) {
    const std::vector<float> y = run(Function::kSoftplus, x, isa);
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

TEST_F(VectorMapKernelTest, MishNonFiniteValuesAndSignedZerosFollowTheDefinition) {
  expect_gated_edges(Function::kMish);
  for (Isa isa : runnable_isas()) {
    const std::vector<float> y = run(Function::kMish, {3e38f, 1.0f}, isa);
    EXPECT_EQ(y[0], 3e38f) << isa_name(isa);
    EXPECT_NEAR(y[1], 0.8650983882673103, 1e-6) << isa_name(isa);  // mish(1)
  }
}

}  // namespace
}  // namespace kiln::hal::cpu::vector_map
