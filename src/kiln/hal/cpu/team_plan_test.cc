// The one-thread plan of a CPU executable (cpu_executable.h, team_choice.h): which dispatches it
// runs on one thread, that it gives the full team's bits, which oneDNN kinds keep their team,
// and that plans storing values differently are refused.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/hal/cpu/conv_batch_probe.h"
#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/cpu/cpu_executable.h"
#include "kiln/hal/cpu/device_state.h"
#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/hal/cpu/thread_policy.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/team_sizes.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;  // NOLINT: SpecBuilder, run_program

// x [2, 32, 32, 32] -> 3x3 conv -> Relu -> Reshape [2, 32768] -> MatMul with [32768, 64]: four
// dispatches large enough for the full team, on different kernel families.
ProgramSpec four_large_dispatches(SpecBuilder& s) {
  const int32_t x = s.input("x", {2, 32, 32, 32});
  const int32_t w = s.constant("w", random_tensor({32, 32, 3, 3}, 2));
  const int32_t y = s.value("y", {2, 32, 32, 32});
  Attributes pads;
  pads.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  s.dispatch("conv", "Conv", {x, w}, {y}, pads);
  const int32_t r = s.value("r", {2, 32, 32, 32});
  s.dispatch("relu", "Relu", {y}, {r});
  const int32_t shape = s.constant("shape", i64({2}, std::vector<int64_t>{2, 32768}));
  const int32_t flat = s.value("flat", {2, 32768});
  s.dispatch("flatten", "Reshape", {r, shape}, {flat});
  const int32_t m = s.constant("m", random_tensor({32768, 64}, 3));
  const int32_t z = s.output("z", {2, 64});
  s.dispatch("matmul", "MatMul", {flat, m}, {z});
  return s.spec();
}

std::unique_ptr<Executable> prepare_with(const ProgramSpec& spec, int threads, TeamPolicy policy) {
  DeviceOptions options;
  options.threads = threads;
  options.team_policy = policy;
  auto device = create_cpu_device(options);
  EXPECT_TRUE(device.ok()) << device.status().to_string();
  auto exe = (*device)->prepare(spec);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  return std::move(exe).value();
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.byte_size() == b.byte_size() && std::memcmp(a.data(), b.data(), a.byte_size()) == 0;
}

TEST(OneThreadPlan, RunsTheLargeDispatchesOnOneThreadWithTheFullTeamsBits) {
  SpecBuilder s;
  const ProgramSpec spec = four_large_dispatches(s);
  std::vector<int> full_teams;
  for (const DispatchSpec& d : spec.dispatches) {
    full_teams.push_back(dispatch_threads(d, spec.values, 2));
  }
  ASSERT_EQ(full_teams, (std::vector<int>{2, 2, 2, 2})) << "all four are large";

  auto full = prepare_with(spec, 2, TeamPolicy::kFull);
  auto one = prepare_with(spec, 2, TeamPolicy::kOneThread);
  ASSERT_TRUE(full && one);
  auto& one_exe = dynamic_cast<CpuExecutable&>(*one);
  EXPECT_FALSE(dynamic_cast<CpuExecutable&>(*full).build_one_thread_plan())
      << "the full policy allows no one-thread plan";
  EXPECT_EQ(one_exe.one_thread_dispatches(), 0u) << "built when a run first wants it";

  for (uint64_t seed : {7, 8, 9}) {
    const Tensor input = random_tensor({2, 32, 32, 32}, seed);
    TeamSizes full_sizes, one_sizes;
    RunOptions observe_full, observe_one;
    observe_full.observer = &full_sizes;
    observe_one.observer = &one_sizes;
    auto a = run_program(*full, spec, {input}, observe_full);
    auto b = run_program(*one, spec, {input}, observe_one);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(one_exe.last_team(), Team::kOneThread);
    EXPECT_EQ(one_exe.one_thread_dispatches(), 4u);
    EXPECT_EQ(full_sizes.sizes, full_teams);
    EXPECT_EQ(one_sizes.sizes, (std::vector<int>{1, 1, 1, 1}));
    EXPECT_TRUE(same_bytes((*a)[0], (*b)[0])) << "seed " << seed;
    // Unobserved runs too.
    auto c = run_program(*one, spec, {input});
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(same_bytes((*a)[0], (*c)[0])) << "seed " << seed;
  }
}

