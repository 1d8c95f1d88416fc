// LayerNormalization on kiln's row kernel (layer_norm_op.cc): against the float64 reference
// (the op's definition) over the last axis and the last two, with per-element and single-value
// parameters; a NaN or infinity makes its row NaN and only its row; a row's bits do not depend on
// the number of rows (batch invariance).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/hal/cpu/cpu_device_for_tests.h"
#include "kiln/hal/cpu/cpu_executable.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

struct LnCase {
  ConcreteShape x, scale, bias;  // bias empty: absent
  int64_t axis;
};

// Runs LayerNormalization on the CPU device; `kernel` gets the executable's step summary.
Tensor run_layer_norm(const LnCase& c, const Tensor& x, const Tensor& scale, const Tensor* bias,
                      std::string* kernel = nullptr) {
  SpecBuilder s;
  const int32_t xi = s.input("x", c.x);
  const int32_t si = s.constant("scale", scale);
  std::vector<int32_t> inputs{xi, si};
  if (bias != nullptr) inputs.push_back(s.constant("bias", *bias));
  const int32_t y = s.output("y", c.x);
  Attributes a;
  a.set("axis", c.axis);
  a.set("epsilon", 1e-5);
  s.dispatch("ln", "LayerNormalization", inputs, {y}, a);
  auto exe = default_cpu_device()->prepare(s.spec());
  KILN_CHECK(exe.ok());
  if (kernel != nullptr) {
    for (const std::string& line : static_cast<CpuExecutable&>(**exe).summary()) *kernel += line;
  }
  auto out = run_program(**exe, s.spec(), {x});
  KILN_CHECK(out.ok());
  return (*out)[0];
}

Tensor reference_layer_norm(const LnCase& c, const Tensor& x, const Tensor& scale,
                            const Tensor* bias) {
  Attributes a;
  a.set("axis", c.axis);
  a.set("epsilon", 1e-5);
  return reference("LayerNormalization", {x, scale, bias != nullptr ? *bias : Tensor()}, a);
}

TEST(CpuLayerNormTest, MatchesTheFloat64Reference) {
  const LnCase cases[] = {
      {{2, 5, 768}, {768}, {768}, -1},  // BERT's rows
      {{3, 37}, {37}, {37}, 1},         // a block that is not a multiple of 16
      {{2, 3, 4, 5}, {4, 5}, {}, 2},    // the last two axes, no bias
      {{4, 24}, {1}, {24}, -1},         // a single scale value
      {{6, 16}, {16}, {1}, 1},          // a single bias value
  };
  for (const LnCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "x " << c.x.size() << "-D, axis " << c.axis);
    Tensor x = random_tensor(c.x, 1, -4.0f, 6.0f);
    Tensor scale = random_tensor(c.scale, 2, 0.5f, 1.5f);
    Tensor bias = random_tensor(c.bias.empty() ? ConcreteShape{1} : c.bias, 3);
    const Tensor* b = c.bias.empty() ? nullptr : &bias;
    std::string kernel;
    Tensor got = run_layer_norm(c, x, scale, b, &kernel);
    EXPECT_NE(kernel.find("layer norm kiln"), std::string::npos) << kernel;
    EXPECT_TRUE(all_close(got, reference_layer_norm(c, x, scale, b), {.atol = 2e-6, .rtol = 2e-6}));
  }
}

TEST(CpuLayerNormTest, NanOrInfinityMakesOnlyItsRowNan) {
  const LnCase c{{4, 40}, {40}, {40}, -1};
  Tensor x = random_tensor(c.x, 4);
  x.mutable_values<float>()[1 * 40 + 17] = std::numeric_limits<float>::quiet_NaN();
  x.mutable_values<float>()[3 * 40 + 39] = std::numeric_limits<float>::infinity();
  Tensor scale = random_tensor(c.scale, 5), bias = random_tensor(c.bias, 6);
  Tensor got = run_layer_norm(c, x, scale, &bias);
  auto y = got.values<float>();
  for (size_t i = 0; i < y.size(); ++i) {
    const size_t row = i / 40;
    EXPECT_EQ(std::isnan(y[i]), row == 1 || row == 3) << i;
  }
  EXPECT_TRUE(
      all_close(got, reference_layer_norm(c, x, scale, &bias), {.atol = 2e-6, .rtol = 2e-6}));
}

TEST(CpuLayerNormTest, RowsGetTheSameBitsInAnyBatch) {
  const LnCase big{{67, 100}, {100}, {100}, -1};
  Tensor x = random_tensor(big.x, 7, -3.0f, 3.0f);
  Tensor scale = random_tensor(big.scale, 8), bias = random_tensor(big.bias, 9);
  Tensor all = run_layer_norm(big, x, scale, &bias);
  for (int64_t r : {0, 13, 66}) {
    const LnCase one{{1, 100}, {100}, {100}, -1};
    Tensor row = Tensor::create(DType::kF32, {1, 100}).value();
    std::copy_n(x.values<float>().begin() + r * 100, 100, row.mutable_values<float>().begin());
    Tensor got = run_layer_norm(one, row, scale, &bias);
    EXPECT_TRUE(std::equal(got.values<float>().begin(), got.values<float>().end(),
                           all.values<float>().begin() + r * 100,
                           [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; }))
        << "row " << r;
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
