// kiln's softmax kernel (softmax_kernel.h) against the definition computed in double precision,
// within its accuracy; for the same bits on both ISAs (AVX2 and, where the CPU has it, AVX-512),
// any row count, position and thread count; and for the non-finite rows' rules.
#include "kiln/hal/cpu/softmax_kernel.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace kiln::hal::cpu::softmax {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_rows(int64_t rows, int64_t n, float spread, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, spread);
  std::vector<float> x(static_cast<size_t>(rows * n));
  for (float& v : x) v = dist(rng);
  return x;
}

// The definition in double precision, for a row of finite values.
std::vector<double> reference_row(const float* x, int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
  std::vector<double> e(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += e[static_cast<size_t>(i)] = std::exp(x[i] - m);
  for (double& v : e) v /= sum;
  return e;
}

double max_of(const std::vector<float>& x, int64_t row, int64_t n) {
  return *std::max_element(x.begin() + row * n, x.begin() + (row + 1) * n);
}

std::vector<float> run(const std::vector<float>& x, int64_t n, Isa isa) {
  std::vector<float> y(x.size(), -1.0f);
  rows(x.data(), y.data(), static_cast<int64_t>(x.size()) / n, n, isa);
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class SoftmaxKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 + FMA";
  }
};

// Full 16-lane blocks and tails; spreads from attention-like scores to ones whose exp underflows.
TEST_F(SoftmaxKernelTest, MatchesTheDefinitionWithinItsRoundings) {
  for (int64_t n : {1, 5, 16, 17, 31, 128, 197, 1000}) {
    for (float spread : {0.5f, 3.0f, 40.0f}) {
      const std::vector<float> x = random_rows(3, n, spread, static_cast<unsigned>(n));
      for (Isa isa : runnable_isas()) {
        const std::vector<float> y = run(x, n, isa);
        for (int64_t r = 0; r < 3; ++r) {
          const std::vector<double> ref = reference_row(x.data() + r * n, n);
          const double m = max_of(x, r, n);
          double sum = 0;
          for (int64_t i = 0; i < n; ++i) {
            const double got = y[static_cast<size_t>(r * n + i)],
                         want = ref[static_cast<size_t>(i)];
            sum += got;
            // exp within 2 ulp, the sum and the scale a few more roundings, and x - m rounded
            // to float (half an ulp of |x - m|, as any f32 softmax rounds it); exp below 2^-126
            // gives 0.
            const double t = std::abs(x[static_cast<size_t>(r * n + i)] - m);
            ASSERT_NEAR(got, want, 2e-38 + (8e-7 + 6e-8 * t) * want) << fmt::format(
                "n {} spread {} row {} element {} ({})", n, spread, r, i, isa_name(isa));
          }
          EXPECT_NEAR(sum, 1.0, 2e-6) << n;
        }
      }
    }
  }
}

TEST_F(SoftmaxKernelTest, BothIsasAnyRowCountAndThreadCountGiveTheSameBits) {
  const int64_t n = 197, count = 37;
  const std::vector<float> x = random_rows(count, n, 4.0f, 7);
  const std::vector<float> whole = run(x, n, Isa::kAvx2);
  for (Isa isa : runnable_isas()) {
    for (int threads : {1, 2, 3}) {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      const std::vector<float> y = run(x, n, isa);
      omp_set_num_threads(saved);
      EXPECT_TRUE(same_bits(y, whole)) << isa_name(isa) << " threads " << threads;
    }
    // Each row alone, and in place.
    for (int64_t r = 0; r < count; r += 9) {
      std::vector<float> row(x.begin() + r * n, x.begin() + (r + 1) * n);
      rows(row.data(), row.data(), 1, n, isa);
      EXPECT_TRUE(std::equal(row.begin(), row.end(), whole.begin() + r * n,
                             [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; }))
          << isa_name(isa) << " row " << r;
    }
  }
}

