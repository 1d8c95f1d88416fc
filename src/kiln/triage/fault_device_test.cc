// Fault injection (fault_spec.h, fault_program.h, fault_device.h): parsing (every kind, selectors,
// malformed values named), and the decorator around real backends: the corruption itself on
// plain and blocked outputs of the CPU backend, selected by index, dispatch name, ONNX origin or
// module index; nothing changes when no dispatch is selected; observers and descriptions see the
// original program; and the same decorator around the null device.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "kiln/hal/host_tensors.h"
#include "kiln/hal/registry.h"
#include "kiln/triage/fault_device.h"
#include "kiln/triage/fault_program.h"
#include "kiln/triage/fault_spec.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/tensors.h"

namespace kiln::triage {
namespace {

using kiln::testing::attrs;
using kiln::testing::i64;
using kiln::testing::identical;
using kiln::testing::random_tensor;
using kiln::testing::run_program;
using kiln::testing::SpecBuilder;

FaultSpec spec_of(const char* text) { return parse_fault(text).value().value(); }

TEST(ParseFault, EveryKindAndSelector) {
  auto nan = parse_fault("dispatch:12:nan");
  ASSERT_TRUE(nan.ok()) << nan.status().to_string();
  ASSERT_TRUE(nan->has_value());
  EXPECT_EQ((*nan)->index, 12);
  EXPECT_EQ((*nan)->kind, FaultSpec::Kind::kNan);

  auto inf = parse_fault("dispatch:resnetv17_conv0_fwd:inf");
  ASSERT_TRUE(inf.ok());
  EXPECT_FALSE((*inf)->index.has_value());
  EXPECT_EQ((*inf)->node, "resnetv17_conv0_fwd");
  EXPECT_EQ((*inf)->kind, FaultSpec::Kind::kInf);

  auto zero = parse_fault("dispatch:a:b:zero");  // node names may hold ':'
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ((*zero)->node, "a:b");
  EXPECT_EQ((*zero)->kind, FaultSpec::Kind::kZero);

  auto perturb = parse_fault("dispatch:3:perturb=-2.5e-3");
  ASSERT_TRUE(perturb.ok());
  EXPECT_EQ((*perturb)->kind, FaultSpec::Kind::kPerturb);
  EXPECT_DOUBLE_EQ((*perturb)->eps, -2.5e-3);
  EXPECT_EQ((*perturb)->kind_text(), "perturb=-0.0025");

  auto by_op = parse_fault("op:HardSigmoid:perturb=0.5");
  ASSERT_TRUE(by_op.ok()) << by_op.status().to_string();
  EXPECT_EQ((*by_op)->op_type, "HardSigmoid");
  EXPECT_EQ((*by_op)->kind, FaultSpec::Kind::kPerturb);

  auto none = parse_fault("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(ParseFault, MalformedValuesAreErrorsNamingKilnFault) {
  for (const char* text : {"nan", "dispatch:3", "dispatch::nan", "dispatch:3:boom", "layer:3:nan",
                           "dispatch:3:perturb=", "dispatch:3:perturb=x", "dispatch:3:perturb=inf",
                           "dispatch:99999999999:nan", "op::nan", "op:Relu", "op:Relu:boom"}) {
    auto parsed = parse_fault(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("KILN_FAULT='" + std::string(text) + "'"),
              std::string::npos)
        << parsed.status().to_string();
  }
}

TEST(FaultSpec, MatchesIndexNameOrOrigin) {
  hal::DispatchSpec d;
  d.name = "d5_conv";
  d.origins = {"conv", "bn", "relu"};
  EXPECT_TRUE(spec_of("dispatch:5:nan").matches(d, 5));
  EXPECT_FALSE(spec_of("dispatch:5:nan").matches(d, 0));
  d.module_index = 5;  // a dispatch run alone keeps its module index
  EXPECT_TRUE(spec_of("dispatch:5:nan").matches(d, 0));
  EXPECT_TRUE(spec_of("dispatch:d5_conv:nan").matches(d, 0));
  EXPECT_TRUE(spec_of("dispatch:bn:nan").matches(d, 0));
  EXPECT_TRUE(spec_of("dispatch:relu:nan").matches(d, 0));
  EXPECT_FALSE(spec_of("dispatch:pool:nan").matches(d, 0));
}

TEST(FaultSpec, OpSelectorMatchesEveryDispatchOfThatOpType) {
  hal::DispatchSpec conv;
  conv.name = "d0";
  conv.op_type = "Conv";
  hal::DispatchSpec relu;
  relu.name = "Conv";  // a dispatch named like the op type is not selected by name
  relu.op_type = "Relu";
  EXPECT_TRUE(spec_of("op:Conv:nan").matches(conv, 0));
  EXPECT_TRUE(spec_of("op:Conv:nan").matches(conv, 7));
  EXPECT_FALSE(spec_of("op:Conv:nan").matches(relu, 0));
  EXPECT_FALSE(spec_of("op:conv:nan").matches(conv, 0));  // op types are case-sensitive
}

// Records what an observer is shown.
class Recorder : public hal::RunObserver {
 public:
  bool wants_outputs(int32_t dispatch) override { return true; }
  Status after_dispatch(int32_t dispatch, double elapsed_ms,
                        std::span<const Tensor> outputs) override {
    seen.push_back(dispatch);
    total_ms += elapsed_ms;
    this->outputs.emplace_back(outputs.begin(), outputs.end());
    return ok_status();
  }
  std::vector<int32_t> seen;
  std::vector<std::vector<Tensor>> outputs;
  double total_ms = 0;
};

// x -> conv (12 channels from 3: blocked unless it is a graph output) + relu -> gap -> flatten;
// the conv and the flatten are graph outputs (or the conv an intermediate), the gap is not.
class FaultRun : public ::testing::Test {
 protected:
  SpecBuilder program(bool conv_plain) {
    SpecBuilder s;
    const int32_t x = s.input("x", {1, 3, 8, 8});
    const int32_t conv =
        conv_plain ? s.output("conv", {1, 12, 8, 8}) : s.value("conv", {1, 12, 8, 8});
    s.dispatch("d0_conv", "Conv", {x, s.constant("w", w_), s.constant("b", b_)}, {conv},
               attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                      {"kiln_activation", std::string("relu")}}));
    s.spec().dispatches.back().origins = {"onnx_conv", "onnx_relu"};
    const int32_t gap = s.value("gap", {1, 12, 1, 1});
    s.dispatch("d1_gap", "GlobalAveragePool", {conv}, {gap});
    const int32_t flat = s.output("flat", {1, 12});
    s.dispatch("d2_flatten", "Reshape",
               {gap, s.constant("shape", i64({2}, std::vector<int64_t>{0, -1}))}, {flat});
    return s;
  }

