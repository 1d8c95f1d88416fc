// kiln's gemm kernel (gemm_kernel.h) against its numerics contract, bit for bit: every element is
// one FMA chain over k in order from 0, then alpha, then beta * C, then + the residual, computed
// here in scalar code with std::fma. Both ISAs (AVX2 and, where the CPU has it, AVX-512) must give
// exactly those bits for ragged and full register blocks, any thread count, several products per
// call and NaN/Inf. The GELU activation, which approximates, is checked against the exact
// function within its stated bound, and for the same bits on both ISAs.
#include "kiln/hal/cpu/gemm_kernel.h"

#include "kiln/hal/cpu/softmax_kernel.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

namespace kiln::hal::cpu::gemm {
namespace {

struct Shape {
  int64_t m, k, n;
};

// How the epilogue's C is shaped.
enum class CKind { kNone, kRowVector, kColumn, kFull };

struct Problem {
  Shape s;
  int64_t count = 1;  // products per call
  float alpha = 1.0f, beta = 0.0f;
  CKind c = CKind::kNone;
  std::vector<float> a, b, c_values;
  bool residual = false;
  std::vector<float> r_values;  // [m, n + 3]: a row stride other than n
  Activation activation = Activation::kNone;
  bool softmax = false;
};

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Problem make_problem(Shape s, int64_t count, float alpha, float beta, CKind c, uint32_t seed) {
  Problem p{s, count, alpha, beta, c, {}, {}, {}, false, {}, Activation::kNone, false};
  p.a = random_values(static_cast<size_t>(count * s.m * s.k), seed);
  p.b = random_values(static_cast<size_t>(count * s.k * s.n), seed + 1);
  p.c_values = random_values(static_cast<size_t>(s.m * s.n), seed + 2);
  p.r_values = random_values(static_cast<size_t>(s.m * (s.n + 3)), seed + 3);
  return p;
}

// C's element (i, j) and its strides in the kernel's terms.
int64_t c_row_stride(const Problem& p) {
  return p.c == CKind::kFull ? p.s.n : p.c == CKind::kColumn ? 1 : 0;
}
int64_t c_col_stride(const Problem& p) {
  return p.c == CKind::kFull || p.c == CKind::kRowVector ? 1 : 0;
}

// The contract, in scalar code.
std::vector<float> expected(const Problem& p) {
  const auto [m, k, n] = p.s;
  std::vector<float> y(static_cast<size_t>(p.count * m * n));
  for (int64_t q = 0; q < p.count; ++q) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (int64_t t = 0; t < k; ++t) {
          acc = std::fma(p.a[static_cast<size_t>(q * m * k + i * k + t)],
                         p.b[static_cast<size_t>(q * k * n + t * n + j)], acc);
        }
        if (p.alpha != 1.0f) acc *= p.alpha;
        if (p.c != CKind::kNone) {
          const float c =
              p.c_values[static_cast<size_t>(i * c_row_stride(p) + j * c_col_stride(p))];
          acc = std::fma(c, p.beta, acc);
        }
        if (p.residual) acc = acc + p.r_values[static_cast<size_t>(i * (n + 3) + j)];
        y[static_cast<size_t>(q * m * n + i * n + j)] = acc;
      }
    }
  }
  return y;
}

std::vector<float> run(const Problem& p, Isa isa) {
  const auto [m, k, n] = p.s;
  const int64_t per = packed_floats(k, n);
  std::unique_ptr<float, decltype(&std::free)> packed(
      static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(p.count * per + 16) * 4)),
      &std::free);
  std::vector<int64_t> b_src, a_offsets, b_offsets;
  for (int64_t q = 0; q < p.count; ++q) {
    b_src.push_back(q * k * n);
    a_offsets.push_back(q * m * k);
    b_offsets.push_back(q * per);
  }
  pack(k, n, p.b.data(), b_src, n, 1, packed.get());
  Product prod = dense_product(m, k, n);
  prod.alpha = p.alpha;
  if (p.c != CKind::kNone) {
    prod.c = p.c_values.data();
    prod.beta = p.beta;
    prod.c_row_stride = c_row_stride(p);
    prod.c_col_stride = c_col_stride(p);
  }
  if (p.residual) {
    prod.residual = p.r_values.data();
    prod.residual_row_stride = n + 3;
  }
  prod.activation = p.activation;
  prod.softmax = p.softmax;
  std::vector<float> y(static_cast<size_t>(p.count * m * n), -7.0f);
  multiply(prod, p.a.data(), a_offsets, packed.get(), b_offsets, y.data(), m * n, isa);
  return y;
}

