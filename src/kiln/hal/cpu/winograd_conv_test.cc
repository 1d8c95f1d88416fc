// kiln's Winograd F(2x2, 3x3) and F(4x4, 3x3) kernels on their own, on each ISA (AVX2; AVX-512
// where the CPU has it), each layout (blocked, channels last) and each tile edge: against a float64
// direct convolution, across tile edges, pads, images of a batch, chunk boundaries, register blocks
// of output channels and the epilogue (bias, accumulate, relu/clip/leaky relu); the same bits on
// one thread and two, for an image alone and in a batch, on both ISAs and in both layouts; NaN kept
// by the fused activations; shapes it refuses.
#include "kiln/hal/cpu/winograd_conv.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace kiln::hal::cpu::winograd {
namespace {

using Kind = kernels::FusedActivation::Kind;

struct Case {
  int64_t c, h, w, m, pad_top, pad_left, pad_bottom, pad_right;
};

void PrintTo(const Case& k, std::ostream* os) {
  *os << "C " << k.c << ", " << k.h << "x" << k.w << ", M " << k.m << ", pads " << k.pad_top << ","
      << k.pad_left << "," << k.pad_bottom << "," << k.pad_right;
}

Conv3x3 shape_of(const Case& k, int64_t tile) {
  return Conv3x3{k.c,
                 k.m,
                 k.h,
                 k.w,
                 k.h + k.pad_top + k.pad_bottom - 2,
                 k.w + k.pad_left + k.pad_right - 2,
                 k.pad_top,
                 k.pad_left,
                 false,
                 tile};
}

// Where the kernel's layout holds channel `ch` of pixel `i` of an image of `c` channels and `hw`
// pixels: nChw{vec}c [C/vec][H][W][vec], or NHWC [H][W][C].
struct Layout {
  int64_t vec;
  bool channels_last;
  int64_t at(int64_t c, int64_t hw, int64_t ch, int64_t i) const {
    return channels_last ? i * c + ch : ((ch / vec) * hw + i) * vec + ch % vec;
  }
};

// Plain [N][C][H][W] -> the kernel's layout.
std::vector<float> to_layout(const std::vector<float>& plain, int64_t c, int64_t hw,
                             const Layout& layout) {
  std::vector<float> out(plain.size());
  const int64_t n = static_cast<int64_t>(plain.size()) / (c * hw);
  for (int64_t image = 0; image < n; ++image) {
    const int64_t base = image * c * hw;
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t i = 0; i < hw; ++i) {
        out[base + layout.at(c, hw, ch, i)] = plain[base + ch * hw + i];
      }
    }
  }
  return out;
}

// Threads the kernel may use (the team's size caps it): 2, so that both of its ways of splitting
// the work over threads run (chunks shared by the team where they are few, one thread's own
// where there are 2 per thread).
constexpr int kThreads = 2;

struct Problem {
  Conv3x3 s;
  Isa isa;
  Layout layout;
  int64_t batch;
  std::vector<float> x, w, bias, u;  // x plain [N][C][H][W], w [M][C][3][3]
  std::vector<float> x_blocked;      // x in the kernel's layout
  std::vector<std::byte> workspace_storage;
  std::byte* workspace;

  Problem(const Case& k, int64_t tile, uint32_t seed, Isa isa_, bool channels_last,
          int64_t batch_size = 1)
      : s(shape_of(k, tile)),
        isa(isa_),
        layout{vector_width(isa_), channels_last},
        batch(batch_size) {
    s.channels_last = channels_last;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    x.resize(static_cast<size_t>(batch * k.c * k.h * k.w));
    w.resize(static_cast<size_t>(k.m * k.c * 9));
    bias.resize(static_cast<size_t>(k.m));
    for (float& v : x) v = uniform(rng);
    for (float& v : w) v = uniform(rng);
    for (float& v : bias) v = uniform(rng);
    x_blocked = to_layout(x, k.c, k.h * k.w, layout);
    u.resize(transformed_weight_count(s));
    transform_weights(s, w.data(), u.data());
    workspace_storage.resize(workspace_bytes(s, batch, isa, kThreads) + 64);
    workspace = workspace_storage.data() +
                (64 - reinterpret_cast<uintptr_t>(workspace_storage.data()) % 64) % 64;
  }
  size_t image_out_size() const { return static_cast<size_t>(s.out_channels * s.out_h * s.out_w); }
  size_t out_size() const { return static_cast<size_t>(batch) * image_out_size(); }
  void run_into(std::vector<float>& y, const Epilogue& e) {
    run(s, batch, x_blocked.data(), u.data(), e, y.data(), workspace, isa, kThreads);
  }
  // Output channel `ch` of pixel `i` of image n (the M output channels of image n at n * M + ..).
  float out_at(const std::vector<float>& y, int64_t n, int64_t ch, int64_t i) const {
    const int64_t hw = s.out_h * s.out_w;
    return y[static_cast<size_t>(n) * image_out_size() + layout.at(s.out_channels, hw, ch, i)];
  }

