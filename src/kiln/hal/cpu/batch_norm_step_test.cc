// kiln's BatchNormalization kernel (batch_norm_step.h): which layouts it takes, its exact
// per-element expression in both channel orders (vector lanes and scalar tails alike), ReLU's NaN
// and -0, and bits that do not depend on the thread count or the batch; the mark it leaves when it
// vouches for its output (finite_guard.h); then that the CPU device runs it for
// BatchNormalization on a plain input.
#include "kiln/hal/cpu/batch_norm_step.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kiln/hal/cpu/cpu_device_for_tests.h"
#include "kiln/hal/cpu/cpu_executable.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;
using Order = ChannelRuns::Order;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(ChannelRunsTest, TakesChannelsLastAndPlainOnly) {
  auto nchw = channel_runs(dnnl_desc({2, 16, 5, 7}, dt::f32, tag::abcd));
  ASSERT_TRUE(nchw.has_value());
  EXPECT_EQ(nchw->order, Order::kChannelOuter);
  EXPECT_EQ(nchw->runs, 32);
  EXPECT_EQ(nchw->run, 35);

  auto nhwc = channel_runs(dnnl_desc({2, 16, 5, 7}, dt::f32, tag::acdb));
  ASSERT_TRUE(nhwc.has_value());
  EXPECT_EQ(nhwc->order, Order::kChannelInnermost);
  EXPECT_EQ(nhwc->runs, 70);
  EXPECT_EQ(nhwc->run, 16);

  auto rows = channel_runs(dnnl_desc({4, 6}, dt::f32, tag::ab));
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->order, Order::kChannelInnermost);
  EXPECT_EQ(rows->runs, 4);

  auto one_channel = channel_runs(dnnl_desc({3, 1, 4}, dt::f32, tag::acb));
  ASSERT_TRUE(one_channel.has_value());
  EXPECT_EQ(one_channel->channels, 1);
  EXPECT_EQ(one_channel->runs * one_channel->run, 12);

  // Blocked (with channel padding), channels outermost (a channel's values split by the batch),
  // other types.
  EXPECT_FALSE(channel_runs(dnnl_desc({2, 12, 5, 5}, dt::f32, tag::aBcd16b)).has_value());
  EXPECT_FALSE(channel_runs(dnnl_desc({2, 16, 5, 7}, dt::f32, tag::bacd)).has_value());
  EXPECT_FALSE(channel_runs(dnnl_desc({2, 16, 5, 7}, dt::f16, tag::abcd)).has_value());
}

struct Params {
  std::vector<float> scale, shift, mean, var;
};

Params params(int64_t channels, uint32_t seed) {
  auto values = [&](uint32_t s, float lo, float hi) {
    const Tensor t = random_tensor({channels}, seed + s, lo, hi);
    const auto v = t.values<float>();
    return std::vector<float>(v.begin(), v.end());
  };
  return Params{values(0, 0.5f, 1.5f), values(1, -1.0f, 1.0f), values(2, -1.0f, 1.0f),
                values(3, 0.1f, 2.0f)};
}

// The header's expression, written out here.
float expected(float x, const Params& p, int64_t c, float epsilon, bool relu) {
  const float a = p.scale[c] / std::sqrt(p.var[c] + epsilon);
  const float y = std::fma(x - p.mean[c], a, p.shift[c]);
  return relu && y < 0.0f ? 0.0f : y;
}

