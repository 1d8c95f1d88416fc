// Convs whose relu, clip or leaky relu runs inside oneDNN's primitive while the input allows it
// (finite_guard.h): an inverted-residual chain (1x1 expansion, strided depthwise conv, 1x1
// projection), whose expansion checks its input and whose depthwise conv is vouched for by the
// expansion's clip. A NaN or a pair of infinities in one sample sends the batch down the plain
// path: that sample's output keeps the NaN (as the float64 reference has it) and every other
// sample keeps the bits it has in a clean run, run as a whole batch or one sample at a time. The
// relu of such a conv vouches for a max pool after it, which then skips its NaN windows, and kiln's
// BatchNormalization vouches for a conv after it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "kiln/hal/cpu/cpu_device.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;
using Kind = kernels::FusedActivation::Kind;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
constexpr int64_t kBatch = 3;

struct ChainCase {
  std::string name;
  kernels::FusedActivation first;  // the expansion's activation; the depthwise conv's is relu6
  bool grouped = false;            // run one sample at a time (sample_groups.h)
};

void PrintTo(const ChainCase& c, std::ostream* os) { *os << c.name; }

const kernels::FusedActivation kRelu6{Kind::kClip, 0.0, 6.0};

// x[3,8,10,10] -> expand 1x1 to 24 (+ first) -> depthwise 3x3 stride 2 (+ relu6) -> project 1x1
// to 8 -> y[3,8,5,5], each conv with a bias.
struct Chain {
  Tensor expand = random_tensor({24, 8, 1, 1}, 41, -0.5f, 0.5f), expand_b = random_tensor({24}, 42);
  Tensor dw = random_tensor({24, 1, 3, 3}, 43, -0.5f, 0.5f), dw_b = random_tensor({24}, 44);
  Tensor project = random_tensor({8, 24, 1, 1}, 45, -0.5f, 0.5f);
  Tensor project_b = random_tensor({8}, 46);
  kernels::FusedActivation first;
  SpecBuilder s;

  explicit Chain(const kernels::FusedActivation& activation) : first(activation) {
    const int32_t x = s.input("x", {kBatch, 8, 10, 10});
    const int32_t expanded = s.value("expanded", {kBatch, 24, 10, 10});
    Attributes a;
    kernels::set_fused_activation(a, first);
    s.dispatch("expand", "Conv", {x, s.constant("ew", expand), s.constant("eb", expand_b)},
               {expanded}, a);
    const int32_t depthwise = s.value("depthwise", {kBatch, 24, 5, 5});
    Attributes d;
    d.set("group", int64_t{24});
    d.set("strides", std::vector<int64_t>{2, 2});
    d.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    kernels::set_fused_activation(d, kRelu6);
    s.dispatch("depthwise", "Conv", {expanded, s.constant("dw", dw), s.constant("db", dw_b)},
               {depthwise}, d);
    const int32_t y = s.output("y", {kBatch, 8, 5, 5});
    s.dispatch("project", "Conv",
               {depthwise, s.constant("pw", project), s.constant("pb", project_b)}, {y});
  }

  // The float64 reference of the chain.
  Tensor reference(const Tensor& x) const {
    ConvRef one;
    one.strides = {1, 1};
    one.dilations = {1, 1};
    one.pads_begin = one.pads_end = {0, 0};
    ConvRef expand_ref = one;
    expand_ref.activation = first;
    ConvRef dw_ref = one;
    dw_ref.strides = {2, 2};
    dw_ref.pads_begin = dw_ref.pads_end = {1, 1};
    dw_ref.group = 24;
    dw_ref.activation = kRelu6;
    const Tensor e = ref_conv(x, expand, &expand_b, nullptr, expand_ref);
    const Tensor d = ref_conv(e, dw, &dw_b, nullptr, dw_ref);
    return ref_conv(d, project, &project_b, nullptr, one);
  }
};

std::unique_ptr<Device> device(bool grouped) {
  DeviceOptions options;
  options.sample_group_bytes = grouped ? 0 : kNever;
  auto d = create_cpu_device(options);
  KILN_CHECK(d.ok());
  return std::move(d).value();
}

int64_t nan_count(const Tensor& t) {
  int64_t n = 0;
  for (float v : t.values<float>()) n += std::isnan(v);
  return n;
}