  // Direct convolution in double; `magnitude` gets bias + sum |x w| per output (an error scale).
  double reference(int64_t n, int64_t m, int64_t oy, int64_t ox, double* magnitude) const {
    double sum = bias[m], abs_sum = std::fabs(bias[m]);
    const float* image = x.data() + n * s.channels * s.in_h * s.in_w;
    for (int64_t c = 0; c < s.channels; ++c) {
      for (int64_t ky = 0; ky < 3; ++ky) {
        for (int64_t kx = 0; kx < 3; ++kx) {
          const int64_t iy = oy - s.pad_top + ky, ix = ox - s.pad_left + kx;
          if (iy < 0 || iy >= s.in_h || ix < 0 || ix >= s.in_w) continue;
          const double term = static_cast<double>(image[(c * s.in_h + iy) * s.in_w + ix]) *
                              w[((m * s.channels + c) * 3 + ky) * 3 + kx];
          sum += term;
          abs_sum += std::fabs(term);
        }
      }
    }
    *magnitude = abs_sum;
    return sum;
  }
};

// Skips the test (with the reason) where this CPU lacks `isa`.
#define KILN_SKIP_WITHOUT(isa)                                                                 \
  do {                                                                                         \
    if (!cpu_has(isa)) {                                                                       \
      GTEST_SKIP() << "this machine has no " << isa_name(isa) << "; that kernel does not run"; \
    }                                                                                          \
  } while (0)

// The ISAs this CPU runs.
std::string layout_name(bool channels_last) { return channels_last ? "nhwc" : "blocked"; }

using Param = std::tuple<Case, Isa, bool, int64_t>;  // shape, ISA, channels last, tile edge

// The error bound of each tile edge, in units of the terms' magnitude (bias + sum |x w|): a few
// f32 roundings for F(2x2); F(4x4)'s transforms scale values by up to 5 and 8 and its weights by
// 1/24, so a few times that (a wrong tap or tile is off by O(1)).
double error_bound(int64_t tile) { return tile == 4 ? 4e-6 : 1e-6; }

class WinogradConvTest : public ::testing::TestWithParam<Param> {};

