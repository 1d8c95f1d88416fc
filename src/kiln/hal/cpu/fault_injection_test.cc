// KILN_FAULT: parsing (every kind, selectors, malformed values named), and the corruption itself
// on plain and blocked outputs, selected by index, dispatch name, ONNX origin or module index.
#include "kiln/hal/cpu/fault_injection.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "kiln/hal/cpu/cpu_device.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

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

  auto none = parse_fault("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(ParseFault, MalformedValuesAreErrorsNamingKilnFault) {
  for (const char* text : {"nan", "dispatch:3", "dispatch::nan", "dispatch:3:boom", "layer:3:nan",
                           "dispatch:3:perturb=", "dispatch:3:perturb=x", "dispatch:3:perturb=inf",
                           "dispatch:99999999999:nan"}) {
    auto parsed = parse_fault(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("KILN_FAULT='" + std::string(text) + "'"), std::string::npos)
        << parsed.status().to_string();
  }
}

TEST(FaultSpec, MatchesIndexNameOrOrigin) {
  DispatchSpec d;
  d.name = "d5_conv";
  d.origins = {"conv", "bn", "relu"};
  auto spec = [](const char* text) { return parse_fault(text).value().value(); };
  EXPECT_TRUE(spec("dispatch:5:nan").matches(d, 5));
  EXPECT_FALSE(spec("dispatch:5:nan").matches(d, 0));
  d.module_index = 5;  // a dispatch run alone keeps its module index
  EXPECT_TRUE(spec("dispatch:5:nan").matches(d, 0));
  EXPECT_TRUE(spec("dispatch:d5_conv:nan").matches(d, 0));
  EXPECT_TRUE(spec("dispatch:bn:nan").matches(d, 0));
  EXPECT_TRUE(spec("dispatch:relu:nan").matches(d, 0));
  EXPECT_FALSE(spec("dispatch:pool:nan").matches(d, 0));
}

// x -> conv (16 channels from 3: blocked) + relu -> gap -> flatten; all observed through graph
// outputs: the conv and the flatten are outputs, the gap is not.
class FaultRun : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kFaultVariable); }

  StatusOr<std::vector<Tensor>> run(const char* fault, bool conv_plain) {
    if (fault == nullptr) {
      unsetenv(kFaultVariable);
    } else {
      setenv(kFaultVariable, fault, 1);
    }
    SpecBuilder s;
    const int32_t x = s.input("x", {1, 3, 8, 8});
    const int32_t conv = conv_plain ? s.output("conv", {1, 12, 8, 8}) : s.value("conv", {1, 12, 8, 8});
    s.dispatch("d0_conv", "Conv", {x, s.constant("w", w_), s.constant("b", b_)}, {conv},
               attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"kiln_activation", std::string("relu")}}));
    s.spec().dispatches.back().origins = {"onnx_conv", "onnx_relu"};
    const int32_t gap = s.value("gap", {1, 12, 1, 1});
    s.dispatch("d1_gap", "GlobalAveragePool", {conv}, {gap});
    const int32_t flat = s.output("flat", {1, 12});
    s.dispatch("d2_flatten", "Reshape", {gap, s.constant("shape", f32({2}, {0, -1}))}, {flat});
    auto device = create_cpu_device({2});
    KILN_CHECK(device.ok());
    KILN_ASSIGN_OR_RETURN(auto exe, (*device)->prepare(s.spec()));
    return run_program(*exe, s.spec(), {x_});
  }

  Tensor x_ = random_tensor({1, 3, 8, 8}, 11);
  Tensor w_ = random_tensor({12, 3, 3, 3}, 12, -0.3f, 0.3f);
  Tensor b_ = random_tensor({12}, 13, 0.1f, 0.5f);
};

TEST_F(FaultRun, NoMatchingDispatchChangesNothing) {
  auto clean = run(nullptr, true);
  ASSERT_TRUE(clean.ok()) << clean.status().to_string();
  for (const char* fault : {"dispatch:7:nan", "dispatch:other:inf", ""}) {
    auto out = run(fault, true);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(identical((*out)[0], (*clean)[0])) << fault;
    EXPECT_TRUE(identical((*out)[1], (*clean)[1])) << fault;
  }
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

TEST_F(FaultRun, BlockedOutputIsCorruptedThroughAPlainCopy) {
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

TEST_F(FaultRun, MalformedVariableFailsPrepareNamingIt) {
  auto out = run("dispatch:0:explode", true);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().to_string().find("KILN_FAULT"), std::string::npos);
  EXPECT_NE(out.status().to_string().find("explode"), std::string::npos);
}

}  // namespace
}  // namespace kiln::hal::cpu