// DeepLabV3's dilated 3x3 on a 3x4 map: on AVX-512, brgconv blocks it by the team size and the
// one-thread primitive sums in another order (1.2e-6 apart), so the dispatch keeps its full-team
// step (conv_gives_full_team_bits). Fails without that check on such a machine.
TEST(OneThreadPlan, AConvWhoseBitsDependOnTheTeamKeepsTheFullTeam) {
  SpecBuilder s;
  const int32_t x = s.input("x", {1, 480, 3, 4});
  const int32_t w = s.constant("w", random_tensor({64, 480, 3, 3}, 11));
  const int32_t y = s.output("y", {1, 64, 3, 4});
  Attributes a;
  a.set("pads", std::vector<int64_t>{12, 12, 12, 12});
  a.set("dilations", std::vector<int64_t>{12, 12});
  s.dispatch("aspp", "Conv", {x, w}, {y}, a);
  const ProgramSpec& spec = s.spec();
  ASSERT_EQ(dispatch_threads(spec.dispatches[0], spec.values, 2), 2);
  auto full = prepare_with(spec, 2, TeamPolicy::kFull);
  auto one = prepare_with(spec, 2, TeamPolicy::kOneThread);
  ASSERT_TRUE(full && one);
  for (uint64_t seed : {1, 2, 3}) {
    const Tensor input = random_tensor({1, 480, 3, 4}, seed);
    auto a_out = run_program(*full, spec, {input});
    auto b_out = run_program(*one, spec, {input});
    ASSERT_TRUE(a_out.ok() && b_out.ok());
    EXPECT_TRUE(same_bytes((*a_out)[0], (*b_out)[0])) << "seed " << seed;
  }
}