// Bitwise equality, except that any NaN matches any NaN (payloads are not part of the contract).
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    uint32_t g, w;
    std::memcpy(&g, &got[i], 4);
    std::memcpy(&w, &want[i], 4);
    ASSERT_EQ(g, w) << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

class GemmKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_supported()) GTEST_SKIP() << "no AVX2 + FMA";
  }
};

// Ragged and full register blocks of both ISAs (6 and 8 rows, 1 and 3 panels), k across the
// blocks of 768, with each kind of epilogue. The rows after the last full register block run
// after each group of panels (3 or more rows past 8, 4 or more past 6) or every few groups
// (fewer rows): both, across several groups and blocks of k (13x300x33, 61x1537x51, 17x800x420,
// 26x800x420). On AVX-512, rows that would leave a tail of 1 or 2 go as blocks of 8 and 7 where
// there are blocks enough (49: seven of 7; 58: two of 8 and six of 7), fewer as 8s and a tail (9,
// 17, 26, 33). The full blocks' k loops that fetch the next group's B a line every 2 to 8 k steps
// (prefetch_every) end in a part of fewer steps (200x203x100: 8 at a time on both ISAs).
TEST_F(GemmKernelTest, BothIsasGiveTheContractsBits) {
  const Shape shapes[] = {{1, 1, 1},      {1, 7, 200},    {2, 33, 50},     {5, 17, 16},
                          {7, 64, 47},    {8, 5, 48},     {9, 100, 49},    {11, 50, 100},
                          {13, 300, 33},  {14, 900, 150}, {17, 800, 97},   {17, 800, 420},
                          {26, 800, 420}, {24, 769, 64},  {33, 1600, 20},  {100, 40, 130},
                          {128, 96, 96},  {61, 1537, 51}, {200, 203, 100}, {49, 1000, 150},
                          {58, 70, 60}};
  const struct {
    float alpha, beta;
    CKind c;
    bool residual;
  } epilogues[] = {{1.0f, 0.0f, CKind::kNone, false},     {0.5f, 2.0f, CKind::kRowVector, false},
                   {-1.5f, 0.25f, CKind::kColumn, false}, {1.0f, -1.0f, CKind::kFull, false},
                   {1.0f, 1.0f, CKind::kRowVector, true}, {2.0f, 0.0f, CKind::kNone, true}};
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    for (const auto& e : epilogues) {
      Problem p = make_problem(s, 1, e.alpha, e.beta, e.c, seed += 3);
      p.residual = e.residual;
      const std::vector<float> want = expected(p);
      for (Isa isa : runnable_isas()) {
        expect_same_bits(run(p, isa), want,
                         fmt::format("{} {}x{}x{} c kind {} residual {}", isa_name(isa), s.m, s.k,
                                     s.n, static_cast<int>(e.c), e.residual));
      }
    }
  }
}

// The thread count and several products per call change no bits, whether the work items take
// all rows of a group of panels (few rows, a small A; one product of them gives each thread one
// range of panels, across several groups and blocks of k at 40x1600x300) or chunks of rows (over
// 1024 rows; an A of over 2 MiB; an A of over 1 MiB in one block of k).
TEST_F(GemmKernelTest, ThreadsAndProductCountChangeNoBits) {
  const int saved = omp_get_max_threads();
  const Shape shapes[] = {
      {37, 130, 70}, {40, 1600, 300}, {1100, 40, 70}, {400, 1600, 20}, {400, 700, 20}};
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    for (const Shape& s : shapes) {
      for (int64_t count : {1, 3}) {
        const Problem p = make_problem(s, count, 1.0f, 1.0f, CKind::kRowVector, 99);
        const std::vector<float> want = expected(p);
        for (Isa isa : runnable_isas()) {
          expect_same_bits(run(p, isa), want,
                           fmt::format("{} threads {} {}x{}x{} count {}", isa_name(isa), threads,
                                       s.m, s.k, s.n, count));
        }
      }
    }
  }
  omp_set_num_threads(saved);
}

