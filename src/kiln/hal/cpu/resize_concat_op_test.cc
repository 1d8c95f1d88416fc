// Resize and Concat on the CPU backend's own kernels (resize_op.cc, concat_op.cc): the portable
// kernel's bits, on a plain graph input and on a convolution's output in the layout the
// convolution left (channels-last on AVX-512, nChw8c under DNNL_MAX_CPU_ISA=AVX2: the suite runs
// on both), and the forms they leave to the portable path.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "kiln/hal/cpu/cpu_device.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/kernels/run_op.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

// Prepares and runs the spec; `steps` receives every dispatch's step descriptions.
std::vector<Tensor> prepare_and_run(SpecBuilder& s, const std::vector<Tensor>& inputs,
                                    std::string& steps) {
  auto device = create_cpu_device({});
  KILN_CHECK(device.ok());
  auto exe = (*device)->prepare(s.spec());
  KILN_CHECK(exe.ok());
  for (size_t d = 0; d < s.spec().dispatches.size(); ++d) {
    steps += fmt::format("{}\n", fmt::join((*exe)->describe_dispatch(d), "\n"));
  }
  auto out = run_program(**exe, s.spec(), inputs);
  KILN_CHECK(out.ok());
  return *out;
}

// x -> Conv (3x3.., pad 1, `channels` out) -> `op` (with the constants `extra` after it; nullopt
// for an absent input) -> y, and the same Conv again -> c as a second output: c is the op's input
// with the bits the first Conv gave it (one program, one kernel), for the reference. Without a
// conv the op reads the graph input x, which is then the second output. `nan` plants a NaN in x.
struct Program {
  std::vector<Tensor> outputs;  // y, then the op's input
  std::string steps;
};

Program run_after(bool after_conv, const ConcreteShape& x_shape, int64_t channels,
                  const std::string& op, const std::vector<std::optional<Tensor>>& extra,
                  const ConcreteShape& y_shape, const Attributes& a, uint32_t seed,
                  bool nan = false) {
  SpecBuilder s;
  Tensor x = random_tensor(x_shape, seed);
  if (nan) x.mutable_values<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  const int32_t xi = s.input("x", x_shape);
  int32_t src = xi;
  ConcreteShape c_shape = x_shape, w_shape{channels, x_shape[1]};
  c_shape[1] = channels;
  for (size_t d = 2; d < x_shape.size(); ++d) w_shape.push_back(3);
  const Tensor w = random_tensor(w_shape, seed + 1);
  const Attributes pads = attrs({{"pads", std::vector<int64_t>(2 * (x_shape.size() - 2), 1)}});
  if (after_conv) {
    src = s.value("c1", c_shape);
    s.dispatch("conv1", "Conv", {xi, s.constant("w1", w)}, {src}, pads);
  }
  std::vector<int32_t> ins{src};
  for (size_t i = 0; i < extra.size(); ++i) {
    ins.push_back(extra[i] ? s.constant(fmt::format("in{}", i + 1), *extra[i]) : -1);
  }
  const int32_t y = s.output("y", y_shape);
  s.dispatch("op", op, ins, {y}, a);
  if (after_conv) {
    const int32_t c = s.output("c", c_shape);
    s.dispatch("conv2", "Conv", {xi, s.constant("w2", w)}, {c}, pads);
  }
  Program p;
  p.outputs = prepare_and_run(s, {x}, p.steps);
  if (!after_conv) p.outputs.push_back(x);
  return p;
}

// The definition's kernel (the portable path) on x with constant roi (when set) and scales.
Tensor portable_resize(const Tensor& x, const std::optional<Tensor>& roi, const Tensor& scales,
                       const Attributes& a) {
  auto out = run_op("Resize", {value(x), roi ? constant(*roi) : absent(), constant(scales)}, a);
  KILN_CHECK(out.ok());
  return (*out)[0];
}

struct ResizeCase {
  std::string name;
  ConcreteShape x;  // [N, C, spatial...]
  std::vector<float> scales;
  Attributes attributes;
};