// ResNet-50 v1's stage-3 entry: a 1x1 conv with relu, 512 -> 256 channels, stride 2 onto 14x14
// (196 pixels, past the 64 up to which kiln's gemm runs such convs anyway). Where oneDNN runs it
// as brgconv on channels-last pixels and its one-thread primitive sums in another order than the
// full team's (Zen 5: it does), the conv runs as kiln's gemm over its copied pixels in both plans
// (conv_op.cc, kMaxTeamInvariantPixels); where they agree, it stays on brgconv. Either way the
// one-thread plan runs it on one thread with the full team's bits. Without the rule, the
// one-thread plan kept this dispatch on the full team where they differ.
TEST(OneThreadPlan, AOneByOneConvWhoseBrgconvBitsDependOnTheTeamRunsOnKilnsGemm) {
  SpecBuilder s;
  const int32_t x = s.input("x", {1, 512, 28, 28});
  const int32_t w = s.constant("w", random_tensor({256, 512, 1, 1}, 21));
  const int32_t bias = s.constant("b", random_tensor({256}, 22));
  const int32_t y = s.output("y", {1, 256, 14, 14});
  Attributes a;
  a.set("strides", std::vector<int64_t>{2, 2});
  kernels::set_fused_activation(a, {kernels::FusedActivation::Kind::kRelu});
  s.dispatch("entry", "Conv", {x, w, bias}, {y}, a);
  const ProgramSpec& spec = s.spec();
  ASSERT_EQ(dispatch_threads(spec.dispatches[0], spec.values, 2), 2);

  // oneDNN's primitive for the copied pixels, made under 2 threads and under 1.
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  auto make = [&] {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        dnnl::memory::desc({1, 512, 14, 14}, dt::f32, tag::any),
        dnnl::memory::desc({256, 512, 1, 1}, dt::f32, tag::any),
        dnnl::memory::desc({256}, dt::f32, tag::a),
        dnnl::memory::desc({1, 256, 14, 14}, dt::f32, tag::any), {1, 1}, {0, 0}, {0, 0});
    return dnnl::convolution_forward::primitive_desc(desc, attr, engine);
  };
  bool depends = false;
  {
    const CallerThreads restore;
    use_threads(2);
    const auto full = make();
    const dnnl::memory::desc nhwc({1, 512, 14, 14}, dt::f32, tag::nhwc);
    if (impl_name(full).rfind("brgconv", 0) != 0 || full.src_desc() != nhwc) {
      GTEST_SKIP() << "oneDNN runs " << impl_name(full) << " here, not brgconv on NHWC";
    }
    use_threads(1);
    const auto one = make();
    depends =
        impl_name(one) != impl_name(full) || !conv_gives_full_team_bits(engine, one, full, 2, true);
  }

  auto full = prepare_with(spec, 2, TeamPolicy::kFull);
  auto one = prepare_with(spec, 2, TeamPolicy::kOneThread);
  ASSERT_TRUE(full && one);
  const std::string steps = fmt::format("{}", fmt::join(full->describe_dispatch(0), "\n"));
  EXPECT_EQ(steps.find("kiln_gemm") != std::string::npos, depends) << steps;
  EXPECT_EQ(steps.find("brgconv") != std::string::npos, !depends) << steps;
  for (uint64_t seed : {1, 2}) {
    const Tensor input = random_tensor({1, 512, 28, 28}, seed);
    TeamSizes one_sizes;
    RunOptions observe_one;
    observe_one.observer = &one_sizes;
    auto a_out = run_program(*full, spec, {input});
    auto b_out = run_program(*one, spec, {input}, observe_one);
    ASSERT_TRUE(a_out.ok() && b_out.ok());
    EXPECT_TRUE(same_bytes((*a_out)[0], (*b_out)[0])) << "seed " << seed;
    EXPECT_EQ(one_sizes.sizes, (std::vector<int>{1})) << "seed " << seed;
  }
}

TEST(OneThreadPlan, TheAdaptivePolicyStartsOnTheFullTeam) {
  SpecBuilder s;
  const ProgramSpec spec = four_large_dispatches(s);
  auto exe = prepare_with(spec, 2, TeamPolicy::kAdaptive);
  ASSERT_TRUE(exe);
  auto& cpu = dynamic_cast<CpuExecutable&>(*exe);
  const Tensor input = random_tensor({2, 32, 32, 32}, 5);
  // The first three runs are on the full team whatever the load (team_choice.h: the cold one,
  // then two busy ones before a try): the one-thread plan is not built yet.
  for (int run = 0; run < 3; ++run) {
    ASSERT_TRUE(run_program(*exe, spec, {input}).ok());
    EXPECT_EQ(cpu.last_team(), Team::kFull) << "run " << run;
    EXPECT_EQ(cpu.one_thread_dispatches(), 0u) << "run " << run;
  }
  EXPECT_TRUE(cpu.build_one_thread_plan());
  EXPECT_EQ(cpu.one_thread_dispatches(), 4u);
}

// The copy of the spec the executable keeps holds its own attributes: the one-thread plan is
// built after the caller's spec and attributes are gone.
TEST(OneThreadPlan, IsBuiltFromTheExecutablesOwnCopyOfTheSpec) {
  std::unique_ptr<Executable> exe;
  {
    SpecBuilder s;
    const ProgramSpec spec = four_large_dispatches(s);
    exe = prepare_with(spec, 2, TeamPolicy::kOneThread);
  }  // the builder, its attributes and its constants go
  ASSERT_TRUE(exe);
  auto& cpu = dynamic_cast<CpuExecutable&>(*exe);
  ASSERT_TRUE(cpu.build_one_thread_plan());
  EXPECT_EQ(cpu.one_thread_dispatches(), 4u);
  SpecBuilder again;
  const ProgramSpec same = four_large_dispatches(again);  // same seeds: same constants
  auto full = prepare_with(same, 2, TeamPolicy::kFull);
  const Tensor input = random_tensor({2, 32, 32, 32}, 6);
  auto a = run_program(*full, same, {input});
  auto b = run_program(*exe, same, {input});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(cpu.last_team(), Team::kOneThread);
  EXPECT_TRUE(same_bytes((*a)[0], (*b)[0]));
}