// The input with sample 1's pixel (4, 5) made NaN in channel 3, or +inf in channel 0 and -inf in
// channel 1 (whose sum is NaN in every output channel whose two weights have one sign).
Tensor poisoned(const Tensor& clean, bool infinities) {
  Tensor x = clean.clone();
  auto v = x.mutable_values<float>();
  const int64_t plane = 10 * 10, sample = 8 * plane, pixel = 4 * 10 + 5;
  if (infinities) {
    v[sample + 0 * plane + pixel] = kInf;
    v[sample + 1 * plane + pixel] = -kInf;
  } else {
    v[sample + 3 * plane + pixel] = kNaN;
  }
  return x;
}

// Runs `exe` on `clean`, then on each of `poisoned` (sample 1 of `clean` with a NaN or infinities
// put in), then on `clean` again: the clean output holds no NaN and matches `reference`; each
// poisoned run's sample 1 holds the reference's NaNs (at least one) and values while samples 0 and
// 2 keep their clean bits; the last run gives the clean bits again.
void expect_only_sample_one_poisoned(Executable& exe, const ProgramSpec& spec, const Tensor& clean,
                                     const std::vector<Tensor>& poisoned,
                                     const std::function<Tensor(const Tensor&)>& reference) {
  auto clean_out = run_program(exe, spec, {clean});
  ASSERT_TRUE(clean_out.ok()) << clean_out.status().to_string();
  EXPECT_EQ(nan_count((*clean_out)[0]), 0);
  EXPECT_TRUE(all_close((*clean_out)[0], reference(clean)));
  for (size_t i = 0; i < poisoned.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "poisoned input " << i);
    auto got = run_program(exe, spec, {poisoned[i]});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const Tensor sample = slice_batch((*got)[0], 1), want = slice_batch(reference(poisoned[i]), 1);
    ASSERT_GT(nan_count(want), 0);
    EXPECT_EQ(nan_count(sample), nan_count(want));
    EXPECT_TRUE(all_close(sample, want));
    for (int64_t n : {0, 2}) {
      EXPECT_TRUE(identical(slice_batch((*got)[0], n), slice_batch((*clean_out)[0], n))) << n;
    }
  }
  auto again = run_program(exe, spec, {clean});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(identical((*again)[0], (*clean_out)[0]));
}

// The case's chain prepared on its device.
class GuardedConvChain : public ::testing::TestWithParam<ChainCase> {
 protected:
  void SetUp() override {
    chain_ = std::make_unique<Chain>(GetParam().first);
    device_ = device(GetParam().grouped);
    auto exe = device_->prepare(chain_->s.spec());
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    exe_ = std::move(exe).value();
  }

  std::unique_ptr<Chain> chain_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Executable> exe_;
};

TEST_P(GuardedConvChain, FusesWhereTheInputAllowsIt) {
  const ChainCase& c = GetParam();
  auto fused = [&](size_t d) {
    const std::string steps = fmt::format("{}", fmt::join(exe_->describe_dispatch(d), "\n"));
    return steps.find("fused while finite") != std::string::npos;
  };
  // The expansion reads a smaller input than it writes: it checks it. The depthwise conv reads
  // more than it writes: only a clip before it (a bound) vouches for its input.
  EXPECT_TRUE(fused(0));
  EXPECT_EQ(fused(1), c.first.kind == Kind::kClip);
  EXPECT_FALSE(fused(2));  // no activation
}

TEST_P(GuardedConvChain, ASampleKeepsItsBitsWhileAnotherHoldsNaNOrInfinities) {
  const Tensor x = random_tensor({kBatch, 8, 10, 10}, 47);
  expect_only_sample_one_poisoned(*exe_, chain_->s.spec(), x,
                                  {poisoned(x, false), poisoned(x, true)},
                                  [&](const Tensor& in) { return chain_->reference(in); });
}

INSTANTIATE_TEST_SUITE_P(
    Activations, GuardedConvChain,
    ::testing::Values(ChainCase{"relu6", kRelu6}, ChainCase{"relu6_grouped", kRelu6, true},
                      ChainCase{"relu", {Kind::kRelu}},
                      ChainCase{"relu_grouped", {Kind::kRelu}, true},
                      ChainCase{"leaky_relu", {.kind = Kind::kLeakyRelu, .alpha = 0.1}},
                      ChainCase{"clip_minus_one_to_two", {Kind::kClip, -1.0, 2.0}, true}),
    [](const ::testing::TestParamInfo<ChainCase>& info) { return info.param.name; });