// A fused softmax gives the bits of softmax_kernel.h's softmax of the finished product, whether
// the rows are normalized by the work item that computed them (many products or rows) or, where
// whole rows would leave threads idle (a classifier's single row), after a product split over
// panels; at any thread count, on both ISAs.
TEST_F(GemmKernelTest, FusedSoftmaxGivesTheBitsOfTheSoftmaxAfterTheProduct) {
  const int saved = omp_get_max_threads();
  const struct {
    Shape s;
    int64_t count;
  } cases[] = {{{1, 300, 1000}, 1}, {{1, 64, 40}, 3},  {{16, 100, 200}, 1},
               {{8, 64, 197}, 12},  {{37, 50, 70}, 2}, {{200, 30, 50}, 1}};
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    for (const auto& c : cases) {
      Problem p = make_problem(c.s, c.count, 0.125f, 1.0f, CKind::kRowVector, 7);
      p.softmax = true;
      std::vector<float> want = expected(p);
      softmax::rows_on_this_thread(want.data(), want.data(), c.count * c.s.m, c.s.n);
      for (Isa isa : runnable_isas()) {
        expect_same_bits(run(p, isa), want,
                         fmt::format("{} threads {} {}x{}x{} count {}", isa_name(isa), threads,
                                     c.s.m, c.s.k, c.s.n, c.count));
      }
    }
  }
  omp_set_num_threads(saved);
}

// attend(): problem `p`'s products (p.softmax set), each followed by its rows' softmax and the
// product of those rows with V_q (`v`: p.count matrices [p.s.n, dv]). The residual, when set, is
// one mask for every product (offset 0). With `merged`, Y is laid out as attention's head merge
// wants it: product q's row i at (i * count + q) * dv.
std::vector<float> run_attend(const Problem& p, const std::vector<float>& v, int64_t dv,
                              bool merged, Isa isa) {
  const auto [m, k, n] = p.s;
  const int64_t per_k = packed_floats(k, n), per_v = packed_floats(n, dv);
  auto aligned = [](int64_t floats) {
    return std::unique_ptr<float, decltype(&std::free)>(
        static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(floats + 16) * 4)),
        &std::free);
  };
  const auto packed_k = aligned(p.count * per_k), packed_v = aligned(p.count * per_v);
  std::vector<int64_t> k_src, v_src, a_offsets, k_offsets, v_offsets, residual_offsets, y_offsets;
  for (int64_t q = 0; q < p.count; ++q) {
    k_src.push_back(q * k * n);
    v_src.push_back(q * n * dv);
    a_offsets.push_back(q * m * k);
    k_offsets.push_back(q * per_k);
    v_offsets.push_back(q * per_v);
    residual_offsets.push_back(0);
    if (merged) y_offsets.push_back(q * dv);
  }
  pack(k, n, p.b.data(), k_src, n, 1, packed_k.get());
  pack(n, dv, v.data(), v_src, dv, 1, packed_v.get());
  Product scores = dense_product(m, k, n);
  scores.alpha = p.alpha;
  scores.softmax = true;
  if (p.residual) {
    scores.residual = p.r_values.data();
    scores.residual_row_stride = n + 3;
    scores.residual_offsets = residual_offsets.data();
  }
  Product values = dense_product(m, n, dv);
  if (merged) values.ldy = p.count * dv;
  std::vector<float> y(static_cast<size_t>(p.count * m * dv), -7.0f);
  attend(scores, p.a.data(), a_offsets, packed_k.get(), k_offsets, values, packed_v.get(),
         v_offsets, y.data(), m * dv, y_offsets, isa);
  if (!merged) return y;
  std::vector<float> by_product(y.size());  // back to product-major order
  for (int64_t q = 0; q < p.count; ++q) {
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(&by_product[static_cast<size_t>((q * m + i) * dv)],
                  &y[static_cast<size_t>((i * p.count + q) * dv)],
                  static_cast<size_t>(dv) * sizeof(float));
    }
  }
  return by_product;
}

