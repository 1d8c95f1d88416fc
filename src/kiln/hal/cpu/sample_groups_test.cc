// The sample-group planner (sample_groups.h) on small programs: which runs of dispatches group,
// how a group is trimmed to its large dispatches, what breaks a run, and each value's role.
#include "kiln/hal/cpu/sample_groups.h"

#include <gtest/gtest.h>

#include <limits>

#include "tests/support/hal/program.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using testing::SpecBuilder;

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
const SampleInputs kConvInputs = SampleInputs::at_slots(0b1001);
const SampleInputs kFirstInput = SampleInputs::at_slots(1);

// x[n,4,h,h] -> conv -> relu -> conv(+residual relu) -> add(constant) -> y, every value n x 4 x
// h x h. `inputs` says what the op paths say, per dispatch.
struct Chain {
  SpecBuilder s;
  int32_t x, c1, r, c2, y;
  std::vector<SampleInputs> inputs = {kConvInputs, kFirstInput, kConvInputs, SampleInputs::every()};

  Chain(int64_t n, int64_t h) {
    const ConcreteShape shape = {n, 4, h, h};
    x = s.input("x", shape);
    c1 = s.value("c1", shape);
    r = s.value("r", shape);
    c2 = s.value("c2", shape);
    y = s.output("y", shape);
    const int32_t w = s.constant("w", testing::random_tensor({4, 4, 1, 1}, 1));
    s.dispatch("conv1", "Conv", {x, w}, {c1});
    s.dispatch("relu", "Relu", {c1}, {r});
    s.dispatch("conv2", "Conv", {r, w, -1, c1}, {c2});
    s.dispatch("add", "Add", {c2, s.constant("bias", testing::random_tensor({4, 1, 1}, 2))}, {y});
  }
  SampleGroupPlan plan(uint64_t min_bytes) {
    return plan_sample_groups(s.spec(), inputs, min_bytes);
  }
};

TEST(SampleGroups, AWholeRunGroupsAndItsIntermediatesHoldOneSample) {
  Chain chain(3, 8);
  const SampleGroupPlan plan = chain.plan(0);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0], (SampleGroup{0, 4, 3}));
  EXPECT_EQ(plan.group_of, (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(plan.roles[chain.x], SampleRole::kSliced);  // a graph input, stored whole
  EXPECT_EQ(plan.roles[chain.y], SampleRole::kSliced);  // a graph output, stored whole
  EXPECT_EQ(plan.roles[chain.c1], SampleRole::kInternal);
  EXPECT_EQ(plan.roles[chain.r], SampleRole::kInternal);
  EXPECT_EQ(plan.roles[chain.c2], SampleRole::kInternal);
  // Constants are read whole by every sample.
  for (size_t v = 0; v < chain.s.spec().values.size(); ++v) {
    if (chain.s.spec().values[v].role == ValueRole::kConstant) {
      EXPECT_EQ(plan.roles[v], SampleRole::kWhole) << chain.s.spec().values[v].name;
    }
  }
  EXPECT_EQ(values_sliced_by(chain.s.spec(), chain.inputs, plan, 0),
            (std::vector<int32_t>{chain.x, chain.c1, chain.r, chain.c2, chain.y}));
}

TEST(SampleGroups, NoGroupAtBatchOneOrWhenOff) {
  Chain one(1, 8);
  EXPECT_TRUE(one.plan(0).groups.empty());
  Chain chain(3, 8);
  const SampleGroupPlan off = chain.plan(kNever);
  EXPECT_TRUE(off.groups.empty());
  EXPECT_EQ(off.group_of, (std::vector<int32_t>(4, -1)));
  for (SampleRole role : off.roles) EXPECT_EQ(role, SampleRole::kWhole);
}

TEST(SampleGroups, AGroupNeedsTwoDispatchesFromTheThreshold) {
  // Whole-batch bytes per dispatch at n=2, h=8, in values of 2 KiB: conv1 2 (input, output),
  // relu 2, conv2 3 (input, residual, output), add 2 (the constant does not count).
  Chain chain(2, 8);
  const uint64_t value = 2 * 4 * 8 * 8 * 4;
  const SampleGroupPlan all = chain.plan(2 * value);
  ASSERT_EQ(all.groups.size(), 1u);
  EXPECT_EQ(all.groups[0], (SampleGroup{0, 4, 2}));
  // Only conv2 is large: a group of one is no group.
  EXPECT_TRUE(chain.plan(3 * value).groups.empty());
}

TEST(SampleGroups, AGroupIsTrimmedToItsFirstAndLastLargeDispatch) {
  // relu on 2x8x32x32, max pool to 2x8x8x8, two relus there: only the first two are large.
  SpecBuilder s;
  const int32_t x = s.input("x", {2, 8, 32, 32});
  const int32_t a = s.value("a", {2, 8, 32, 32}), p = s.value("p", {2, 8, 8, 8});
  const int32_t b = s.value("b", {2, 8, 8, 8}), y = s.output("y", {2, 8, 8, 8});
  s.dispatch("relu1", "Relu", {x}, {a});
  s.dispatch("pool", "MaxPool", {a}, {p},
             testing::attrs({{"kernel_shape", std::vector<int64_t>{4, 4}},
                             {"strides", std::vector<int64_t>{4, 4}}}));
  s.dispatch("relu2", "Relu", {p}, {b});
  s.dispatch("relu3", "Relu", {b}, {y});
  const std::vector<SampleInputs> inputs(4, kFirstInput);
  const uint64_t large = 2 * 8 * 32 * 32 * 4;  // one of the large values
  const SampleGroupPlan plan = plan_sample_groups(s.spec(), inputs, large);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0], (SampleGroup{0, 2, 2}));
  EXPECT_EQ(plan.group_of, (std::vector<int32_t>{0, 0, -1, -1}));
  EXPECT_EQ(plan.roles[a], SampleRole::kInternal);
  EXPECT_EQ(plan.roles[p], SampleRole::kSliced);  // read by relu2, after the group
  EXPECT_EQ(plan.roles[b], SampleRole::kWhole);
}

