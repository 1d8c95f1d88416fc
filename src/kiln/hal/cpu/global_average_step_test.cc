// GlobalAveragePool on kiln's GlobalAverageStep (global_average_step.h): channels-last data (an
// NHWC graph input relabelled by a Transpose, as a tf2onnx graph or a conv on AVX-512 leaves it)
// and plain data, against a float64 mean; NaN and Inf; a sample's bits at any batch size and team
// size; and the step alone on one tensor in every layout it reads, for the same bits.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/cpu/global_average_step.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

// [N, C, H, W] as GlobalAveragePool sees it, and whether the graph input is NHWC (then relabelled
// to NCHW by a Transpose, so the pool reads channels-last) or NCHW (plain).
struct Pooled {
  ConcreteShape nchw;
  bool channels_last = false;
};

void PrintTo(const Pooled& p, std::ostream* os) {
  *os << (p.channels_last ? "channels last " : "plain ")
      << fmt::format("{}", fmt::join(p.nchw, "x"));
}

ConcreteShape input_shape(const Pooled& p) {
  const ConcreteShape& s = p.nchw;
  return p.channels_last ? ConcreteShape{s[0], s[2], s[3], s[1]} : s;
}

// The graph: [Transpose,] GlobalAveragePool; `pool` is the pool's dispatch index.
SpecBuilder pool_graph(const Pooled& p, size_t& pool) {
  SpecBuilder s;
  int32_t x = s.input("x", input_shape(p));
  if (p.channels_last) {
    const int32_t nchw = s.value("nchw", p.nchw);
    s.dispatch("to_nchw", "Transpose", {x}, {nchw},
               attrs({{"perm", std::vector<int64_t>{0, 3, 1, 2}}}));
    x = nchw;
  }
  const int32_t y = s.output("y", {p.nchw[0], p.nchw[1], 1, 1});
  s.dispatch("pool", "GlobalAveragePool", {x}, {y});
  pool = p.channels_last ? 1 : 0;
  return s;
}

// Runs the graph on `threads` threads; `steps` gets the pool's step descriptions.
StatusOr<Tensor> run_pool(const Pooled& p, const Tensor& x, int threads, std::string* steps) {
  size_t pool = 0;
  SpecBuilder s = pool_graph(p, pool);
  KILN_ASSIGN_OR_RETURN(auto device, create_cpu_device({threads}));
  KILN_ASSIGN_OR_RETURN(auto exe, device->prepare(s.spec()));
  if (steps != nullptr) *steps = fmt::format("{}", fmt::join(exe->describe_dispatch(pool), "\n"));
  KILN_ASSIGN_OR_RETURN(auto out, run_program(*exe, s.spec(), {x}));
  return out[0];
}

// The mean of each (n, c) plane in float64, from the graph input's layout.
std::vector<double> float64_means(const Pooled& p, const Tensor& x) {
  const ConcreteShape& s = p.nchw;
  const int64_t n_count = s[0], channels = s[1], pixels = s[2] * s[3];
  const auto v = x.values<float>();
  std::vector<double> means;
  for (int64_t n = 0; n < n_count; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      double sum = 0;
      for (int64_t q = 0; q < pixels; ++q) {
        sum += p.channels_last ? v[(n * pixels + q) * channels + c]
                               : v[(n * channels + c) * pixels + q];
      }
      means.push_back(sum / static_cast<double>(pixels));
    }
  }
  return means;
}

class GlobalAverageTest : public ::testing::TestWithParam<Pooled> {};

TEST_P(GlobalAverageTest, MatchesAFloat64MeanOnKilnsStep) {
  const Pooled& p = GetParam();
  const Tensor x = random_tensor(input_shape(p), 21, -1.0f, 3.0f);
  std::string steps;
  auto y = run_pool(p, x, 2, &steps);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_NE(steps.find(p.channels_last ? "global average kiln acdb" : "global average kiln plain"),
            std::string::npos)
      << steps;
  expect_close(*y, {p.nchw[0], p.nchw[1], 1, 1}, float64_means(p, x), 1e-6, 1e-5);
}

TEST_P(GlobalAverageTest, ASampleHasTheSameBitsAtAnyBatchSizeAndTeamSize) {
  const Pooled& p = GetParam();
  const Tensor x = random_tensor(input_shape(p), 22);
  auto batch = run_pool(p, x, 2, nullptr);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  for (int64_t n = 0; n < p.nchw[0]; ++n) {
    Pooled one = p;
    one.nchw[0] = 1;
    for (int threads : {1, 2}) {
      auto alone = run_pool(one, slice_batch(x, n), threads, nullptr);
      ASSERT_TRUE(alone.ok()) << alone.status().to_string();
      EXPECT_TRUE(identical(*alone, slice_batch(*batch, n)))
          << "sample " << n << " alone on " << threads << " thread(s)";
    }
  }
}

