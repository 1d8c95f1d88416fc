// Sample groups on the CPU backend (sample_groups.h): a network whose convolution chain runs one
// sample at a time gives the bits of the whole-batch run and of each sample alone, in an arena
// the runtime's planner shares between values (poisoned with NaN first); values inside a group
// hold one sample; the one-thread plan keeps the groups; an observed run hands every dispatch's
// outputs whole, in order.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>

#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/cpu/cpu_executable.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

std::vector<int64_t> v(std::initializer_list<int64_t> l) { return l; }

// x[n,3,16,16] -> conv3x3/2 (12 channels, padded blocks on AVX2) + relu -> conv1x1 to 20
// (clip) -> depthwise 3x3 -> conv1x1 to 12 + residual (graph output "features") -> add bias ->
// sigmoid -> mul -> gap -> flatten -> gemm -> softmax. From the first conv to the gap every op
// computes each sample alone; the flatten and what follows do not join a group.
struct Net {
  Tensor stem = random_tensor({12, 3, 3, 3}, 11, -0.3f, 0.3f), stem_b = random_tensor({12}, 12);
  Tensor expand = random_tensor({20, 12, 1, 1}, 13, -0.3f, 0.3f);
  Tensor dw = random_tensor({20, 1, 3, 3}, 14, -0.3f, 0.3f), dw_b = random_tensor({20}, 15);
  Tensor project = random_tensor({12, 20, 1, 1}, 16, -0.3f, 0.3f);
  Tensor bias = random_tensor({12, 1, 1}, 17);
  Tensor fc = random_tensor({5, 12}, 18), flat_shape = i64({2}, std::vector<int64_t>{0, -1});
  SpecBuilder s;
  int32_t relu_out = -1, expanded = -1;

  explicit Net(int64_t n) {
    const int32_t x = s.input("x", {n, 3, 16, 16});
    relu_out = s.value("stem", {n, 12, 8, 8});
    s.dispatch("stem", "Conv", {x, s.constant("stem_w", stem), s.constant("stem_b", stem_b)},
               {relu_out},
               attrs({{"strides", v({2, 2})},
                      {"pads", v({1, 1, 1, 1})},
                      {"kiln_activation", std::string("relu")}}));
    expanded = s.value("expand", {n, 20, 8, 8});
    s.dispatch("expand", "Conv", {relu_out, s.constant("expand_w", expand)}, {expanded},
               attrs({{"kiln_activation", std::string("clip")},
                      {"kiln_activation_min", 0.0},
                      {"kiln_activation_max", 6.0}}));
    const int32_t depthwise = s.value("depthwise", {n, 20, 8, 8});
    s.dispatch("depthwise", "Conv", {expanded, s.constant("dw_w", dw), s.constant("dw_b", dw_b)},
               {depthwise}, attrs({{"group", int64_t{20}}, {"pads", v({1, 1, 1, 1})}}));
    const int32_t features = s.output("features", {n, 12, 8, 8});
    s.dispatch("project", "Conv", {depthwise, s.constant("project_w", project), -1, relu_out},
               {features});
    const int32_t biased = s.value("biased", {n, 12, 8, 8});
    s.dispatch("bias", "Add", {features, s.constant("bias", bias)}, {biased});
    const int32_t gate = s.value("gate", {n, 12, 8, 8});
    s.dispatch("sigmoid", "Sigmoid", {biased}, {gate});
    const int32_t gated = s.value("gated", {n, 12, 8, 8});
    s.dispatch("mul", "Mul", {biased, gate}, {gated});
    const int32_t gap = s.value("gap", {n, 12, 1, 1});
    s.dispatch("gap", "GlobalAveragePool", {gated}, {gap});
    const int32_t flat = s.value("flat", {n, 12});
    s.dispatch("flatten", "Reshape", {gap, s.constant("flat_shape", flat_shape)}, {flat});
    const int32_t logits = s.value("logits", {n, 5});
    s.dispatch("fc", "Gemm", {flat, s.constant("fc_w", fc)}, {logits},
               attrs({{"transB", int64_t{1}}}));
    const int32_t probs = s.output("probs", {n, 5});
    s.dispatch("softmax", "Softmax", {logits}, {probs}, attrs({{"axis", int64_t{1}}}));
  }
};

std::unique_ptr<Device> device(uint64_t sample_group_bytes, TeamPolicy policy = TeamPolicy::kFull) {
  DeviceOptions options;
  options.team_policy = policy;
  options.sample_group_bytes = sample_group_bytes;
  auto d = create_cpu_device(options);
  KILN_CHECK(d.ok());
  return std::move(d).value();
}

std::unique_ptr<CpuExecutable> prepare(Device& dev, const ProgramSpec& spec) {
  auto exe = dev.prepare(spec);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  KILN_CHECK(exe.ok());
  return std::unique_ptr<CpuExecutable>(dynamic_cast<CpuExecutable*>(exe->release()));
}

// The graph outputs of a run as the runtime runs it; empty (and a failure) on an error.
std::vector<Tensor> run(Executable& exe, const ProgramSpec& spec, const Tensor& x,
                        RunObserver* observer = nullptr) {
  auto out = run_program(exe, spec, {x}, {.observer = observer});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? std::move(out).value() : std::vector<Tensor>{};
}