TEST_P(WinogradConvTest, AgreesWithFloat64DirectConvolution) {
  const auto& [shape, isa, channels_last, tile] = GetParam();
  KILN_SKIP_WITHOUT(isa);
  Problem p(shape, tile, 7, isa, channels_last, /*batch_size=*/2);
  ASSERT_EQ(unsupported_reason(p.s, isa), nullptr);
  std::vector<float> residual(p.out_size());
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  for (float& v : residual) v = uniform(rng);

  for (const kernels::FusedActivation& act :
       {kernels::FusedActivation{}, kernels::FusedActivation{Kind::kRelu},
        kernels::FusedActivation{Kind::kClip, -0.5, 0.75},
        kernels::FusedActivation{.kind = Kind::kLeakyRelu, .alpha = 0.1}}) {
    for (bool accumulate : {false, true}) {
      std::vector<float> y = accumulate ? residual : std::vector<float>(p.out_size(), NAN);
      Epilogue e{p.bias.data(), accumulate, act};
      p.run_into(y, e);
      const int64_t hw = p.s.out_h * p.s.out_w;
      const int64_t m_count = p.s.out_channels * p.batch;  // image n's channel m at n * M + m
      int failures = 0;
      for (int64_t nm = 0; nm < m_count && failures < 5; ++nm) {
        const int64_t n = nm / p.s.out_channels, m = nm % p.s.out_channels;
        for (int64_t i = 0; i < hw && failures < 5; ++i) {
          double magnitude = 0;
          double expected = p.reference(n, m, i / p.s.out_w, i % p.s.out_w, &magnitude);
          if (accumulate) expected += p.out_at(residual, n, m, i);
          if (act.kind == Kind::kRelu) expected = std::max(expected, 0.0);
          if (act.kind == Kind::kClip) expected = std::clamp(expected, act.min, act.max);
          if (act.kind == Kind::kLeakyRelu && expected < 0) expected *= act.alpha;
          const double got = p.out_at(y, n, m, i);
          const double bound = error_bound(tile) * (magnitude + (accumulate ? 4.0 : 0.0));
          if (!(std::fabs(got - expected) <= bound)) {
            ++failures;
            ADD_FAILURE() << "image " << n << ", output channel " << m << ", pixel " << i << " ("
                          << kernels::describe(act) << (accumulate ? ", accumulate" : "")
                          << "): got " << got << ", expected " << expected << " +- " << bound;
          }
        }
      }
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [k, isa, channels_last, tile] = info.param;
  return std::string(isa_name(isa)) + "_" + layout_name(channels_last) + "_f" +
         std::to_string(tile) + "_c" + std::to_string(k.c) + "_" + std::to_string(k.h) + "x" +
         std::to_string(k.w) + "_m" + std::to_string(k.m) + "_pads" + std::to_string(k.pad_top) +
         std::to_string(k.pad_left) + std::to_string(k.pad_bottom) + std::to_string(k.pad_right);
}

// Shapes with channel counts both ISAs take (C a multiple of 16).
const auto kSharedShapes = ::testing::Values(
    Case{16, 8, 8, 16, 1, 1, 1, 1},     // even tiles
    Case{16, 7, 9, 32, 1, 1, 1, 1},     // a half tile at the bottom and right
    Case{16, 1, 1, 16, 1, 1, 1, 1},     // one pixel, one partial tile
    Case{32, 6, 5, 48, 0, 0, 0, 0},     // no padding; 48 outputs: a block of 32 and one of 16
    Case{48, 5, 8, 48, 2, 0, 1, 2},     // uneven pads
    Case{16, 9, 7, 80, 0, 2, 2, 1},     // pads 0 and 2 on each axis; 80 outputs
    Case{128, 7, 7, 64, 1, 1, 1, 1},    // many channels, 16 tiles
    Case{16, 40, 38, 16, 1, 1, 1, 1},   // several chunks of tile blocks
    Case{16, 61, 59, 16, 1, 1, 1, 1});  // chunks enough for one thread each (on 2 threads)

INSTANTIATE_TEST_SUITE_P(Shapes, WinogradConvTest,
                         ::testing::Combine(kSharedShapes,
                                            ::testing::Values(Isa::kAvx2, Isa::kAvx512),
                                            ::testing::Bool(), ::testing::Values(2, 4)),
                         param_name);

// Channel counts only AVX2 takes (multiples of 8).
INSTANTIATE_TEST_SUITE_P(Avx2Shapes, WinogradConvTest,
                         ::testing::Combine(::testing::Values(Case{8, 8, 8, 16, 1, 1, 1, 1},
                                                              Case{24, 6, 5, 16, 0, 0, 0, 0},
                                                              Case{8, 40, 38, 16, 1, 1, 1, 1}),
                                            ::testing::Values(Isa::kAvx2), ::testing::Bool(),
                                            ::testing::Values(2, 4)),
                         param_name);

// Each ISA, layout and tile edge, over all of one test.
class WinogradConvEachIsa : public ::testing::TestWithParam<std::tuple<Isa, bool, int64_t>> {};

// On two threads the first shape's few chunks are shared by the team, the others' chunks are run
// by one thread each, each thread a range of blocks of tiles: the third's (ResNet-50's 28x28
// stage, 49 tiles by F(4x4), 196 by F(2x2)) split where the last block is short.
TEST_P(WinogradConvEachIsa, SameBitsOnOneThreadAndTwo) {
  const auto& [isa, channels_last, tile] = GetParam();
  KILN_SKIP_WITHOUT(isa);
  for (const auto& [k, batch] : {std::pair{Case{32, 23, 17, 48, 1, 1, 1, 1}, 1},
                                 {Case{16, 61, 59, 32, 1, 1, 1, 1}, 3},
                                 {Case{128, 28, 28, 128, 1, 1, 1, 1}, 1}}) {
    Problem p(k, tile, 3, isa, channels_last, batch);
    const Epilogue e{p.bias.data(), false, {Kind::kRelu}};
    const int before = omp_get_max_threads();
    std::vector<float> one(p.out_size()), two(p.out_size());
    omp_set_num_threads(1);
    p.run_into(one, e);
    omp_set_num_threads(2);
    p.run_into(two, e);
    omp_set_num_threads(before);
    EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0)
        << "C " << k.c << ", " << k.h << "x" << k.w << ", batch " << batch;
  }
}

// Invariant 4: an image gets the same bits alone as in a batch, where its tiles share register
// blocks and chunks with other images' (the 7x7 case has 16 tiles per image, not a multiple of
// 6; the 5x9 case 15, not a multiple of 6 or 8; the 40x38 case's batch spans several chunks,
// which on 2 threads are run by one thread each, while the image alone's are shared).
TEST_P(WinogradConvEachIsa, AnImageGetsTheSameBitsAloneAndInABatch) {
  const auto& [isa, channels_last, tile] = GetParam();
  KILN_SKIP_WITHOUT(isa);
  for (const Case& k : {Case{64, 7, 7, 32, 1, 1, 1, 1}, Case{32, 5, 9, 48, 1, 1, 1, 1},
                        Case{16, 40, 38, 16, 1, 1, 1, 1}}) {
    Problem batched(k, tile, 11, isa, channels_last, /*batch_size=*/3);
    const Epilogue e{batched.bias.data(), false, {Kind::kRelu}};
    std::vector<float> all(batched.out_size());
    batched.run_into(all, e);
    for (int64_t n = 0; n < 3; ++n) {
      Problem alone(k, tile, 11, isa, channels_last);
      alone.u = batched.u;  // same weights; the epilogue's bias is batched's
      const size_t in_size = alone.x.size();
      std::copy_n(batched.x_blocked.begin() + n * in_size, in_size, alone.x_blocked.begin());
      std::vector<float> y(alone.out_size());
      alone.run_into(y, e);
      EXPECT_EQ(std::memcmp(y.data(), all.data() + n * alone.out_size(), y.size() * sizeof(float)),
                0)
          << "image " << n << " of C " << k.c << ", " << k.h << "x" << k.w;
    }
  }
}

TEST_P(WinogradConvEachIsa, FusedActivationsKeepNaN) {
  const auto& [isa, channels_last, tile] = GetParam();
  KILN_SKIP_WITHOUT(isa);
  const Case k{16, 6, 6, 32, 1, 1, 1, 1};
  Problem p(k, tile, 5, isa, channels_last);
  // A NaN at input pixel (2, 2) of channel 3 reaches outputs (1..3, 1..3), through every tile
  // that reads it; the tile at the far corner does not read it.
  p.x[(3 * k.h + 2) * k.w + 2] = std::numeric_limits<float>::quiet_NaN();
  p.x_blocked = to_layout(p.x, k.c, k.h * k.w, p.layout);
  for (const kernels::FusedActivation& act :
       {kernels::FusedActivation{Kind::kRelu}, kernels::FusedActivation{Kind::kClip, 0.0, 6.0},
        kernels::FusedActivation{.kind = Kind::kLeakyRelu, .alpha = 0.1}}) {
    for (bool accumulate : {false, true}) {
      std::vector<float> y(p.out_size(), 1.0f);
      p.run_into(y, Epilogue{p.bias.data(), accumulate, act});
      EXPECT_TRUE(std::isnan(p.out_at(y, 0, 0, 2 * 6 + 2))) << kernels::describe(act);
      EXPECT_TRUE(std::isnan(p.out_at(y, 0, 31, 1 * 6 + 3))) << kernels::describe(act);
      EXPECT_FALSE(std::isnan(p.out_at(y, 0, 0, 5 * 6 + 5))) << kernels::describe(act);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, WinogradConvEachIsa,
                         ::testing::Combine(::testing::Values(Isa::kAvx2, Isa::kAvx512),
                                            ::testing::Bool(), ::testing::Values(2, 4)),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  layout_name(std::get<1>(info.param)) + "_f" +
                                  std::to_string(std::get<2>(info.param));
                         });

// The header's promise: each output is the same sequence of operations on every ISA and in both
// layouts, so all give the same bits (shapes with partial tiles and register blocks; both ISAs
// where the CPU has AVX-512), for each tile edge.
class WinogradConvEachTile : public ::testing::TestWithParam<int64_t> {};

TEST_P(WinogradConvEachTile, BothIsasAndLayoutsGiveTheSameBits) {
  KILN_SKIP_WITHOUT(Isa::kAvx2);
  const int64_t tile = GetParam();
  for (const Case& k : {Case{48, 9, 11, 80, 1, 2, 0, 1}, Case{64, 7, 7, 64, 1, 1, 1, 1}}) {
    std::vector<float> first;
    std::string first_name;
    for (Isa isa : runnable_isas()) {
      for (bool channels_last : {false, true}) {
        Problem p(k, tile, 13, isa, channels_last, /*batch_size=*/2);
        std::vector<float> y(p.out_size(), 0.5f), plain(p.out_size());
        p.run_into(y, Epilogue{p.bias.data(), true, {Kind::kRelu}});
        // Back to plain [N][M][H][W] to compare layouts.
        const int64_t hw = p.s.out_h * p.s.out_w;
        for (int64_t n = 0; n < p.batch; ++n) {
          for (int64_t m = 0; m < p.s.out_channels; ++m) {
            for (int64_t i = 0; i < hw; ++i) {
              plain[(n * p.s.out_channels + m) * hw + i] = p.out_at(y, n, m, i);
            }
          }
        }
        const std::string name = std::string(isa_name(isa)) + " " + layout_name(channels_last);
        if (first.empty()) {
          first = plain;
          first_name = name;
        } else {
          EXPECT_EQ(std::memcmp(first.data(), plain.data(), plain.size() * sizeof(float)), 0)
              << name << " against " << first_name << " for C " << k.c << ", " << k.h << "x" << k.w
              << ", M " << k.m;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiles, WinogradConvEachTile, ::testing::Values(2, 4),
                         [](const auto& info) { return "f" + std::to_string(info.param); });

// The tile edge follows products per image and the size of F(4x4)'s transformed weights
// (36 M C floats, at most 10 MiB), as winograd_conv.h says, on ResNet-50's stages.
TEST(WinogradConv, PrefersF4x4WhereItsWeightsFitTenMiB) {
  auto tile_for = [](int64_t channels, int64_t edge) {
    Conv3x3 s;
    s.channels = s.out_channels = channels;
    s.in_h = s.in_w = s.out_h = s.out_w = edge;
    s.pad_top = s.pad_left = 1;
    return preferred_tile(s);
  };
  EXPECT_EQ(tile_for(64, 56), 4);   // 0.6 MiB
  EXPECT_EQ(tile_for(128, 28), 4);  // 2.4 MiB
  EXPECT_EQ(tile_for(256, 14), 4);  // 9 MiB
  EXPECT_EQ(tile_for(272, 14), 2);  // 10.2 MiB
  EXPECT_EQ(tile_for(512, 7), 2);   // 36 MiB
  // A tie in products goes to F(2x2): 5x5 and 6x6 outputs take 9 tiles of 16 or 4 of 36; 8x8
  // takes 16 of 16 or 4 of 36.
  EXPECT_EQ(tile_for(64, 5), 2);
  EXPECT_EQ(tile_for(64, 6), 2);
  EXPECT_EQ(tile_for(64, 8), 4);
}

TEST(WinogradConv, RefusesShapesItCannotRun) {
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    EXPECT_EQ(unsupported_reason(Conv3x3{16, 16, 4, 4, 4, 4, 1, 1}, isa), nullptr);
    EXPECT_STREQ(unsupported_reason(Conv3x3{12, 16, 4, 4, 4, 4, 1, 1}, isa),
                 isa == Isa::kAvx2 ? "input channels not a multiple of 8"
                                   : "input channels not a multiple of 16");
    EXPECT_STREQ(unsupported_reason(Conv3x3{16, 24, 4, 4, 4, 4, 1, 1}, isa),
                 "output channels not a multiple of 16");
    EXPECT_STREQ(unsupported_reason(Conv3x3{16, 16, 4, 4, 4, 4, 3, 1}, isa), "pads not 0..2");
    EXPECT_STREQ(unsupported_reason(Conv3x3{16, 16, 0, 4, 1, 4, 1, 1}, isa), "empty image");
    EXPECT_STREQ(unsupported_reason(Conv3x3{16, 16, 4, 4, 7, 4, 1, 1}, isa),
                 "output larger than the padded input allows");
    EXPECT_EQ(unsupported_reason(Conv3x3{16, 16, 4, 4, 4, 4, 1, 1, false, 4}, isa), nullptr);
    EXPECT_STREQ(unsupported_reason(Conv3x3{16, 16, 4, 4, 4, 4, 1, 1, false, 3}, isa),
                 "tile edge not 2 or 4");
  }
  EXPECT_EQ(unsupported_reason(Conv3x3{8, 16, 4, 4, 4, 4, 1, 1}, Isa::kAvx2), nullptr);
  EXPECT_STREQ(unsupported_reason(Conv3x3{8, 16, 4, 4, 4, 4, 1, 1}, Isa::kAvx512),
               "input channels not a multiple of 16");
}

}  // namespace
}  // namespace kiln::hal::cpu::winograd