TEST_P(GlobalAverageTest, NanAndInfinityReachTheirChannelsMeanOnly) {
  const Pooled& p = GetParam();
  Tensor x = random_tensor(input_shape(p), 23);
  const ConcreteShape& s = p.nchw;
  const int64_t channels = s[1], pixels = s[2] * s[3];
  // Element (n = last sample, channel c, pixel q) in the graph input's layout.
  auto at = [&](int64_t c, int64_t q) {
    const int64_t n = s[0] - 1;
    return p.channels_last ? (n * pixels + q) * channels + c : (n * channels + c) * pixels + q;
  };
  auto v = x.mutable_values<float>();
  const float inf = std::numeric_limits<float>::infinity();
  v[at(0, pixels - 1)] = std::numeric_limits<float>::quiet_NaN();
  v[at(1, pixels / 2)] = inf;
  v[at(2, 0)] = inf;
  v[at(2, pixels - 1)] = -inf;
  v[at(3, pixels / 3)] = -inf;
  auto y = run_pool(p, x, 2, nullptr);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const auto got = y->values<float>();
  const int64_t last = (s[0] - 1) * channels;
  EXPECT_TRUE(std::isnan(got[last + 0]));
  EXPECT_EQ(got[last + 1], inf);
  EXPECT_TRUE(std::isnan(got[last + 2]));
  EXPECT_EQ(got[last + 3], -inf);
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
    if (i < last || i >= last + 4) {
      EXPECT_TRUE(std::isfinite(got[i])) << "element " << i;
    }
  }
}

// The step alone on one tensor stored plain, channels last, and blocked by 8 and 16 channels (the
// conv layouts of AVX2 and AVX-512, with padded channels holding garbage): the same bits in each.
TEST(GlobalAverageStepTest, EveryLayoutGivesTheSameBits) {
  using tag = dnnl::memory::format_tag;
  const ConcreteShape shape{2, 21, 23, 19};
  const Tensor x = random_tensor(shape, 24, -2.0f, 2.0f);
  const auto v = x.values<float>();
  const int64_t channels = shape[1], pixels = shape[2] * shape[3];
  std::vector<std::vector<float>> results;
  for (tag layout : {tag::abcd, tag::acdb, tag::aBcd8b, tag::aBcd16b}) {
    const dnnl_desc desc(to_dnnl_dims(shape), dnnl::memory::data_type::f32, layout);
    const std::optional<PlaneWalk> walk = plane_walk(desc);
    ASSERT_TRUE(walk.has_value()) << static_cast<int>(layout);
    // Scatter x into the layout through the walk; padding gets NaN, which no sum may read.
    std::vector<float> stored(desc.get_size() / sizeof(float),
                              std::numeric_limits<float>::quiet_NaN());
    for (int64_t n = 0; n < shape[0]; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t p = 0; p < pixels; ++p) {
          stored[n * walk->sample_stride + c / walk->group * walk->group_stride +
                 c % walk->group * walk->channel_stride + p * walk->pixel_stride] =
              v[(n * channels + c) * pixels + p];
        }
      }
    }
    std::vector<float> partials(GlobalAverageStep::partial_floats(*walk));
    std::vector<float> y(shape[0] * channels);
    GlobalAverageStep step("gap", *walk, BufferRef::at(reinterpret_cast<std::byte*>(stored.data())),
                           BufferRef::at(reinterpret_cast<std::byte*>(partials.data())),
                           BufferRef::at(reinterpret_cast<std::byte*>(y.data())));
    ASSERT_TRUE(step.run(ExecContext{}).ok());
    for (float value : y) ASSERT_TRUE(std::isfinite(value));
    results.push_back(std::move(y));
  }
  for (size_t i = 1; i < results.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[i].data(), results[0].size() * 4))
        << "layout " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GlobalAverageTest,
    // Channels last: 1147 pixels of 40 channels are 3 chunks of up to 409; 7x7 of 1152 channels
    // are 4 chunks of up to 14 pixels; 5x3 of 6 channels are one. Plain: runs of 561 and 7.
    ::testing::Values(Pooled{{3, 40, 31, 37}, true}, Pooled{{2, 1152, 7, 7}, true},
                      Pooled{{2, 6, 5, 3}, true}, Pooled{{2, 5, 33, 17}, false},
                      Pooled{{3, 4, 7, 1}, false}),
    [](const ::testing::TestParamInfo<Pooled>& info) {
      const ConcreteShape& s = info.param.nchw;
      return fmt::format("{}_{}x{}x{}x{}", info.param.channels_last ? "channels_last" : "plain",
                         s[0], s[1], s[2], s[3]);
    });

}  // namespace
}  // namespace kiln::hal::cpu