// The network at batch 3 prepared without groups and with every group possible.
struct WholeAndGrouped {
  static constexpr int64_t n = 3;
  Net net{n};
  std::unique_ptr<Device> whole_device = device(kNever), grouped_device = device(0);
  std::unique_ptr<CpuExecutable> whole = prepare(*whole_device, net.s.spec());
  std::unique_ptr<CpuExecutable> grouped = prepare(*grouped_device, net.s.spec());
};

TEST(SampleGroupRun, GivesTheBitsOfTheWholeBatchAndOfEachSampleAlone) {
  WholeAndGrouped both;
  const int64_t n = both.n;
  Net& net = both.net;
  auto &whole = both.whole, &grouped = both.grouped;
  const Tensor x = random_tensor({n, 3, 16, 16}, 5);

  // The group: stem through gap (dispatches 0..7), three samples.
  EXPECT_TRUE(whole->interleaved_dispatches().empty());
  ASSERT_EQ(grouped->interleaved_dispatches(), (std::vector<std::pair<int32_t, int32_t>>{{0, 8}}));
  const std::vector<std::string> lines = grouped->describe_dispatch(1);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "sample group: dispatches 0..7 run one sample at a time, 3 samples");
  EXPECT_EQ(grouped->describe_dispatch(8).back().find("sample group"), std::string::npos);
  // A value made and read inside the group holds one sample; one read after it, all of them.
  EXPECT_EQ(grouped->storage_bytes(net.expanded) * n, whole->storage_bytes(net.expanded));
  EXPECT_EQ(grouped->storage_bytes(net.relu_out) * n, whole->storage_bytes(net.relu_out));

  const std::vector<Tensor> expected = run(*whole, net.s.spec(), x);
  const std::vector<Tensor> got = run(*grouped, net.s.spec(), x);
  expect_same_bits(got, expected, "grouped against whole");
  // Twice in the same arena: nothing of the first run leaks into the second.
  const std::vector<Tensor> again = run(*grouped, net.s.spec(), x);
  expect_same_bits(again, expected, "second grouped run");

  // Each sample alone (batch 1 has no group).
  Net one(1);
  auto alone = prepare(*both.grouped_device, one.s.spec());
  EXPECT_TRUE(alone->interleaved_dispatches().empty());
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<Tensor> sample = run(*alone, one.s.spec(), slice_batch(x, i));
    ASSERT_EQ(sample.size(), got.size());
    for (size_t o = 0; o < sample.size(); ++o) {
      EXPECT_TRUE(identical(slice_batch(got[o], i), sample[o]))
          << "sample " << i << " output " << o;
    }
  }
}

TEST(SampleGroupRun, TheOneThreadPlanKeepsTheGroupsAndTheBits) {
  Net net(4);
  const Tensor x = random_tensor({4, 3, 16, 16}, 6);
  auto full_device = device(0, TeamPolicy::kFull);
  auto one_device = device(0, TeamPolicy::kOneThread);
  auto full = prepare(*full_device, net.s.spec());
  auto one = prepare(*one_device, net.s.spec());
  const std::vector<Tensor> expected = run(*full, net.s.spec(), x);
  const std::vector<Tensor> got = run(*one, net.s.spec(), x);
  expect_same_bits(got, expected, "one-thread plan against the full team");
  EXPECT_EQ(one->interleaved_dispatches(), full->interleaved_dispatches());
}

// Records the order of the calls and every dispatch's outputs.
class Recorder : public RunObserver {
 public:
  std::vector<std::string> calls;
  std::map<int32_t, std::vector<Tensor>> outputs;

  bool wants_outputs(int32_t d) override {
    calls.push_back("wants " + std::to_string(d));
    return true;
  }
  Status after_dispatch(int32_t d, double ms, std::span<const Tensor> outs) override {
    calls.push_back("after " + std::to_string(d));
    if (ms < 0) return invalid_argument("negative time");
    outputs[d].assign(outs.begin(), outs.end());
    return ok_status();
  }
};

TEST(SampleGroupRun, AnObservedRunHandsEachDispatchItsWholeOutputsInOrder) {
  WholeAndGrouped both;
  Net& net = both.net;
  auto &whole = both.whole, &grouped = both.grouped;
  const Tensor x = random_tensor({both.n, 3, 16, 16}, 7);
  Recorder expected, got;
  const std::vector<Tensor> whole_outputs = run(*whole, net.s.spec(), x, &expected);
  const std::vector<Tensor> grouped_outputs = run(*grouped, net.s.spec(), x, &got);
  expect_same_bits(grouped_outputs, whole_outputs, "observed runs");

  // The group's dispatches are asked about first, then each finishes in order; the rest
  // alternate as before.
  std::vector<std::string> order;
  for (int d = 0; d < 8; ++d) order.push_back("wants " + std::to_string(d));
  for (int d = 0; d < 8; ++d) order.push_back("after " + std::to_string(d));
  for (int d = 8; d < 11; ++d) {
    order.push_back("wants " + std::to_string(d));
    order.push_back("after " + std::to_string(d));
  }
  EXPECT_EQ(got.calls, order);
  // Every dispatch's outputs whole, bit for bit those of the whole-batch run (values inside the
  // group are gathered sample by sample before a later dispatch writes over their bytes).
  ASSERT_EQ(got.outputs.size(), expected.outputs.size());
  for (const auto& [d, tensors] : expected.outputs) {
    ASSERT_EQ(got.outputs[d].size(), tensors.size()) << "dispatch " << d;
    for (size_t o = 0; o < tensors.size(); ++o) {
      EXPECT_TRUE(identical(got.outputs[d][o], tensors[o])) << "dispatch " << d << " output " << o;
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