TEST(OneThreadPlan, ADeviceWithOneThreadMakesNone) {
  SpecBuilder s;
  const ProgramSpec spec = four_large_dispatches(s);
  auto exe = prepare_with(spec, 1, TeamPolicy::kOneThread);
  ASSERT_TRUE(exe);
  EXPECT_FALSE(dynamic_cast<CpuExecutable&>(*exe).build_one_thread_plan());
  auto out = run_program(*exe, spec, {random_tensor({2, 32, 32, 32}, 5)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
}

TEST(OneThreadPlan, AProgramWhoseDispatchesAllRunOnOneThreadMakesNone) {
  SpecBuilder s;
  const int32_t x = s.input("x", {1, 8, 8, 8});
  const int32_t y = s.output("y", {1, 8, 8, 8});
  s.dispatch("relu", "Relu", {x}, {y});
  ASSERT_EQ(dispatch_threads(s.spec().dispatches[0], s.spec().values, 2), 1);
  auto exe = prepare_with(s.spec(), 2, TeamPolicy::kOneThread);
  ASSERT_TRUE(exe);
  EXPECT_FALSE(dynamic_cast<CpuExecutable&>(*exe).build_one_thread_plan());
  auto out = run_program(*exe, s.spec(), {random_tensor({1, 8, 8, 8}, 5)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(dynamic_cast<CpuExecutable&>(*exe).last_team(), Team::kFull);
}

TEST(OneThreadPlan, APlanThatStoresValuesDifferentlyIsRefused) {
  auto state = std::make_shared<DeviceState>();
  state->engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
  state->threads = 2;
  SpecBuilder a, b;
  const ProgramSpec spec = four_large_dispatches(a);
  const ProgramSpec other = [&] {
    const int32_t x = b.input("x", {2, 32, 32, 32});
    const int32_t y = b.output("y", {2, 32, 32, 32});
    b.dispatch("relu", "Relu", {x}, {y});
    return b.spec();
  }();
  auto exe = ProgramBuilder(spec, state).build();
  auto plan = ProgramBuilder(other, state, 1).build();
  ASSERT_TRUE(exe.ok() && plan.ok());
  EXPECT_FALSE((*exe)->adopt_one_thread_plan(std::move(plan).value()));
  EXPECT_EQ((*exe)->one_thread_dispatches(), 0u);
}

// oneDNN may split a matrix product's reduction over threads; element-wise kernels never do.
TEST(OneThreadPlan, MatrixProductPrimitivesKeepTheirTeamElementWiseOnesDoNot) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc a({64, 256}, dt::f32, tag::ab), w({256, 64}, dt::f32, tag::ab),
      y({64, 64}, dt::f32, tag::ab);
  dnnl::matmul::primitive_desc matmul(dnnl::matmul::desc(a, w, y), engine);
  EXPECT_FALSE(PrimitiveStep("mm", engine, dnnl::matmul(matmul)).same_bits_at_any_team_size());
  dnnl::inner_product_forward::primitive_desc ip(
      dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, a,
                                        dnnl::memory::desc({64, 256}, dt::f32, tag::ab), y),
      engine);
  EXPECT_FALSE(
      PrimitiveStep("ip", engine, dnnl::inner_product_forward(ip)).same_bits_at_any_team_size());
  dnnl::eltwise_forward::primitive_desc relu(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_relu,
                                  a, 0.f),
      engine);
  EXPECT_TRUE(
      PrimitiveStep("relu", engine, dnnl::eltwise_forward(relu)).same_bits_at_any_team_size());
}

}  // namespace
}  // namespace kiln::hal::cpu
