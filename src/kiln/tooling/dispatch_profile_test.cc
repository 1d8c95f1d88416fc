#include "kiln/tooling/dispatch_profile.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kiln/hal/executable.h"

namespace kiln {
namespace {

// x [1,3,8,8] -conv(w [4,3,3,3])-> y [1,4,6,6] -relu-> z; gemm a [2,5] x b [5,7] -> c.
module::ModuleContents small_module() {
  module::ModuleContents m;
  auto value = [&](const char* name) {
    module::ModuleValue v;
    v.name = name;
    m.values.push_back(v);
    return static_cast<int32_t>(m.values.size() - 1);
  };
  const int32_t x = value("x"), w = value("w"), y = value("y"), z = value("z");
  const int32_t a = value("a"), b = value("b"), c = value("c");
  module::Dispatch conv{"d0_conv", "Conv", {x, w}, {y}, {}, {}};
  module::Dispatch relu{"d1_relu", "Relu", {y}, {z}, {}, {}};
  module::Dispatch gemm{"d2_gemm", "Gemm", {a, b}, {c}, {}, {}};
  m.dispatches = {conv, relu, gemm};
  return m;
}

const std::vector<ConcreteShape> kShapes = {{1, 3, 8, 8}, {4, 3, 3, 3}, {1, 4, 6, 6}, {1, 4, 6, 6},
                                            {2, 5},       {5, 7},       {2, 7}};

TEST(DispatchProfile, FlopsCountMultiplyAddsOfConvAndGemmOnly) {
  std::vector<double> flops = dispatch_flops(small_module(), kShapes);
  ASSERT_EQ(flops.size(), 3u);
  EXPECT_EQ(flops[0], 2.0 * (1 * 4 * 6 * 6) * (3 * 3 * 3));
  EXPECT_EQ(flops[1], 0.0);
  EXPECT_EQ(flops[2], 2.0 * 2 * 7 * 5);
}

TEST(DispatchProfile, MediansTableAndTrace) {
  module::ModuleContents m = small_module();
  DispatchProfiler profiler(m.dispatches.size());
  const double times[3][3] = {{1.0, 0.1, 0.5}, {3.0, 0.2, 0.4}, {2.0, 0.3, 0.6}};
  for (const auto& run : times) {
    profiler.begin_run();
    for (int32_t d = 0; d < 3; ++d) ASSERT_TRUE(profiler.after_dispatch(d, run[d], {}).ok());
  }
  EXPECT_FALSE(profiler.after_dispatch(3, 1.0, {}).ok());
  EXPECT_EQ(profiler.runs(), 3u);
  EXPECT_DOUBLE_EQ(profiler.median_ms(0), 2.0);
  EXPECT_DOUBLE_EQ(profiler.median_ms(1), 0.2);
  EXPECT_DOUBLE_EQ(profiler.median_ms(2), 0.5);
  EXPECT_DOUBLE_EQ(profiler.total_median_ms(), 2.7);

  std::vector<DispatchInfo> info =
      describe_for_profile(m, kShapes, {{"d0_conv (Conv): conv brgconv"}, {}, {}});
  const std::string table = format_dispatch_table(profiler, info);
  // Slowest first: conv, gemm, relu.
  const size_t conv = table.find("d0_conv"), gemm = table.find("d2_gemm"),
               relu = table.find("d1_relu");
  ASSERT_NE(conv, std::string::npos);
  EXPECT_LT(conv, gemm);
  EXPECT_LT(gemm, relu);
  EXPECT_NE(table.find("conv brgconv"), std::string::npos);

  auto rows = nlohmann::json::parse(dispatch_table_json(profiler, info));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["name"], "d0_conv");
  EXPECT_NEAR(rows[0]["gflop_per_s"].get<double>(), 7776.0 / 2e6, 1e-9);

  auto trace = nlohmann::json::parse(chrome_trace_json(profiler, info));
  int complete = 0;
  for (const auto& e : trace["traceEvents"]) complete += e["ph"] == "X" && e["tid"] == 1;
  EXPECT_EQ(complete, 9);
}

// A sample group's line (hal::kSampleGroupLinePrefix) is shown as such, not counted as a step.
TEST(DispatchProfile, ASampleGroupLineIsNoStep) {
  module::ModuleContents m = small_module();
  DispatchProfiler profiler(m.dispatches.size());
  profiler.begin_run();
  for (int32_t d = 0; d < 3; ++d) ASSERT_TRUE(profiler.after_dispatch(d, 1.0 + d, {}).ok());
  const std::string group = std::string(hal::kSampleGroupLinePrefix) +
                            "dispatches 0..1 run one sample at a time, 8 samples";
  std::vector<DispatchInfo> info =
      describe_for_profile(m, kShapes,
                           {{"d0_conv (Conv): conv brgconv", "d0_conv (Conv): reorder x", group},
                            {"d1_relu (Relu): eltwise", group},
                            {}});
  const std::string table = format_dispatch_table(profiler, info);
  EXPECT_NE(table.find("conv brgconv (+1 step(s)) [" + group + "]"), std::string::npos) << table;
  EXPECT_NE(table.find("eltwise [" + group + "]"), std::string::npos) << table;
}

TEST(DispatchProfile, ObservingBeforeBeginRunIsAnError) {
  DispatchProfiler profiler(1);
  EXPECT_FALSE(profiler.after_dispatch(0, 1.0, {}).ok());
}

}  // namespace
}  // namespace kiln
