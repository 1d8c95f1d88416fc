// The per-dispatch observation hook (hal::RunObserver) on the CPU backend: every dispatch is seen
// once, in order; observed outputs are the plain values the dispatch produced, whatever layout the
// backend chose; observing changes no result; an observer error stops the run naming the dispatch.
#include <gtest/gtest.h>

#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/cpu/cpu_executable.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

std::vector<int64_t> v(std::initializer_list<int64_t> l) { return l; }

// x[2,3,12,12] -> conv(12 channels, blocked and channel-padded) + relu -> maxpool -> gap ->
// flatten (graph output). With `conv_is_output`, the conv's result is a graph output (plain).
struct Net {
  Tensor w = random_tensor({12, 3, 3, 3}, 7, -0.3f, 0.3f);
  Tensor b = random_tensor({12}, 8);
  Tensor shape = i64({2}, std::vector<int64_t>{0, -1});
  SpecBuilder s;

  explicit Net(bool conv_is_output) {
    const int32_t x = s.input("x", {2, 3, 12, 12});
    const int32_t conv =
        conv_is_output ? s.output("conv", {2, 12, 12, 12}) : s.value("conv", {2, 12, 12, 12});
    s.dispatch("d0_conv", "Conv", {x, s.constant("w", w), s.constant("b", b)}, {conv},
               attrs({{"pads", v({1, 1, 1, 1})}, {"kiln_activation", std::string("relu")}}));
    const int32_t pool = s.value("pool", {2, 12, 6, 6});
    s.dispatch("d1_pool", "MaxPool", {conv}, {pool},
               attrs({{"kernel_shape", v({2, 2})}, {"strides", v({2, 2})}}));
    const int32_t gap = s.value("gap", {2, 12, 1, 1});
    s.dispatch("d2_gap", "GlobalAveragePool", {pool}, {gap});
    const int32_t flat = s.output("flat", {2, 12});
    s.dispatch("d3_flatten", "Reshape", {gap, s.constant("shape", shape)}, {flat});
  }
};

class Recorder : public RunObserver {
 public:
  std::vector<int32_t> wanted;  // dispatches whose outputs to keep; empty: none
  std::vector<int32_t> seen;
  std::vector<double> elapsed;
  std::map<int32_t, std::vector<Tensor>> outputs;
  int32_t fail_at = -1;

  bool wants_outputs(int32_t d) override {
    return std::find(wanted.begin(), wanted.end(), d) != wanted.end();
  }
  Status after_dispatch(int32_t d, double ms, std::span<const Tensor> outs) override {
    seen.push_back(d);
    elapsed.push_back(ms);
    outputs[d].assign(outs.begin(), outs.end());
    if (d == fail_at) return invalid_argument("observer stops here");
    return ok_status();
  }
};

std::unique_ptr<Executable> prepare(const ProgramSpec& spec) {
  auto device = create_cpu_device({2});
  KILN_CHECK(device.ok());
  auto exe = (*device)->prepare(spec);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  return exe.ok() ? std::move(exe).value() : nullptr;
}

TEST(RunObserver, SeesEveryDispatchInOrderAndOnlyWantedOutputs) {
  Net net(false);
  auto exe = prepare(net.s.spec());
  ASSERT_NE(exe, nullptr);
  Tensor x = random_tensor({2, 3, 12, 12}, 1);
  Recorder recorder;
  recorder.wanted = {0, 2};
  auto out = run_program(*exe, net.s.spec(), {x}, {.observer = &recorder});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(recorder.seen, (std::vector<int32_t>{0, 1, 2, 3}));
  for (double ms : recorder.elapsed) EXPECT_GE(ms, 0.0);
  ASSERT_EQ(recorder.outputs[0].size(), 1u);
  EXPECT_EQ(recorder.outputs[0][0].shape(), (ConcreteShape{2, 12, 12, 12}));
  EXPECT_TRUE(recorder.outputs[1].empty());
  ASSERT_EQ(recorder.outputs[2].size(), 1u);
  EXPECT_EQ(recorder.outputs[2][0].shape(), (ConcreteShape{2, 12, 1, 1}));
  EXPECT_TRUE(recorder.outputs[3].empty());
}

TEST(RunObserver, BlockedOutputIsHandedOverPlainAndEqualsThePlainBuild) {
  Net observed_net(false), plain_net(true);
  auto observed_exe = prepare(observed_net.s.spec());
  auto plain_exe = prepare(plain_net.s.spec());
  ASSERT_NE(observed_exe, nullptr);
  ASSERT_NE(plain_exe, nullptr);
  auto* cpu = dynamic_cast<CpuExecutable*>(observed_exe.get());
  ASSERT_NE(cpu, nullptr);
  // The conv output stays blocked when nobody needs it plain: the observer must reorder it.
  EXPECT_EQ(cpu->layout_of(1).find("plain"), std::string::npos) << cpu->layout_of(1);

  Tensor x = random_tensor({2, 3, 12, 12}, 2);
  Recorder recorder;
  recorder.wanted = {0, 1, 2, 3};
  auto observed = run_program(*observed_exe, observed_net.s.spec(), {x}, {.observer = &recorder});
  ASSERT_TRUE(observed.ok()) << observed.status().to_string();
  auto plain = run_program(*plain_exe, plain_net.s.spec(), {x});
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_TRUE(identical(recorder.outputs[0][0], (*plain)[0]));
  // The observed graph output is the returned one; observing changed nothing.
  EXPECT_TRUE(identical(recorder.outputs[3][0], (*observed)[0]));
  EXPECT_TRUE(identical((*observed)[0], (*plain)[1]));
  auto unobserved = run_program(*observed_exe, observed_net.s.spec(), {x});
  ASSERT_TRUE(unobserved.ok());
  EXPECT_TRUE(identical((*unobserved)[0], (*observed)[0]));
}

TEST(RunObserver, ErrorStopsTheRunAndNamesTheDispatch) {
  Net net(false);
  auto exe = prepare(net.s.spec());
  ASSERT_NE(exe, nullptr);
  Recorder recorder;
  recorder.fail_at = 1;
  auto out =
      run_program(*exe, net.s.spec(), {random_tensor({2, 3, 12, 12}, 3)}, {.observer = &recorder});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().to_string().find("observer stops here"), std::string::npos);
  EXPECT_NE(out.status().to_string().find("d1_pool"), std::string::npos)
      << out.status().to_string();
  EXPECT_EQ(recorder.seen, (std::vector<int32_t>{0, 1}));
}

TEST(RunObserver, DescribeDispatchListsItsKernels) {
  Net net(false);
  auto exe = prepare(net.s.spec());
  ASSERT_NE(exe, nullptr);
  for (int32_t d = 0; d < 4; ++d) {
    std::vector<std::string> lines = exe->describe_dispatch(d);
    ASSERT_FALSE(lines.empty()) << d;
    for (const std::string& line : lines) {
      EXPECT_EQ(line.find(net.s.spec().dispatches[d].name), 0u) << line;
    }
  }
  EXPECT_TRUE(exe->describe_dispatch(4).empty());
  EXPECT_TRUE(exe->describe_dispatch(-1).empty());
}

}  // namespace
}  // namespace kiln::hal::cpu