  StatusOr<std::unique_ptr<hal::Device>> device(const char* fault, const char* backend = "cpu") {
    KILN_ASSIGN_OR_RETURN(auto device, hal::create_device(backend, {2}));
    if (fault == nullptr) return device;
    KILN_ASSIGN_OR_RETURN(std::optional<FaultSpec> spec, parse_fault(fault));
    return hal::create_device(backend, {2}, fault_decorator(spec));
  }

  StatusOr<std::vector<Tensor>> run(const char* fault, bool conv_plain,
                                    hal::RunObserver* observer = nullptr) {
    SpecBuilder s = program(conv_plain);
    KILN_ASSIGN_OR_RETURN(auto dev, device(fault));
    KILN_ASSIGN_OR_RETURN(auto exe, dev->prepare(s.spec()));
    return run_program(*exe, s.spec(), {x_}, {.observer = observer});
  }

  Tensor x_ = random_tensor({1, 3, 8, 8}, 11);
  Tensor w_ = random_tensor({12, 3, 3, 3}, 12, -0.3f, 0.3f);
  Tensor b_ = random_tensor({12}, 13, 0.1f, 0.5f);
};

TEST_F(FaultRun, NoMatchingDispatchChangesNothing) {
  auto clean = run(nullptr, true);
  ASSERT_TRUE(clean.ok()) << clean.status().to_string();
  for (const char* fault : {"dispatch:7:nan", "dispatch:other:inf"}) {
    auto out = run(fault, true);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(identical((*out)[0], (*clean)[0])) << fault;
    EXPECT_TRUE(identical((*out)[1], (*clean)[1])) << fault;
  }
  // Nothing planted: the wrapped device's own executable, not a wrapper.
  SpecBuilder s = program(true);
  ASSERT_FALSE(plant_fault(s.spec(), spec_of("dispatch:7:nan")).value());
}

TEST_F(FaultRun, EachKindOnAPlainOutput) {
  auto clean = run(nullptr, true);
  ASSERT_TRUE(clean.ok());
  auto nan = run("dispatch:0:nan", true);
  ASSERT_TRUE(nan.ok()) << nan.status().to_string();
  for (float x : (*nan)[0].values<float>()) EXPECT_TRUE(std::isnan(x));
  auto inf = run("dispatch:onnx_relu:inf", true);
  ASSERT_TRUE(inf.ok());
  for (float x : (*inf)[0].values<float>()) EXPECT_EQ(x, INFINITY);
  auto zero = run("dispatch:d2_flatten:zero", true);
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(identical((*zero)[0], (*clean)[0]));  // only the flatten is hit
  for (float x : (*zero)[1].values<float>()) EXPECT_EQ(x, 0.0f);
  auto perturb = run("dispatch:0:perturb=0.25", true);
  ASSERT_TRUE(perturb.ok());
  auto got = (*perturb)[0].values<float>();
  auto want = (*clean)[0].values<float>();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i] + 0.25f) << i;
}

