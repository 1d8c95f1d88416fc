#include "kiln/runtime/stages.h"

#include <gtest/gtest.h>

#include "tests/support/module/module_test_util.h"

namespace kiln::runtime {
namespace {

using module::test_util::sample_contents;
using Ids = std::vector<int32_t>;

// sample_contents: d0 Conv(x=0, w=1, b=2) -> y=3; d1 Reshape(y=3, shape=4) -> z=5;
// d2 Custom(z=5, -, mask=6, flags=7, nothing=9) -> odd=8. Graph inputs 0, 6; outputs 8, 5.
TEST(PlanStages, WithoutDataSymbolsTheModuleIsOneStage) {
  std::vector<Stage> stages = plan_stages(sample_contents());
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(stages[0].first, 0);
  EXPECT_EQ(stages[0].end, 3);
  EXPECT_FALSE(stages[0].binds_data);
  EXPECT_EQ(stages[0].values, (Ids{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(stages[0].inputs, (Ids{0, 6}));
  EXPECT_EQ(stages[0].outputs, (Ids{5, 8}));
}

TEST(PlanStages, ADispatchThatBindsDataStartsAStage) {
  module::ModuleContents m = sample_contents();
  m.dispatches[1].data_symbols = {"count"};
  std::vector<Stage> stages = plan_stages(m);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].end, 1);
  EXPECT_EQ(stages[0].values, (Ids{0, 1, 2, 3}));
  EXPECT_EQ(stages[0].inputs, (Ids{0}));
  EXPECT_EQ(stages[0].outputs, (Ids{3}));  // y crosses into stage 1
  EXPECT_EQ(stages[1].first, 1);
  EXPECT_EQ(stages[1].end, 3);
  EXPECT_TRUE(stages[1].binds_data);
  EXPECT_EQ(stages[1].values, (Ids{3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(stages[1].inputs, (Ids{3, 6}));
  EXPECT_EQ(stages[1].outputs, (Ids{5, 8}));
}

TEST(PlanStages, TheFirstDispatchBindingDataNeedsNoEmptyStageBeforeIt) {
  module::ModuleContents m = sample_contents();
  m.dispatches[0].data_symbols = {"a"};
  m.dispatches[2].data_symbols = {"b"};
  std::vector<Stage> stages = plan_stages(m);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_TRUE(stages[0].binds_data);
  EXPECT_EQ(stages[0].end, 2);
  EXPECT_EQ(stages[0].outputs, (Ids{5}));  // z: a graph output that stage 1 also reads
  EXPECT_EQ(stages[1].inputs, (Ids{5, 6}));
  EXPECT_EQ(stages[1].outputs, (Ids{8}));
}

}  // namespace
}  // namespace kiln::runtime