// The kernel works on several rows side by side (softmax_math.h): a row's bits are those it gets
// alone, whatever its neighbours hold, NaN and +inf among them, and wherever its group starts.
TEST_F(SoftmaxKernelTest, NeighbouringRowsChangeNoBits) {
  for (int64_t n : {70, 197}) {  // four full vectors and more, then a tail
    const int64_t count = 11;
    std::vector<float> x = random_rows(count, n, 4.0f, static_cast<unsigned>(n));
    x[1 * n + 40] = kNaN;  // in the first four vectors
    x[6 * n + 66] = kInf;  // in the fifth vector or the tail
    x[9 * n + 3] = -kInf;
    for (Isa isa : runnable_isas()) {
      for (int64_t first : {0, 1, 2, 3}) {  // groups starting at every offset
        const int64_t rows_here = count - first;
        std::vector<float> y(static_cast<size_t>(rows_here * n));
        rows_on_this_thread(x.data() + first * n, y.data(), rows_here, n, isa);
        for (int64_t r = first; r < count; ++r) {
          std::vector<float> alone(static_cast<size_t>(n));
          rows_on_this_thread(x.data() + r * n, alone.data(), 1, n, isa);
          const float* got = y.data() + (r - first) * n;
          if (r == 1 || r == 6) {
            for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(got[i])) << r << " " << i;
          } else {
            EXPECT_EQ(std::memcmp(got, alone.data(), static_cast<size_t>(n) * sizeof(float)), 0)
                << fmt::format("n {} row {} from row {} ({})", n, r, first, isa_name(isa));
          }
        }
      }
    }
  }
}

TEST_F(SoftmaxKernelTest, NonFiniteRowsFollowTheDefinition) {
  const int64_t n = 19;
  std::vector<float> x = random_rows(7, n, 2.0f, 3);
  x[0 * n + 4] = kNaN;                                     // row 0: a NaN
  x[1 * n + 18] = kInf;                                    // row 1: +inf (in the tail)
  std::fill(x.begin() + 2 * n, x.begin() + 3 * n, -kInf);  // row 2: all -inf
  x[3 * n + 0] = -kInf;                                    // row 3: some -inf
  x[3 * n + 17] = -kInf;
  x[4 * n + 2] = 3e38f;  // row 4: huge values
  x[4 * n + 3] = -3e38f;
  std::fill(x.begin() + 5 * n, x.begin() + 6 * n, 1e-30f);  // row 5: all equal
  for (Isa isa : runnable_isas()) {
    const std::vector<float> y = run(x, n, isa);
    for (int r : {0, 1, 2}) {
      for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(y[r * n + i])) << r << " " << i;
    }
    // -inf gives 0; the others are the softmax of the finite values.
    std::vector<float> finite;
    for (int64_t i = 1; i < 17; ++i) finite.push_back(x[3 * n + i]);
    finite.push_back(x[3 * n + 18]);
    const std::vector<double> ref =
        reference_row(finite.data(), static_cast<int64_t>(finite.size()));
    EXPECT_EQ(y[3 * n + 0], 0.0f);
    EXPECT_EQ(y[3 * n + 17], 0.0f);
    for (int64_t i = 1; i < 17; ++i) EXPECT_NEAR(y[3 * n + i], ref[i - 1], 8e-7 * ref[i - 1]);
    EXPECT_NEAR(y[3 * n + 18], ref.back(), 8e-7 * ref.back());
    EXPECT_EQ(y[4 * n + 2], 1.0f);
    for (int64_t i = 0; i < n; ++i) {
      if (i != 2) {
        EXPECT_EQ(y[4 * n + i], 0.0f) << i;
      }
    }
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[5 * n + i], 1.0 / n, 1e-7);
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(std::isfinite(y[6 * n + i]));
  }
  // A row of one element is 1, unless it is NaN or infinite.
  for (float v : {0.0f, -5.0f, 1e30f, -kInf, kInf, kNaN}) {
    float out = -1.0f;
    rows(&v, &out, 1, 1);
    if (std::isfinite(v)) {
      EXPECT_EQ(out, 1.0f) << v;
    } else {
      EXPECT_TRUE(std::isnan(out)) << v;
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cpu::softmax