// attend() gives each element the bits of the contract's product of the stored probabilities (the
// fused softmax's bits, softmax_kernel.h) and V: in one chunk of rows or several (past 128 rows:
// 197 as 104 and 93, 300 as 104, 104 and 92), with or without a mask, Y contiguous or laid out for
// the head merge, at any thread count, on both ISAs.
TEST_F(GemmKernelTest, AttendGivesTheBitsOfTheProbabilitiesTimesV) {
  const int saved = omp_get_max_threads();
  const struct {
    Shape s;
    int64_t count, dv;
  } cases[] = {{{1, 64, 40}, 3, 16},  {{8, 64, 128}, 12, 64}, {{197, 64, 197}, 4, 64},
               {{37, 50, 70}, 1, 40}, {{300, 30, 50}, 2, 17}, {{5, 3, 1}, 2, 9}};
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    for (const auto& c : cases) {
      for (bool masked : {false, true}) {
        const auto [m, k, n] = c.s;
        Problem p = make_problem(c.s, c.count, 0.125f, 0.0f, CKind::kNone, 11);
        p.residual = masked;
        const std::vector<float> v = random_values(static_cast<size_t>(c.count * n * c.dv), 5);
        std::vector<float> probabilities = expected(p);
        softmax::rows_on_this_thread(probabilities.data(), probabilities.data(), c.count * m, n);
        std::vector<float> want(static_cast<size_t>(c.count * m * c.dv));
        for (int64_t q = 0; q < c.count; ++q) {
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < c.dv; ++j) {
              float acc = 0.0f;
              for (int64_t t = 0; t < n; ++t) {
                acc = std::fma(probabilities[static_cast<size_t>((q * m + i) * n + t)],
                               v[static_cast<size_t>((q * n + t) * c.dv + j)], acc);
              }
              want[static_cast<size_t>((q * m + i) * c.dv + j)] = acc;
            }
          }
        }
        for (Isa isa : runnable_isas()) {
          for (bool merged : {false, true}) {
            expect_same_bits(
                run_attend(p, v, c.dv, merged, isa), want,
                fmt::format("{} threads {} {}x{}x{} count {} dv {} mask {} merged {}",
                            isa_name(isa), threads, m, k, n, c.count, c.dv, masked, merged));
          }
        }
      }
    }
  }
  omp_set_num_threads(saved);
}

// NaN and Inf propagate as IEEE arithmetic says: a NaN in A poisons its row, an Inf in B its
// column (Inf * 0 is NaN, Inf + -Inf is NaN), and C's NaN its elements.
TEST_F(GemmKernelTest, NanAndInfPropagate) {
  Problem p = make_problem({11, 20, 35}, 1, 1.0f, 1.0f, CKind::kFull, 7);
  p.residual = true;
  p.r_values[7 * 38 + 9] = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  p.a[3 * 20 + 4] = std::numeric_limits<float>::quiet_NaN();
  p.a[5 * 20 + 6] = 0.0f;
  p.a[0 * 20 + 9] = 1.0f;
  p.a[0 * 20 + 10] = 1.0f;
  p.b[6 * 35 + 17] = inf;
  p.b[9 * 35 + 30] = -inf;
  p.b[10 * 35 + 30] = inf;
  p.c_values[8 * 35 + 2] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> want = expected(p);
  EXPECT_TRUE(std::isnan(want[3 * 35 + 0]));
  EXPECT_TRUE(std::isnan(want[5 * 35 + 17]));
  EXPECT_TRUE(std::isnan(want[0 * 35 + 30]));
  EXPECT_TRUE(std::isnan(want[8 * 35 + 2]));
  EXPECT_TRUE(std::isnan(want[7 * 35 + 9]));
  for (Isa isa : runnable_isas()) expect_same_bits(run(p, isa), want, isa_name(isa));
}