// A conv's relu vouches for its output when its fused path ran, and a max pool reading it then
// runs oneDNN's max alone, without reading its input (pool_op.cc): x[3,8,10] -> 1-D 1x1 conv to 24
// + relu -> 1-D MaxPool 3 stride 2 pad 1 -> y[3,24,5] (a 2-D pool over a channels-last input runs
// kiln's one-pass kernel instead: max_pool_step_test.cc). A NaN in one sample sends the conv down
// its plain path, whose relu keeps the NaN: the vouch is gone, so the max pool runs its NaN
// windows too and that sample's windows over the NaN are NaN, while the other samples keep their
// bits.
class ReluIntoMaxPool : public ::testing::TestWithParam<bool> {
 protected:
  ReluIntoMaxPool() {
    const int32_t x = s_.input("x", {kBatch, 8, 10});
    const int32_t relu = s_.value("relu", {kBatch, 24, 10});
    Attributes a;
    kernels::set_fused_activation(a, {Kind::kRelu});
    s_.dispatch("conv", "Conv", {x, s_.constant("w", w_), s_.constant("b", b_)}, {relu}, a);
    const int32_t y = s_.output("y", {kBatch, 24, 5});
    Attributes m;
    m.set("kernel_shape", std::vector<int64_t>{3});
    m.set("strides", std::vector<int64_t>{2});
    m.set("pads", std::vector<int64_t>{1, 1});
    s_.dispatch("pool", "MaxPool", {relu}, {y}, m);
  }

  Tensor reference(const Tensor& x) const {
    ConvRef c;
    c.strides = c.dilations = {1};
    c.pads_begin = c.pads_end = {0};
    c.activation = {Kind::kRelu};
    PoolRef p;
    p.kernel = {3};
    p.strides = {2};
    p.pads_begin = p.pads_end = {1};
    p.dilations = {1};
    p.out = {kBatch, 24, 5};
    return ref_pool(ref_conv(x, w_, &b_, nullptr, c), p);
  }

  // The input with sample 1's position 5 made NaN in channel 3.
  static Tensor poisoned(const Tensor& clean) {
    Tensor x = clean.clone();
    x.mutable_values<float>()[8 * 10 + 3 * 10 + 5] = kNaN;
    return x;
  }

  Tensor w_ = random_tensor({24, 8, 1}, 51, -0.5f, 0.5f), b_ = random_tensor({24}, 52);
  SpecBuilder s_;
};

TEST_P(ReluIntoMaxPool, GuardsTheMaxAndKeepsNaNWindowsWhereTheReluFellBack) {
  auto dev = device(GetParam());
  auto prepared = dev->prepare(s_.spec());
  ASSERT_TRUE(prepared.ok()) << prepared.status().to_string();
  Executable& exe = **prepared;
  auto steps = [&](size_t d) {
    return fmt::format("{}", fmt::join(exe.describe_dispatch(d), "\n"));
  };
  EXPECT_NE(steps(0).find("fused while finite"), std::string::npos) << steps(0);
  EXPECT_NE(steps(1).find("else oneDNN's max and kiln's NaN windows"), std::string::npos)
      << steps(1);

  const Tensor x = random_tensor({kBatch, 8, 10}, 53);
  expect_only_sample_one_poisoned(exe, s_.spec(), x, {poisoned(x)},
                                  [&](const Tensor& in) { return reference(in); });
}

INSTANTIATE_TEST_SUITE_P(SampleGroups, ReluIntoMaxPool, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "grouped" : "whole_batch";
                         });