std::vector<ResizeCase> resize_cases() {
  auto a = [](std::vector<std::pair<std::string, std::string>> kv) {
    Attributes r;
    for (auto& [k, v] : kv) r.set(k, v);
    return r;
  };
  return {
      {"nearest_2x", {2, 16, 5, 6}, {1, 1, 2, 2}, a({{"mode", "nearest"}})},
      {"nearest_asymmetric_floor",
       {1, 16, 7, 5},
       {1, 1, 1.5f, 3},
       a({{"mode", "nearest"},
          {"coordinate_transformation_mode", "asymmetric"},
          {"nearest_mode", "floor"}})},
      {"linear_half_pixel", {2, 16, 6, 7}, {1, 1, 2, 2}, a({{"mode", "linear"}})},
      {"linear_align_corners_down",
       {1, 16, 9, 8},
       {1, 1, 0.5f, 0.75f},
       a({{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}})},
      {"linear_pytorch_half_pixel",
       {1, 24, 5, 5},
       {1, 1, 1.6f, 2},
       a({{"mode", "linear"}, {"coordinate_transformation_mode", "pytorch_half_pixel"}})},
      {"cubic", {1, 16, 6, 5}, {1, 1, 2, 1.5f}, a({{"mode", "cubic"}})},
      {"linear_1d", {2, 16, 9}, {1, 1, 2}, a({{"mode", "linear"}})},
      // Single pixels (a global pooling's output, as in DeepLabV3's head): plain and
      // channels-last store them alike.
      {"nearest_from_single_pixels", {2, 16, 1, 1}, {1, 1, 4, 3}, a({{"mode", "nearest"}})},
      {"linear_from_single_pixels_1d", {1, 2, 1}, {1, 1, 5}, a({{"mode", "linear"}})},
      {"linear_3d", {1, 16, 3, 4, 5}, {1, 1, 2, 2, 2}, a({{"mode", "linear"}})},
  };
}

ConcreteShape resized(const ConcreteShape& x, const std::vector<float>& scales) {
  ConcreteShape out = x;
  for (size_t d = 0; d < x.size(); ++d) {
    out[d] = static_cast<int64_t>(std::floor(static_cast<double>(x[d]) * scales[d]));
  }
  return out;
}

class CpuResizeTest : public ::testing::TestWithParam<std::tuple<ResizeCase, bool>> {};

TEST_P(CpuResizeTest, GivesThePortableKernelsBits) {
  const auto& [c, after_conv] = GetParam();
  const Tensor scales = f32({static_cast<int64_t>(c.scales.size())}, c.scales);
  ConcreteShape x_shape = c.x;
  if (after_conv) x_shape[1] = 3;  // the conv makes c.x's channels
  const Program p = run_after(after_conv, x_shape, c.x[1], "Resize", {std::nullopt, scales},
                              resized(c.x, c.scales), c.attributes, 5, /*nan=*/true);
  EXPECT_NE(p.steps.find("resize kiln"), std::string::npos) << p.steps;
  const Tensor expected = portable_resize(p.outputs[1], std::nullopt, scales, c.attributes);
  EXPECT_TRUE(identical(p.outputs[0], expected)) << p.steps;
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuResizeTest,
                         ::testing::Combine(::testing::ValuesIn(resize_cases()), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param).name +
                                  (std::get<1>(info.param) ? "_after_conv" : "_plain");
                         });

// Resize over the channels, and a crop that leaves the input, run on the portable kernel (with
// its bits).
TEST(CpuResizeTest, OtherFormsRunThePortableKernel) {
  Attributes channels;
  channels.set("mode", std::string("nearest"));
  const Tensor scales = f32({4}, {1, 2, 2, 2});
  const ConcreteShape x{1, 3, 4, 4};
  Program p = run_after(false, x, 0, "Resize", {std::nullopt, scales}, resized(x, {1, 2, 2, 2}),
                        channels, 9);
  EXPECT_EQ(p.steps.find("resize kiln"), std::string::npos) << p.steps;
  EXPECT_TRUE(
      identical(p.outputs[0], portable_resize(p.outputs[1], std::nullopt, scales, channels)));

  Attributes crop;
  crop.set("mode", std::string("linear"));
  crop.set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
  crop.set("extrapolation_value", 7.0);
  const Tensor roi = f32({8}, {0, 0, -0.5, -0.5, 1, 1, 1.5, 1.5});
  const Tensor up = f32({4}, {1, 1, 2, 2});
  p = run_after(false, x, 0, "Resize", {roi, up}, resized(x, {1, 1, 2, 2}), crop, 10);
  EXPECT_EQ(p.steps.find("resize kiln"), std::string::npos) << p.steps;
  EXPECT_TRUE(identical(p.outputs[0], portable_resize(p.outputs[1], roi, up, crop)));
}