// GELU, exactly (in double): ONNX Gelu, approximate "none" or "tanh".
double exact_gelu(double x, Activation a) {
  if (a == Activation::kGelu) return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// The activation ends the epilogue (after alpha, the bias and the residual): within
// 1.5e-6 * max(1, |GELU(x)|) of the exact GELU of the epilogue's result, the same bits on both
// ISAs, for ragged and full register blocks, with products whose results span [-12, 12].
TEST_F(GemmKernelTest, GeluEndsTheEpilogueWithinItsBoundAndAlikeOnBothIsas) {
  const Shape shapes[] = {{1, 7, 200}, {7, 64, 47}, {9, 100, 49}, {17, 800, 97}, {33, 40, 20}};
  uint32_t seed = 500;
  for (Activation activation : {Activation::kGelu, Activation::kGeluTanh}) {
    for (const Shape& s : shapes) {
      Problem p = make_problem(s, 1, 3.0f, 1.0f, CKind::kRowVector, seed += 5);
      p.residual = true;
      // Scale A so that the sums, about +-sqrt(k)/3 before, reach about +-12 with alpha 3.
      const float scale = 4.0f / std::sqrt(static_cast<float>(s.k) / 3.0f);
      for (float& v : p.a) v *= scale;
      const std::vector<float> plain = expected(p);
      p.activation = activation;
      std::vector<float> first;
      for (Isa isa : runnable_isas()) {
        const std::vector<float> got = run(p, isa);
        const std::string what = fmt::format("{} {}x{}x{} activation {}", isa_name(isa), s.m, s.k,
                                             s.n, static_cast<int>(activation));
        for (size_t i = 0; i < got.size(); ++i) {
          const double want = exact_gelu(plain[i], activation);
          ASSERT_LE(std::abs(got[i] - want), 1.5e-6 * std::max(1.0, std::abs(want)))
              << what << " element " << i << " of x = " << plain[i];
        }
        if (first.empty()) {
          first = got;
        } else {
          expect_same_bits(got, first, what + " against AVX2");
        }
      }
    }
  }
}

// GELU keeps NaN, maps +inf to +inf and -inf to NaN (-inf * 0, as ONNX's formula gives), and
// saturates past the approximations' ranges as the exact function does, on both ISAs.
TEST_F(GemmKernelTest, GeluOfNonFiniteAndLargeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // x = bias: A is zero, so each column's result is its bias exactly.
  const std::vector<float> xs = {nan, inf, -inf, 30.0f, -30.0f, 1e20f, -1e20f, 6.0f, -6.0f, 0.0f};
  const int64_t n = static_cast<int64_t>(xs.size());
  Problem p = make_problem({3, 4, n}, 1, 1.0f, 1.0f, CKind::kRowVector, 77);
  std::fill(p.a.begin(), p.a.end(), 0.0f);
  std::copy(xs.begin(), xs.end(), p.c_values.begin());
  for (Activation activation : {Activation::kGelu, Activation::kGeluTanh}) {
    p.activation = activation;
    for (Isa isa : runnable_isas()) {
      const std::vector<float> y = run(p, isa);
      const std::string what =
          fmt::format("{} activation {}", isa_name(isa), static_cast<int>(activation));
      for (int64_t row = 0; row < 3; ++row) {
        const float* r = y.data() + row * n;
        EXPECT_TRUE(std::isnan(r[0])) << what;
        EXPECT_EQ(r[1], inf) << what;
        EXPECT_TRUE(std::isnan(r[2])) << what;
        EXPECT_EQ(r[3], 30.0f) << what;
        EXPECT_EQ(r[4], 0.0f) << what;
        EXPECT_TRUE(std::signbit(r[4])) << what << ": GELU(-30) is -0";
        EXPECT_EQ(r[5], 1e20f) << what;
        EXPECT_EQ(r[6], 0.0f) << what;
        EXPECT_NEAR(r[7], exact_gelu(6.0, activation), 1e-5) << what;
        EXPECT_NEAR(r[8], exact_gelu(-6.0, activation), 1e-6) << what;
        EXPECT_EQ(r[9], 0.0f) << what;
      }
    }
  }
}

// Relu ends the epilogue exactly as kiln's rule (x < 0 ? +0 : x) on the epilogue's result, on
// both ISAs: against the same product without it, bit for bit, for ragged and full register
// blocks with a residual; and NaN, +-inf and tiny negatives.
TEST_F(GemmKernelTest, ReluEndsTheEpilogueAsKilnsRule) {
  for (const Shape& s : {Shape{7, 64, 47}, Shape{17, 800, 97}}) {
    Problem p = make_problem(s, 1, 1.0f, 1.0f, CKind::kRowVector, 91);
    p.residual = true;
    for (Isa isa : runnable_isas()) {
      p.activation = Activation::kNone;
      std::vector<float> want = run(p, isa);
      int negatives = 0;
      for (float& v : want) {
        negatives += v < 0.0f;
        if (v < 0.0f) v = 0.0f;
      }
      ASSERT_GT(negatives, static_cast<int>(want.size() / 4)) << "the sums take both signs";
      p.activation = Activation::kRelu;
      expect_same_bits(run(p, isa), want, fmt::format("{} {}x{}x{}", isa_name(isa), s.m, s.k, s.n));
    }
  }
  // x = bias: A is zero, so each column's result is its bias.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs = {nan, inf, -inf, -1e-30f, 2.5f};
  const int64_t n = static_cast<int64_t>(xs.size());
  Problem p = make_problem({2, 4, n}, 1, 1.0f, 1.0f, CKind::kRowVector, 92);
  std::fill(p.a.begin(), p.a.end(), 0.0f);
  std::copy(xs.begin(), xs.end(), p.c_values.begin());
  p.activation = Activation::kRelu;
  for (Isa isa : runnable_isas()) {
    const std::vector<float> y = run(p, isa);
    for (int64_t row = 0; row < 2; ++row) {
      const float* r = y.data() + row * n;
      EXPECT_TRUE(std::isnan(r[0])) << isa_name(isa);
      EXPECT_EQ(r[1], inf) << isa_name(isa);
      EXPECT_EQ(r[2], 0.0f) << isa_name(isa);
      EXPECT_FALSE(std::signbit(r[2])) << isa_name(isa) << ": relu(-inf) is +0";
      EXPECT_EQ(r[3], 0.0f) << isa_name(isa);
      EXPECT_FALSE(std::signbit(r[3])) << isa_name(isa) << ": relu(-1e-30) is +0";
      EXPECT_EQ(r[4], 2.5f) << isa_name(isa);
    }
  }
}

// DNNL_MAX_CPU_ISA=AVX2 (or lower) selects the AVX2 code; otherwise AVX-512 where the CPU has it.
TEST_F(GemmKernelTest, BestIsaFollowsTheCpuAndDnnlMaxCpuIsa) {
  const char* cap = std::getenv("DNNL_MAX_CPU_ISA");
  const bool capped = cap != nullptr && std::string(cap).find("AVX512") == std::string::npos &&
                      std::string(cap) != "ALL";
  const bool want_avx512 = __builtin_cpu_supports("avx512f") && !capped;
  EXPECT_EQ(best_isa(), want_avx512 ? Isa::kAvx512 : Isa::kAvx2) << (cap ? cap : "(unset)");
}

// pack() against the layout gemm_kernel.h states: matrix i's element (r, c) at
// packed[i * packed_floats(k, n) + (c / 16) * k * 16 + r * 16 + c % 16], zeros where the last panel
// has no column. Plain and transposed reads (a transposed one takes the 8 x 8 register path for
// whole panels and 8 rows), ragged k and n, several matrices at their offsets.
TEST(GemmPack, EveryReadOfTheSourcePacksTheLayoutTheHeaderStates) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const int64_t k : {1, 7, 8, 13, 64, 67}) {
    for (const int64_t n : {1, 5, 16, 17, 40, 197}) {
      for (const bool transposed : {false, true}) {
        SCOPED_TRACE(fmt::format("k {} n {} {}", k, n, transposed ? "transposed" : "plain"));
        // Transposed: column c contiguous along k, columns 3 floats apart beyond k (a view of a
        // wider row, as K's columns in a fused QKV product).
        const int64_t row_stride = transposed ? 1 : n + 2;
        const int64_t col_stride = transposed ? k + 3 : 1;
        const int64_t extent = (k - 1) * row_stride + (n - 1) * col_stride + 1;
        const std::vector<int64_t> offsets = {5, 5 + extent + 9, 5 + 2 * (extent + 9)};
        std::vector<float> src(static_cast<size_t>(offsets.back() + extent + 4));
        for (float& v : src) v = dist(rng);
        const int64_t per = packed_floats(k, n);
        std::unique_ptr<float, decltype(&std::free)> packed(
            static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(3 * per) * 4)),
            &std::free);
        std::fill(packed.get(), packed.get() + 3 * per, std::numeric_limits<float>::quiet_NaN());
        pack(k, n, src.data(), offsets, row_stride, col_stride, packed.get());
        int64_t wrong = 0;
        for (int64_t i = 0; i < 3; ++i) {
          for (int64_t r = 0; r < k; ++r) {
            for (int64_t c = 0; c < panel_count(n) * kPanelColumns; ++c) {
              const float want = c < n ? src[static_cast<size_t>(offsets[static_cast<size_t>(i)] +
                                                                 r * row_stride + c * col_stride)]
                                       : 0.0f;
              const float got = packed.get()[i * per + (c / kPanelColumns) * k * kPanelColumns +
                                             r * kPanelColumns + c % kPanelColumns];
              if (std::memcmp(&want, &got, sizeof(float)) != 0) ++wrong;
            }
          }
        }
        EXPECT_EQ(wrong, 0);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cpu::gemm