TEST(SampleGroups, AnOpThatMixesSamplesSplitsTheRun) {
  Chain chain(3, 8);
  chain.inputs[1] = SampleInputs::none();
  const SampleGroupPlan plan = chain.plan(0);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0], (SampleGroup{2, 4, 3}));
  EXPECT_EQ(plan.roles[chain.c1], SampleRole::kSliced);  // conv2's residual, made before it
  EXPECT_EQ(plan.roles[chain.r], SampleRole::kSliced);
  EXPECT_EQ(plan.roles[chain.c2], SampleRole::kInternal);
}

TEST(SampleGroups, ComputedWeightsOrBroadcastValuesKeepADispatchOut) {
  // A conv whose weights are computed, and an Add whose second input broadcasts over the batch
  // without being a constant: neither can read its samples alone.
  SpecBuilder s;
  const int32_t x = s.input("x", {3, 4, 8, 8});
  const int32_t w = s.input("w", {4, 4, 1, 1});
  const int32_t shared = s.input("shared", {1, 4, 8, 8});
  const int32_t a = s.value("a", {3, 4, 8, 8}), b = s.value("b", {3, 4, 8, 8});
  const int32_t c = s.value("c", {3, 4, 8, 8}), y = s.output("y", {3, 4, 8, 8});
  s.dispatch("conv", "Conv", {x, w}, {a});
  s.dispatch("relu", "Relu", {a}, {b});
  s.dispatch("add", "Add", {b, shared}, {c});
  s.dispatch("relu2", "Relu", {c}, {y});
  const std::vector<SampleInputs> inputs = {kConvInputs, kFirstInput, SampleInputs::every(),
                                            kFirstInput};
  const SampleGroupPlan plan = plan_sample_groups(s.spec(), inputs, 0);
  EXPECT_TRUE(plan.groups.empty());
  EXPECT_EQ(plan.group_of, (std::vector<int32_t>(4, -1)));
}

TEST(SampleGroups, ADifferentBatchStartsAnotherRun) {
  SpecBuilder s;
  const int32_t x = s.input("x", {3, 4, 8, 8});
  const int32_t a = s.value("a", {3, 4, 8, 8}), b = s.value("b", {3, 4, 8, 8});
  const int32_t y = s.input("y", {5, 4, 8, 8});
  const int32_t c = s.value("c", {5, 4, 8, 8}), d = s.output("d", {5, 4, 8, 8});
  const int32_t out = s.output("out", {3, 4, 8, 8});
  s.dispatch("r1", "Relu", {x}, {a});
  s.dispatch("r2", "Relu", {a}, {b});
  s.dispatch("r3", "Relu", {y}, {c});
  s.dispatch("r4", "Relu", {c}, {d});
  s.dispatch("r5", "Relu", {b}, {out});
  const std::vector<SampleInputs> inputs(5, kFirstInput);
  const SampleGroupPlan plan = plan_sample_groups(s.spec(), inputs, 0);
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0], (SampleGroup{0, 2, 3}));
  EXPECT_EQ(plan.groups[1], (SampleGroup{2, 4, 5}));
  EXPECT_EQ(plan.group_of, (std::vector<int32_t>{0, 0, 1, 1, -1}));
  EXPECT_EQ(plan.roles[a], SampleRole::kInternal);
  EXPECT_EQ(plan.roles[b], SampleRole::kSliced);  // read by r5, after its group
  EXPECT_EQ(plan.roles[out], SampleRole::kWhole);
}

TEST(SampleGroups, DroppingAGroupReturnsItsValuesToWhole) {
  Chain chain(3, 8);
  SampleGroupPlan plan = chain.plan(0);
  ASSERT_EQ(plan.groups.size(), 1u);
  drop_sample_group(chain.s.spec(), chain.inputs, plan, 0);
  EXPECT_TRUE(plan.groups.empty());
  EXPECT_EQ(plan.group_of, (std::vector<int32_t>(4, -1)));
  for (SampleRole role : plan.roles) EXPECT_EQ(role, SampleRole::kWhole);
}

TEST(SampleGroups, DefaultThresholdIsHalfACache) {
  const uint64_t bytes = default_sample_group_bytes();
  EXPECT_GE(bytes, uint64_t{1} << 18);
  EXPECT_LT(bytes, uint64_t{1} << 32);
}

// sysfs's figure where it has one; cpuid's (sysconf) at most 32 MiB, as a hypervisor may report
// the whole package's; 32 MiB where neither says.
TEST(SampleGroups, ThresholdIsHalfTheCacheOneCoreReaches) {
  constexpr uint64_t MiB = uint64_t{1} << 20;
  EXPECT_EQ(sample_group_bytes_for(96 * MiB, 512 * MiB), 48 * MiB);
  EXPECT_EQ(sample_group_bytes_for(8 * MiB, 0), 4 * MiB);
  EXPECT_EQ(sample_group_bytes_for(0, 512 * MiB), 16 * MiB);
  EXPECT_EQ(sample_group_bytes_for(0, 8 * MiB), 4 * MiB);
  EXPECT_EQ(sample_group_bytes_for(0, 0), 16 * MiB);
  EXPECT_EQ(sample_group_bytes_for(0, -1), 16 * MiB);
}

}  // namespace
}  // namespace kiln::hal::cpu