struct ConcatCase {
  std::string name;
  std::vector<ConcreteShape> inputs;
  int64_t axis;
};

class CpuConcatTest : public ::testing::TestWithParam<ConcatCase> {};

// Plain graph inputs along every kind of axis.
TEST_P(CpuConcatTest, GivesThePortableKernelsBitsOnGraphInputs) {
  const ConcatCase& c = GetParam();
  SpecBuilder s;
  std::vector<Tensor> xs;
  std::vector<int32_t> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    xs.push_back(random_tensor(c.inputs[i], 20 + static_cast<uint32_t>(i)));
    ins.push_back(s.input(fmt::format("x{}", i), c.inputs[i]));
  }
  const Attributes a = attrs({{"axis", c.axis}});
  const Tensor expected = reference("Concat", xs, a);
  const int32_t y = s.output("y", expected.shape());
  s.dispatch("concat", "Concat", ins, {y}, a);
  std::string steps;
  const auto out = prepare_and_run(s, xs, steps);
  EXPECT_NE(steps.find("concat kiln"), std::string::npos) << steps;
  EXPECT_TRUE(identical(out[0], expected)) << steps;
}

INSTANTIATE_TEST_SUITE_P(
    Axes, CpuConcatTest,
    ::testing::Values(ConcatCase{"rank1", {{3}, {5}}, 0},
                      ConcatCase{"batch", {{1, 4, 3}, {2, 4, 3}}, 0},
                      ConcatCase{"middle", {{2, 3, 4}, {2, 1, 4}, {2, 2, 4}}, 1},
                      ConcatCase{"last_negative", {{2, 3, 4}, {2, 3, 1}}, -1},
                      ConcatCase{"size_one_dims", {{1, 2, 1, 3}, {1, 2, 1, 3}}, 2}),
    [](const auto& info) { return info.param.name; });

// Two convolutions' outputs along the channels, in the layout the convolutions left: channel
// counts that fill the 8- and 16-channel blocks and ones that do not (reordered first), and along
// the height.
TEST(CpuConcatTest, GivesThePortableKernelsBitsOnConvOutputs) {
  struct Case {
    int64_t c1, c2, axis;
  };
  for (const Case k : {Case{16, 32, 1}, Case{8, 24, 1}, Case{5, 3, 1}, Case{16, 16, 2}}) {
    SCOPED_TRACE(fmt::format("{} + {} channels along {}", k.c1, k.c2, k.axis));
    SpecBuilder s;
    const ConcreteShape x_shape{2, 3, 6, 5};
    const Tensor x = random_tensor(x_shape, 31);
    const int32_t xi = s.input("x", x_shape);
    const Attributes pads = attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    std::vector<int32_t> convs, copies;
    for (int64_t ch : {k.c1, k.c2}) {
      const Tensor w = random_tensor({ch, 3, 3, 3}, 32 + static_cast<uint32_t>(ch));
      const int32_t v = s.value(fmt::format("c{}", convs.size()), {2, ch, 6, 5});
      s.dispatch(fmt::format("conv{}", convs.size()), "Conv",
                 {xi, s.constant(fmt::format("w{}", convs.size()), w)}, {v}, pads);
      convs.push_back(v);
    }
    ConcreteShape y_shape{2, k.c1 + k.c2, 6, 5};
    if (k.axis == 2) y_shape = {2, k.c1, 12, 5};
    const Attributes a = attrs({{"axis", k.axis}});
    const int32_t y = s.output("y", y_shape);
    s.dispatch("concat", "Concat", convs, {y}, a);
    // The same convolutions again, as outputs: the reference's inputs.
    size_t i = 0;
    for (int64_t ch : {k.c1, k.c2}) {
      const Tensor w = random_tensor({ch, 3, 3, 3}, 32 + static_cast<uint32_t>(ch));
      const int32_t v = s.output(fmt::format("copy{}", i), {2, ch, 6, 5});
      s.dispatch(fmt::format("again{}", i), "Conv", {xi, s.constant(fmt::format("v{}", i), w)}, {v},
                 pads);
      ++i;
    }
    std::string steps;
    const auto out = prepare_and_run(s, {x}, steps);
    EXPECT_NE(steps.find("concat kiln"), std::string::npos) << steps;
    EXPECT_TRUE(identical(out[0], reference("Concat", {out[1], out[2]}, a))) << steps;
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