std::vector<float> run_step(const ChannelRuns& runs, const Params& p, std::vector<float> x,
                            float epsilon, bool relu, int threads) {
  std::vector<float> y(x.size(), -7.0f), coefficients(static_cast<size_t>(runs.channels));
  auto at = [](const float* v) {
    return BufferRef::at(reinterpret_cast<std::byte*>(const_cast<float*>(v)));
  };
  BatchNormStep step("bn", runs, epsilon, relu,
                     {at(x.data()), at(p.scale.data()), at(p.shift.data()), at(p.mean.data()),
                      at(p.var.data()), at(y.data()), at(coefficients.data())});
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  ExecContext ctx;
  Status status = step.run(ctx);
  omp_set_num_threads(saved);
  KILN_CHECK(status.ok());
  return y;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Channel counts around the vector width (scalar tails in the channels-last order), runs longer
// than a thread's piece (the plain order), both with and without ReLU, on 1 to 3 threads.
TEST(BatchNormStepTest, EachElementIsTheHeadersExpression) {
  struct Case {
    Order order;
    int64_t channels, spatial, batch;
  };
  for (const Case& k :
       {Case{Order::kChannelInnermost, 5, 9, 2}, Case{Order::kChannelInnermost, 13, 7, 3},
        Case{Order::kChannelInnermost, 64, 300, 2}, Case{Order::kChannelOuter, 3, 150 * 150, 2},
        Case{Order::kChannelOuter, 7, 11, 3}}) {
    const bool innermost = k.order == Order::kChannelInnermost;
    const int64_t total = k.batch * k.channels * k.spatial;
    ChannelRuns runs{k.order, k.channels, innermost ? total / k.channels : k.batch * k.channels,
                     innermost ? k.channels : k.spatial};
    const Params p = params(k.channels, 3);
    const Tensor xt = random_tensor({total}, 9, -3.0f, 3.0f);
    const std::vector<float> x(xt.values<float>().begin(), xt.values<float>().end());
    for (bool relu : {false, true}) {
      SCOPED_TRACE(::testing::Message() << (innermost ? "channels last" : "plain")
                                        << " C=" << k.channels << (relu ? " relu" : ""));
      const std::vector<float> one = run_step(runs, p, x, 1e-3f, relu, 1);
      int64_t mismatches = 0;
      for (int64_t i = 0; i < total; ++i) {
        const int64_t c = innermost ? i % k.channels : (i / k.spatial) % k.channels;
        mismatches += !same_bits(one[i], expected(x[i], p, c, 1e-3f, relu));
      }
      EXPECT_EQ(mismatches, 0);
      for (int threads : {2, 3}) {
        EXPECT_EQ(run_step(runs, p, x, 1e-3f, relu, threads), one) << threads << " threads";
      }
    }
  }
}

// NaN stays NaN through ReLU (oneDNN's max(x, 0) would give 0), -0 stays -0, infinities follow
// the arithmetic, and a NaN parameter makes only its channel NaN.
TEST(BatchNormStepTest, NonFiniteValuesFollowTheArithmetic) {
  const int64_t channels = 10, rows = 3;
  Params p = params(channels, 21);
  p.mean[0] = 0.0f, p.shift[0] = -0.0f;  // channel 0: y = x * a + (-0), so -0 gives -0
  p.var[9] = kNaN;
  std::vector<float> x(static_cast<size_t>(channels * rows), -0.25f);
  x[0] = kNaN, x[10] = -0.0f, x[20] = kInf;
  x[1] = kNaN, x[11] = kInf, x[21] = -kInf;
  ChannelRuns runs{Order::kChannelInnermost, channels, rows, channels};
  const std::vector<float> y = run_step(runs, p, x, 1e-5f, true, 2);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_TRUE(same_bits(y[10], -0.0f)) << y[10];
  EXPECT_EQ(y[20], kInf);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(y[11], kInf);
  EXPECT_EQ(y[21], 0.0f);  // relu(-inf)
  for (int64_t r = 0; r < rows; ++r) EXPECT_TRUE(std::isnan(y[r * channels + 9])) << r;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 2; c < 9; ++c) EXPECT_FALSE(std::isnan(y[r * channels + c])) << r << "," << c;
  }
}

// The mark a step built to vouch for value 0 leaves in ExecContext::vouched (starting from
// `before`), on `threads` threads.
uint8_t vouch_mark(const ChannelRuns& runs, const Params& p, std::vector<float> x, bool relu,
                   int threads, uint8_t before) {
  std::vector<float> y(x.size()), coefficients(static_cast<size_t>(runs.channels));
  auto at = [](const float* v) {
    return BufferRef::at(reinterpret_cast<std::byte*>(const_cast<float*>(v)));
  };
  BatchNormStep step("bn", runs, 0.0f, relu,
                     {at(x.data()), at(p.scale.data()), at(p.shift.data()), at(p.mean.data()),
                      at(p.var.data()), at(y.data()), at(coefficients.data())},
                     /*vouches=*/0);
  uint8_t vouched[1] = {before};
  ExecContext ctx;
  ctx.vouched = vouched;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  Status status = step.run(ctx);
  omp_set_num_threads(saved);
  KILN_CHECK(status.ok());
  return vouched[0];
}