// kiln's BatchNormalization vouches for what it writes (batch_norm_step.h), so a conv that reads
// more than it writes fuses its relu after it, as a ResNet v2 block's first 1x1 conv after its
// pre-activation: x[3,10,10,24] (NHWC, transposed to NCHW: stored channels last, as a conv writes
// it, whatever the ISA) -> BatchNormalization + relu -> 1x1 conv to 8 + relu -> y[3,8,10,10]. A
// NaN, or +inf in two channels (whose sum in the conv is NaN wherever their weights differ in
// sign), in one sample reaches the normalized values and clears the mark: the conv then checks
// its input, takes the plain path and keeps the NaN, and the other samples keep their bits.
class BatchNormIntoShrinkingConv : public ::testing::TestWithParam<bool> {
 protected:
  BatchNormIntoShrinkingConv() {
    const int32_t x = s_.input("x", {kBatch, 10, 10, 24});
    const int32_t wide = s_.value("wide", {kBatch, 24, 10, 10});
    s_.dispatch("to_nchw", "Transpose", {x}, {wide}, attrs({{"perm", kToNchw}}));
    const int32_t normalized = s_.value("normalized", {kBatch, 24, 10, 10});
    Attributes n;
    n.set("epsilon", 1e-3);
    kernels::set_fused_activation(n, {Kind::kRelu});
    s_.dispatch("bn", "BatchNormalization",
                {wide, s_.constant("scale", scale_), s_.constant("shift", shift_),
                 s_.constant("mean", mean_), s_.constant("var", var_)},
                {normalized}, n);
    const int32_t y = s_.output("y", {kBatch, 8, 10, 10});
    Attributes a;
    kernels::set_fused_activation(a, {Kind::kRelu});
    s_.dispatch("shrink", "Conv",
                {normalized, s_.constant("sw", shrink_), s_.constant("sb", shrink_b_)}, {y}, a);
  }

  Tensor reference(const Tensor& x) const {
    const Tensor wide = testing::reference("Transpose", {x}, attrs({{"perm", kToNchw}}));
    const Tensor normalized = ref_batch_norm(wide, scale_, shift_, mean_, var_, 1e-3, true);
    ConvRef c;
    c.strides = c.dilations = {1, 1};
    c.pads_begin = c.pads_end = {0, 0};
    c.activation = {Kind::kRelu};
    return ref_conv(normalized, shrink_, &shrink_b_, nullptr, c);
  }

  // Sample 1's pixel (5, 4) with NaN in channel 3, or +inf in channels 0 and 1.
  static Tensor poisoned(const Tensor& clean, bool infinities) {
    Tensor x = clean.clone();
    auto v = x.mutable_values<float>();
    const int64_t pixel = ((1 * 10 + 5) * 10 + 4) * 24;
    if (infinities) {
      v[pixel + 0] = v[pixel + 1] = kInf;
    } else {
      v[pixel + 3] = kNaN;
    }
    return x;
  }

  const std::vector<int64_t> kToNchw{0, 3, 1, 2};
  Tensor scale_ = random_tensor({24}, 73, 0.5f, 1.5f), shift_ = random_tensor({24}, 74);
  Tensor mean_ = random_tensor({24}, 75), var_ = random_tensor({24}, 76, 0.1f, 2.0f);
  Tensor shrink_ = random_tensor({8, 24, 1, 1}, 77, -0.5f, 0.5f);
  Tensor shrink_b_ = random_tensor({8}, 78);
  SpecBuilder s_;
};

TEST_P(BatchNormIntoShrinkingConv, FusesTheReluAndKeepsNaNWhereTheNormalizedValuesHoldOne) {
  auto dev = device(GetParam());
  auto prepared = dev->prepare(s_.spec());
  ASSERT_TRUE(prepared.ok()) << prepared.status().to_string();
  Executable& exe = **prepared;
  const std::string bn = fmt::format("{}", fmt::join(exe.describe_dispatch(1), "\n"));
  EXPECT_NE(bn.find("batch_norm kiln"), std::string::npos) << bn;
  const std::string shrink = fmt::format("{}", fmt::join(exe.describe_dispatch(2), "\n"));
  EXPECT_NE(shrink.find("fused while finite"), std::string::npos) << shrink;

  const Tensor x = random_tensor({kBatch, 10, 10, 24}, 79);
  expect_only_sample_one_poisoned(exe, s_.spec(), x, {poisoned(x, false), poisoned(x, true)},
                                  [&](const Tensor& in) { return reference(in); });
}

INSTANTIATE_TEST_SUITE_P(SampleGroups, BatchNormIntoShrinkingConv, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "grouped" : "whole_batch";
                         });

}  // namespace
}  // namespace kiln::hal::cpu