TEST_F(FaultRun, BlockedOutputIsCorruptedAsAWhole) {
  auto clean = run(nullptr, false);
  ASSERT_TRUE(clean.ok());
  // The gap averages the perturbed conv output: every channel moves by exactly eps (up to
  // rounding), which padding garbage or a missed reorder would break.
  auto perturb = run("dispatch:onnx_conv:perturb=0.5", false);
  ASSERT_TRUE(perturb.ok()) << perturb.status().to_string();
  auto got = (*perturb)[0].values<float>();
  auto want = (*clean)[0].values<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i] + 0.5f, 1e-5) << i;
  auto nan = run("dispatch:0:nan", false);
  ASSERT_TRUE(nan.ok());
  for (float x : (*nan)[0].values<float>()) EXPECT_TRUE(std::isnan(x));
}

TEST_F(FaultRun, ObserversAndDescriptionsSeeTheOriginalProgram) {
  Recorder clean_seen;
  ASSERT_TRUE(run(nullptr, false, &clean_seen).ok());
  Recorder seen;
  auto out = run("dispatch:d1_gap:perturb=1", false, &seen);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(seen.seen, (std::vector<int32_t>{0, 1, 2}));
  ASSERT_EQ(seen.outputs[1].size(), 1u);
  // The gap's output as observed is after the fault.
  auto got = seen.outputs[1][0].values<float>();
  auto want = clean_seen.outputs[1][0].values<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i] + 1.0f) << i;
  EXPECT_TRUE(identical(seen.outputs[0][0], clean_seen.outputs[0][0]));

  SpecBuilder s = program(false);
  auto dev = device("dispatch:1:nan");
  ASSERT_TRUE(dev.ok());
  auto exe = (*dev)->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  const std::vector<std::string> lines = (*exe)->describe_dispatch(1);
  ASSERT_GE(lines.size(), 2u);
  bool names_fault = false;
  for (const std::string& line : lines)
    names_fault |= line.find("KILN_FAULT=nan") != std::string::npos;
  EXPECT_TRUE(names_fault) << fmt::format("{}", fmt::join(lines, "\n"));
  EXPECT_TRUE((*exe)->describe_dispatch(3).empty());
  EXPECT_EQ((*exe)->storage_bytes(static_cast<int32_t>(s.spec().values.size())), 0u);
}