// With scale 1, var 1, mean 0, shift 0 and epsilon 0, y = x: the step marks its output exactly
// when every y is finite with |y| <= kNormalizedBound, wherever the one value outside sits (a
// vector lane, a scalar tail, a run of the plain order, another thread's piece), and clears a mark
// an earlier run left.
TEST(BatchNormStepTest, VouchesExactlyWhenEveryOutputIsWithinTheBound) {
  const float above = std::nextafter(kNormalizedBound, kInf);
  struct Layout {
    const char* name;
    ChannelRuns runs;
  };
  // 13 channels: one 8-lane vector and a tail of 5 per row; plain runs of 3000 floats span pieces.
  const int64_t total = 13 * 3000;
  for (const Layout& l : {Layout{"channels last", {Order::kChannelInnermost, 13, 3000, 13}},
                          Layout{"plain", {Order::kChannelOuter, 13, 13, 3000}}}) {
    Params p{std::vector<float>(13, 1.0f), std::vector<float>(13, 0.0f),
             std::vector<float>(13, 0.0f), std::vector<float>(13, 1.0f)};
    const Tensor xt = random_tensor({total}, 61, -1e6f, 1e6f);
    const std::vector<float> clean(xt.values<float>().begin(), xt.values<float>().end());
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << l.name << ", " << threads << " thread(s)");
      EXPECT_EQ(vouch_mark(l.runs, p, clean, false, threads, 0), 1);
      for (int64_t at : {int64_t{0}, int64_t{7}, int64_t{12}, int64_t{20000}, total - 1}) {
        for (float bad : {kNaN, kInf, -kInf, above, -above}) {
          std::vector<float> x = clean;
          x[static_cast<size_t>(at)] = bad;
          EXPECT_EQ(vouch_mark(l.runs, p, x, false, threads, 1), 0) << at << " holds " << bad;
        }
        std::vector<float> x = clean;
        x[static_cast<size_t>(at)] = -kNormalizedBound;
        EXPECT_EQ(vouch_mark(l.runs, p, x, false, threads, 0), 1) << at;
        // ReLU makes -inf and a large negative value 0, within the bound; NaN stays NaN.
        for (float negative : {-kInf, -above}) {
          x[static_cast<size_t>(at)] = negative;
          EXPECT_EQ(vouch_mark(l.runs, p, x, true, threads, 0), 1) << at << " holds " << negative;
        }
        x[static_cast<size_t>(at)] = kNaN;
        EXPECT_EQ(vouch_mark(l.runs, p, x, true, threads, 1), 0) << at;
      }
    }
  }
}

// BatchNormalization with ReLU on a plain graph input runs kiln's kernel, and sample 1 of a batch
// of 3 has the bits of that sample run alone.
TEST(BatchNormStepTest, TheCpuDeviceRunsItWithBatchInvariantBits) {
  const int64_t c = 6;
  const Tensor x3 = random_tensor({3, c, 4, 5}, 31);
  const Tensor scale = random_tensor({c}, 32, 0.5f, 1.5f), bias = random_tensor({c}, 33);
  const Tensor mean = random_tensor({c}, 34), var = random_tensor({c}, 35, 0.1f, 2.0f);
  auto run = [&](const Tensor& x, std::string* steps) {
    SpecBuilder s;
    const int32_t xi = s.input("x", x.shape());
    const int32_t y = s.output("y", x.shape());
    s.dispatch("bn", "BatchNormalization",
               {xi, s.constant("scale", scale), s.constant("B", bias), s.constant("mean", mean),
                s.constant("var", var)},
               {y}, attrs({{"epsilon", 1e-3}, {"kiln_activation", std::string("relu")}}));
    auto exe = default_cpu_device()->prepare(s.spec());
    KILN_CHECK(exe.ok());
    for (const std::string& line : static_cast<CpuExecutable&>(**exe).summary()) *steps += line;
    auto out = run_program(**exe, s.spec(), {x});
    KILN_CHECK(out.ok());
    return (*out)[0];
  };
  std::string steps;
  const Tensor y3 = run(x3, &steps);
  EXPECT_NE(steps.find("batch_norm kiln"), std::string::npos) << steps;
  EXPECT_TRUE(all_close(y3, ref_batch_norm(x3, scale, bias, mean, var, 1e-3, true)));
  const int64_t per_sample = c * 4 * 5;
  Tensor x1 = random_tensor({1, c, 4, 5}, 0);
  std::memcpy(x1.mutable_values<float>().data(), x3.values<float>().data() + per_sample,
              per_sample * sizeof(float));
  std::string ignored;
  const Tensor y1 = run(x1, &ignored);
  EXPECT_EQ(std::memcmp(y1.values<float>().data(), y3.values<float>().data() + per_sample,
                        per_sample * sizeof(float)),
            0);
}

}  // namespace
}  // namespace kiln::hal::cpu