// A fault planted between the dispatches of a CPU sample group (hal/cpu/sample_groups.h): the
// planted program's groups are reported as the original dispatches that hold them, the run gives
// the faulted bits, and an observer sees every original dispatch once, in order, with its outputs
// whole, though the group asks about all of its dispatches before it runs them.
TEST(FaultInSampleGroup, IsSeenAtItsDispatchWithWholeOutputs) {
  SpecBuilder s;
  const int32_t x = s.input("x", {3, 4, 8, 8});
  const Tensor w = random_tensor({4, 4, 1, 1}, 21, -0.5f, 0.5f);
  std::vector<int32_t> values = {x};
  for (int d = 0; d < 4; ++d) {
    const int32_t out = d == 3 ? s.output("y", {3, 4, 8, 8}) : s.value("v", {3, 4, 8, 8});
    if (d % 2 == 0) {
      s.dispatch(fmt::format("d{}_conv", d), "Conv", {values.back(), s.constant("w", w)}, {out});
    } else {
      s.dispatch(fmt::format("d{}_relu", d), "Relu", {values.back()}, {out});
    }
    values.push_back(out);
  }
  hal::DeviceOptions options;
  options.threads = 2;
  options.sample_group_bytes = 0;
  auto clean_device = hal::create_device("cpu", options);
  auto faulted_device =
      hal::create_device("cpu", options, fault_decorator(spec_of("dispatch:1:perturb=1")));
  ASSERT_TRUE(clean_device.ok() && faulted_device.ok());
  auto clean = (*clean_device)->prepare(s.spec());
  auto faulted = (*faulted_device)->prepare(s.spec());
  ASSERT_TRUE(clean.ok() && faulted.ok()) << faulted.status().to_string();
  using Ranges = std::vector<std::pair<int32_t, int32_t>>;
  EXPECT_EQ((*clean)->interleaved_dispatches(), (Ranges{{0, 4}}));
  // The planted perturbation (an Add of a constant, after d1) joins the group: planted
  // dispatches 0..4 are original dispatches 0..3.
  EXPECT_EQ((*faulted)->interleaved_dispatches(), (Ranges{{0, 4}}));

  const Tensor input = random_tensor({3, 4, 8, 8}, 22);
  Recorder clean_seen, seen;
  auto expected = run_program(**clean, s.spec(), {input}, {.observer = &clean_seen});
  const auto start = std::chrono::steady_clock::now();
  auto got = run_program(**faulted, s.spec(), {input}, {.observer = &seen});
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(expected.ok() && got.ok()) << got.status().to_string();
  // Each dispatch's time counted once: together no more than the run took.
  EXPECT_LE(seen.total_ms, wall_ms);
  EXPECT_EQ(seen.seen, (std::vector<int32_t>{0, 1, 2, 3}));
  ASSERT_EQ(seen.outputs.size(), 4u);
  EXPECT_TRUE(identical(seen.outputs[0][0], clean_seen.outputs[0][0]));
  ASSERT_EQ(seen.outputs[1][0].shape(), (ConcreteShape{3, 4, 8, 8}));
  const auto relu = clean_seen.outputs[1][0].values<float>();
  const auto perturbed = seen.outputs[1][0].values<float>();
  for (size_t i = 0; i < relu.size(); ++i) ASSERT_EQ(perturbed[i], relu[i] + 1.0f) << i;
  EXPECT_FALSE(identical((*got)[0], (*expected)[0]));
  EXPECT_TRUE(identical((*got)[0], seen.outputs[3][0]));
}

TEST_F(FaultRun, WrapsTheNullDeviceToo) {
  SpecBuilder s = program(true);
  auto dev = device("dispatch:0:nan", "null");
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  auto exe = (*dev)->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  std::vector<Tensor> outputs = {Tensor::create(DType::kF32, {1, 12, 8, 8}).value(),
                                 Tensor::create(DType::kF32, {1, 12}).value()};
  Recorder seen;
  ASSERT_TRUE(hal::run_on_host(**dev, **exe, s.spec(), {&x_, 1}, outputs, &seen).ok());
  EXPECT_EQ(seen.seen, (std::vector<int32_t>{0, 1, 2}));
  // The null device computes nothing: the planted Expand too leaves zeros.
  for (float x : outputs[0].values<float>()) EXPECT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace kiln::triage
