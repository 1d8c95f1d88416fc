// Conv on the CPU backend against the naive float64 reference: strides, asymmetric pads,
// dilations, groups, depthwise, bias or not, kiln's residual + relu/clip/leaky relu/silu fusion,
// 1-D/3-D, odd channel counts (padded blocked layouts), and weights that are not constants. 3x3
// stride-1 cases with channel counts that are multiples of 8 (in) and 16 (out) and constant weights
// run by kiln's Winograd kernel where oneDNN would run its AVX2 kernel; the test checks which ran.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/hal/cpu/conv_batch_probe.h"
#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/cpu/device_state.h"
#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/hal/cpu/winograd_conv_op.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

struct ConvCase {
  std::string name;
  ConcreteShape x, w;
  std::vector<int64_t> strides, pads, dilations;  // empty: attribute absent
  int64_t group = 1;
  bool bias = true;
  bool residual = false;
  bool residual_after_activation = false;  // kiln_residual_after_activation
  kernels::FusedActivation activation;
  bool constant_weights = true;
  bool winograd =
      false;  // runs by Winograd where oneDNN uses a layout it takes (winograd_conv_op.h)
};

const kernels::FusedActivation kRelu{kernels::FusedActivation::Kind::kRelu};
const kernels::FusedActivation kRelu6{kernels::FusedActivation::Kind::kClip, 0.0, 6.0};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

ConvCase make_case(std::string name, ConcreteShape x, ConcreteShape w,
                   void (*set)(ConvCase&) = nullptr) {
  ConvCase c;
  c.name = std::move(name);
  c.x = std::move(x);
  c.w = std::move(w);
  if (set) set(c);
  return c;
}

class CpuConvTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(CpuConvTest, MatchesReference) {
  const ConvCase& c = GetParam();
  const size_t r = c.x.size() - 2;
  ConvRef ref;
  ref.strides = c.strides.empty() ? std::vector<int64_t>(r, 1) : c.strides;
  ref.dilations = c.dilations.empty() ? std::vector<int64_t>(r, 1) : c.dilations;
  std::vector<int64_t> pads = c.pads.empty() ? std::vector<int64_t>(2 * r, 0) : c.pads;
  ref.pads_begin.assign(pads.begin(), pads.begin() + r);
  ref.pads_end.assign(pads.begin() + r, pads.end());
  ref.group = c.group;
  ref.activation = c.activation;
  ref.residual_after_activation = c.residual_after_activation;

  Tensor x = random_tensor(c.x, 1);
  Tensor w = random_tensor(c.w, 2);
  Tensor b = random_tensor({c.w[0]}, 3);
  Tensor expected_shape_probe = ref_conv(x, w, nullptr, nullptr, ref);
  Tensor res = random_tensor(expected_shape_probe.shape(), 4);
  Tensor expected = ref_conv(x, w, c.bias ? &b : nullptr, c.residual ? &res : nullptr, ref);

  SpecBuilder s;
  std::vector<Tensor> inputs{x};
  const int32_t xi = s.input("x", c.x);
  int32_t wi;
  if (c.constant_weights) {
    wi = s.constant("w", w);
  } else {
    wi = s.input("w", c.w);
    inputs.push_back(w);
  }
  std::vector<int32_t> ins{xi, wi, c.bias ? s.constant("b", b) : -1};
  if (c.residual) {
    ins.push_back(s.input("res", res.shape()));
    inputs.push_back(res);
  }
  while (!ins.empty() && ins.back() < 0) ins.pop_back();
  const int32_t y = s.output("y", expected.shape());
  Attributes a;
  a.set("group", c.group);
  if (!c.strides.empty()) a.set("strides", c.strides);
  if (!c.pads.empty()) a.set("pads", c.pads);
  if (!c.dilations.empty()) a.set("dilations", c.dilations);
  a.set("kernel_shape", std::vector<int64_t>(c.w.begin() + 2, c.w.end()));
  kernels::set_fused_activation(a, c.activation);
  if (c.residual_after_activation) a.set(kernels::kResidualAfterActivationAttribute, int64_t{1});
  s.dispatch("conv", "Conv", ins, {y}, a);

  auto device = create_cpu_device({});
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  ASSERT_TRUE((*device)->supports(s.spec().dispatches[0], s.spec().values).ok());
  auto exe = (*device)->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = run_program(**exe, s.spec(), inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], expected));

  const std::string steps = fmt::format("{}", fmt::join((*exe)->describe_dispatch(0), "\n"));
  // (Winograd's input channels: a multiple of 8 on AVX2, of 16 on AVX-512.)
  const bool channels_fit = c.x[1] % winograd::vector_width(best_isa()) == 0;
  if (c.winograd && channels_fit && winograd_layout_in(steps)) {
    // By the tile edge kiln prefers for the shape: 4 for 8x8, 7x9 or 4x3 outputs, 2 for 6x6.
    winograd::Conv3x3 shape;
    shape.channels = c.x[1];
    shape.out_channels = c.w[0];
    shape.out_h = expected.shape()[2];
    shape.out_w = expected.shape()[3];
    const int64_t tile = winograd::preferred_tile(shape);
    EXPECT_NE(steps.find(fmt::format("conv winograd_{0}x{0}_3x3", tile)), std::string::npos)
        << steps;
  } else {
    EXPECT_EQ(steps.find("winograd"), std::string::npos) << steps;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuConvTest,
    ::testing::Values(
        make_case("basic_3x3", {2, 16, 8, 8}, {16, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.winograd = true;
                  }),
        make_case("stride2_asymmetric_pads", {2, 8, 9, 10}, {24, 8, 3, 3},
                  [](ConvCase& c) {
                    c.strides = {2, 2};
                    c.pads = {0, 1, 1, 2};
                  }),
        make_case("dilation2", {1, 16, 12, 12}, {8, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {2, 2, 2, 2};
                    c.dilations = {2, 2};
                  }),
        make_case("dilation_stride_mixed", {2, 8, 13, 11}, {16, 8, 3, 2},
                  [](ConvCase& c) {
                    c.strides = {2, 1};
                    c.pads = {1, 0, 2, 1};
                    c.dilations = {1, 3};
                  }),
        make_case("group4", {2, 16, 7, 7}, {32, 4, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.group = 4;
                  }),
        make_case("depthwise", {2, 32, 9, 9}, {32, 1, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.group = 32;
                  }),
        make_case("depthwise_stride2", {1, 24, 10, 10}, {24, 1, 3, 3},
                  [](ConvCase& c) {
                    c.strides = {2, 2};
                    c.pads = {1, 1, 0, 0};
                    c.group = 24;
                  }),
        make_case("pointwise_no_bias", {2, 64, 6, 6}, {32, 64, 1, 1},
                  [](ConvCase& c) { c.bias = false; }),
        make_case("residual_relu", {2, 16, 8, 8}, {16, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.winograd = true;
                    c.residual = true;
                    c.activation = kRelu;
                  }),
        make_case("residual_only", {1, 8, 6, 6}, {16, 8, 1, 1},
                  [](ConvCase& c) { c.residual = true; }),
        make_case("pointwise_strides_2_3_residual_relu", {2, 32, 9, 8}, {48, 32, 1, 1},
                  [](ConvCase& c) {
                    c.strides = {2, 3};
                    c.residual = true;
                    c.activation = kRelu;
                  }),
        make_case("pointwise_stride2_conv1d", {3, 16, 11}, {8, 16, 1},
                  [](ConvCase& c) { c.strides = {2}; }),
        make_case("single_pixel_relu", {3, 64, 1, 1}, {16, 64, 1, 1},
                  [](ConvCase& c) { c.activation = kRelu; }),
        make_case("single_pixel_residual_runtime_weights", {2, 24, 1}, {40, 24, 1},
                  [](ConvCase& c) {
                    c.residual = true;
                    c.constant_weights = false;
                  }),
        make_case("pointwise_stride2_padded", {1, 16, 6, 6}, {16, 16, 1, 1},
                  [](ConvCase& c) {
                    c.strides = {2, 2};
                    c.pads = {1, 1, 1, 1};
                  }),
        make_case("relu_only_no_bias", {2, 8, 6, 6}, {8, 8, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.bias = false;
                    c.activation = kRelu;
                  }),
        make_case("odd_channels_3_to_5", {2, 3, 9, 9}, {5, 3, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                  }),
        make_case("odd_channels_5_to_7_residual", {2, 5, 6, 6}, {7, 5, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.residual = true;
                    c.activation = kRelu;
                  }),
        make_case("first_layer_7x7", {1, 3, 32, 32}, {16, 3, 7, 7},
                  [](ConvCase& c) {
                    c.strides = {2, 2};
                    c.pads = {3, 3, 3, 3};
                  }),
        make_case("conv1d", {2, 8, 20}, {16, 8, 3},
                  [](ConvCase& c) {
                    c.strides = {2};
                    c.pads = {1, 0};
                  }),
        make_case("conv1d_dilated_group", {1, 8, 17}, {8, 2, 3},
                  [](ConvCase& c) {
                    c.pads = {2, 2};
                    c.dilations = {2};
                    c.group = 4;
                  }),
        make_case("conv3d", {1, 8, 6, 6, 6}, {8, 8, 3, 3, 3},
                  [](ConvCase& c) { c.pads = {1, 1, 1, 1, 1, 1}; }),
        make_case("weights_not_constant", {2, 16, 6, 6}, {16, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.residual = true;
                    c.activation = kRelu;
                    c.constant_weights = false;
                  }),
        make_case("batch3_stride3", {3, 16, 11, 11}, {16, 16, 3, 3},
                  [](ConvCase& c) {
                    c.strides = {3, 3};
                  }),
        make_case("depthwise_relu6", {2, 24, 10, 10}, {24, 1, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.group = 24;
                    c.activation = kRelu6;
                  }),
        make_case("residual_clip_both_bounds_hit", {2, 16, 8, 8}, {16, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.winograd = true;
                    c.residual = true;
                    c.activation = {kernels::FusedActivation::Kind::kClip, -0.5, 0.75};
                  }),
        make_case("pointwise_residual_leaky_relu", {2, 32, 6, 6}, {16, 32, 1, 1},
                  [](ConvCase& c) {
                    c.residual = true;
                    c.activation = {.kind = kernels::FusedActivation::Kind::kLeakyRelu,
                                    .alpha = 0.1};
                  }),
        // The residual after the activation: by oneDNN's post-ops (1x1, guarded), kiln's
        // Winograd epilogue, kiln's SiLU and a no-bias conv (unguarded: kiln's steps), and
        // where kiln's gemm would otherwise run it (1x1 over few pixels or one pixel).
        make_case("pointwise_relu6_then_residual", {2, 32, 6, 6}, {32, 32, 1, 1},
                  [](ConvCase& c) {
                    c.residual = c.residual_after_activation = true;
                    c.activation = kRelu6;
                  }),
        make_case("winograd_clip_then_residual", {2, 16, 8, 8}, {16, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.winograd = true;
                    c.residual = c.residual_after_activation = true;
                    c.activation = {kernels::FusedActivation::Kind::kClip, -0.5, 0.75};
                  }),
        make_case("pointwise_silu_then_residual", {2, 24, 6, 6}, {40, 24, 1, 1},
                  [](ConvCase& c) {
                    c.residual = c.residual_after_activation = true;
                    c.activation = {kernels::FusedActivation::Kind::kSilu};
                  }),
        make_case("stride2_no_bias_leaky_relu_then_residual", {2, 8, 9, 10}, {16, 8, 3, 3},
                  [](ConvCase& c) {
                    c.strides = {2, 2};
                    c.pads = {1, 1, 1, 1};
                    c.bias = false;
                    c.residual = c.residual_after_activation = true;
                    c.activation = {.kind = kernels::FusedActivation::Kind::kLeakyRelu,
                                    .alpha = 0.1};
                  }),
        make_case("pointwise_7x7_relu_then_residual", {1, 32, 7, 7}, {32, 32, 1, 1},
                  [](ConvCase& c) {
                    c.residual = c.residual_after_activation = true;
                    c.activation = kRelu;
                  }),
        make_case("single_pixel_relu_then_residual", {2, 24, 1}, {40, 24, 1},
                  [](ConvCase& c) {
                    c.residual = c.residual_after_activation = true;
                    c.activation = kRelu;
                  }),
        make_case("winograd_leaky_relu", {2, 16, 8, 8}, {16, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.winograd = true;
                    c.activation = {.kind = kernels::FusedActivation::Kind::kLeakyRelu,
                                    .alpha = 0.2};
                  }),
        make_case("winograd_odd_sizes_batch3", {3, 8, 7, 9}, {32, 8, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.winograd = true;
                  }),
        make_case("winograd_valid_no_bias_relu", {2, 24, 6, 5}, {16, 24, 3, 3},
                  [](ConvCase& c) {
                    c.bias = false;
                    c.activation = kRelu;
                    c.winograd = true;
                  }),
        make_case("winograd_uneven_pads_residual", {1, 16, 5, 8}, {48, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {2, 0, 1, 2};
                    c.residual = true;
                    c.activation = kRelu6;
                    c.winograd = true;
                  }),
        make_case("winograd_many_channels", {1, 128, 6, 6}, {64, 128, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.winograd = true;
                  }),
        make_case("not_winograd_out_channels_24", {1, 16, 6, 6}, {24, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                  }),
        make_case("pointwise_clip_min_only", {2, 64, 6, 6}, {32, 64, 1, 1},
                  [](ConvCase& c) {
                    c.activation = {kernels::FusedActivation::Kind::kClip, -0.25};
                  }),
        make_case("pointwise_residual_silu", {2, 24, 6, 6}, {40, 24, 1, 1},
                  [](ConvCase& c) {
                    c.residual = true;
                    c.activation = {kernels::FusedActivation::Kind::kSilu};
                  }),
        make_case("depthwise_stride2_silu", {2, 40, 9, 9}, {40, 1, 5, 5},
                  [](ConvCase& c) {
                    c.strides = {2, 2};
                    c.pads = {2, 2, 2, 2};
                    c.group = 40;
                    c.activation = {kernels::FusedActivation::Kind::kSilu};
                  }),
        // SiLU and Mish run as kiln's ActivationStep after the Winograd step, and a residual added
        // after them as a step of its own (a YOLO bottleneck's x + SiLU(conv)).
        make_case("winograd_silu", {2, 16, 8, 8}, {16, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.winograd = true;
                    c.activation = {kernels::FusedActivation::Kind::kSilu};
                  }),
        make_case("winograd_residual_mish", {2, 16, 7, 9}, {16, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.winograd = true;
                    c.residual = true;
                    c.activation = {kernels::FusedActivation::Kind::kMish};
                  }),
        make_case("winograd_mish_then_residual", {2, 16, 8, 8}, {16, 16, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.winograd = true;
                    c.residual = c.residual_after_activation = true;
                    c.activation = {kernels::FusedActivation::Kind::kMish};
                  }),
        make_case("winograd_silu_then_residual", {2, 32, 6, 6}, {32, 32, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.winograd = true;
                    c.residual = c.residual_after_activation = true;
                    c.activation = {kernels::FusedActivation::Kind::kSilu};
                  }),
        make_case("depthwise_odd_channels_mish_then_residual", {2, 5, 9, 9}, {5, 1, 3, 3},
                  [](ConvCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.group = 5;
                    c.residual = c.residual_after_activation = true;
                    c.activation = {kernels::FusedActivation::Kind::kMish};
                  })),
    [](const ::testing::TestParamInfo<ConvCase>& info) { return info.param.name; });

// A sample's result does not depend on the batch it runs in, bit for bit, also for convs with few
// output positions per image, which oneDNN's brgconv (AVX-512) may block across images: the
// batch then runs per sample. Found on deeplabv3_mobilenet_v3's ASPP convs (3x4 outputs).
// With 64 outputs channels Winograd takes these on AVX-512; with 24, oneDNN's brgconv runs them,
// batched where conv_batch_probe.h finds the batch gives the one-sample bits, else per sample.
TEST(CpuConvBatchInvariance, FewOutputPositionsPerImage) {
  for (int64_t out_channels : {64, 24})
    for (const ConcreteShape& x_shape :
         {ConcreteShape{2, 480, 3, 4}, ConcreteShape{3, 256, 2, 2}, ConcreteShape{2, 96, 14, 14}}) {
      const ConcreteShape w_shape{out_channels, x_shape[1], 3, 3};
      const Tensor x = random_tensor(x_shape, 11), w = random_tensor(w_shape, 12);
      auto run_conv = [&](const Tensor& input) -> StatusOr<Tensor> {
        SpecBuilder s;
        const int32_t xi = s.input("x", input.shape());
        const int32_t wi = s.constant("w", w);
        const int32_t y =
            s.output("y", {input.shape()[0], out_channels, input.shape()[2], input.shape()[3]});
        Attributes a;
        a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
        a.set("kernel_shape", std::vector<int64_t>{3, 3});
        s.dispatch("conv", "Conv", {xi, wi}, {y}, a);
        KILN_ASSIGN_OR_RETURN(auto device, create_cpu_device({}));
        KILN_ASSIGN_OR_RETURN(auto exe, device->prepare(s.spec()));
        KILN_ASSIGN_OR_RETURN(auto out, run_program(*exe, s.spec(), {input}));
        return std::move(out[0]);
      };
      auto batched = run_conv(x);
      ASSERT_TRUE(batched.ok()) << batched.status().to_string();
      for (int64_t n = 0; n < x_shape[0]; ++n) {
        auto alone = run_conv(slice_batch(x, n));
        ASSERT_TRUE(alone.ok()) << alone.status().to_string();
        EXPECT_TRUE(bitwise_equal(*alone, slice_batch(*batched, n)))
            << "sample " << n << " of " << fmt::format("{}", fmt::join(x_shape, "x"));
      }
    }
}

// A strided 1x1 conv without padding copies the pixels it reads and runs the stride-1 kernel on
// them (conv_op.cc, subsamples): the step reads the subsampled dims; a NaN at a pixel the stride
// skips changes nothing, one at a pixel it reads makes that output pixel NaN in every channel; and
// each sample of a batch has the bits it has alone, on a graph input and on a conv's output.
TEST(CpuConvSubsampling, AStrided1x1ConvReadsOnlyItsPixels) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const ConcreteShape x_shape{3, 32, 7, 6};
  const Tensor w0 = random_tensor({32, 32, 3, 3}, 41), w = random_tensor({64, 32, 1, 1}, 42);
  auto run = [&](const Tensor& x, bool after_conv, std::string* steps) {
    SpecBuilder s;
    const int64_t n = x.shape()[0];
    const int32_t xi = s.input("x", x.shape());
    int32_t src = xi;
    if (after_conv) {
      src = s.value("c", x.shape());
      s.dispatch("c", "Conv", {xi, s.constant("w0", w0)}, {src},
                 attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
    }
    const int32_t y = s.output("y", {n, 64, 4, 2});
    s.dispatch("conv", "Conv", {src, s.constant("w", w)}, {y},
               attrs({{"strides", std::vector<int64_t>{2, 3}}}));
    auto device = create_cpu_device({});
    KILN_CHECK(device.ok());
    auto exe = (*device)->prepare(s.spec());
    KILN_CHECK(exe.ok());
    if (steps != nullptr) {
      *steps = fmt::format("{}", fmt::join((*exe)->describe_dispatch(after_conv ? 1 : 0), "\n"));
    }
    auto out = run_program(**exe, s.spec(), {x});
    KILN_CHECK(out.ok());
    return (*out)[0];
  };
  const Tensor x = random_tensor(x_shape, 43);
  std::string steps;
  const Tensor y = run(x, false, &steps);
  EXPECT_NE(steps.find("x32x4x2 -> "), std::string::npos) << steps;
  ConvRef ref;
  ref.strides = {2, 3};
  ref.dilations = {1, 1};
  ref.pads_begin = ref.pads_end = {0, 0};
  ref.group = 1;
  EXPECT_TRUE(all_close(y, ref_conv(x, w, nullptr, nullptr, ref)));

  // Sample 1, channel 5: pixel (1, 1) is skipped, pixel (2, 3) is read by output (1, 1).
  Tensor skipped = x.clone(), read = x.clone();
  skipped.mutable_values<float>()[((1 * 32 + 5) * 7 + 1) * 6 + 1] = kNaN;
  read.mutable_values<float>()[((1 * 32 + 5) * 7 + 2) * 6 + 3] = kNaN;
  EXPECT_TRUE(identical(run(skipped, false, nullptr), y));
  const Tensor poisoned = run(read, false, nullptr);
  const auto v = poisoned.values<float>();
  for (int64_t n = 0; n < 3; ++n) {
    for (int64_t c = 0; c < 64; ++c) {
      for (int64_t p = 0; p < 8; ++p) {
        const bool hit = n == 1 && p == 1 * 2 + 1;
        EXPECT_EQ(std::isnan(v[(n * 64 + c) * 8 + p]), hit) << n << " " << c << " " << p;
      }
    }
  }

  for (bool after_conv : {false, true}) {
    const Tensor batched = run(x, after_conv, nullptr);
    for (int64_t n = 0; n < 3; ++n) {
      EXPECT_TRUE(
          bitwise_equal(run(slice_batch(x, n), after_conv, nullptr), slice_batch(batched, n)))
          << "sample " << n << (after_conv ? " after a conv" : "");
    }
  }
}

// The reference of a 1x1 conv: stride 1, no padding, one group, then `activation`.
ConvRef pointwise_ref(const kernels::FusedActivation& activation) {
  ConvRef ref;
  ref.strides = ref.dilations = {1, 1};
  ref.pads_begin = ref.pads_end = {0, 0};
  ref.group = 1;
  ref.activation = activation;
  return ref;
}

// A 1x1 conv on single pixels (a squeeze-and-excitation block's fully connected convs) runs as
// kiln's matrix product: each sample alone (its bits at any batch), a NaN in a sample's input
// makes that sample's outputs NaN and no other's, and the fused SiLU keeps NaN.
TEST(CpuConvSinglePixels, RunsAsAMatrixProductPerSample) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const Tensor w = random_tensor({48, 96, 1, 1}, 51), bias = random_tensor({48}, 52);
  auto run = [&](const Tensor& x, std::string* steps) {
    SpecBuilder s;
    const int64_t n = x.shape()[0];
    const int32_t xi = s.input("x", x.shape());
    const int32_t y = s.output("y", {n, 48, 1, 1});
    Attributes a;
    kernels::set_fused_activation(a, {kernels::FusedActivation::Kind::kSilu});
    s.dispatch("fc", "Conv", {xi, s.constant("w", w), s.constant("b", bias)}, {y}, a);
    auto device = create_cpu_device({});
    KILN_CHECK(device.ok());
    auto exe = (*device)->prepare(s.spec());
    KILN_CHECK(exe.ok());
    if (steps != nullptr) *steps = fmt::format("{}", fmt::join((*exe)->describe_dispatch(0), "\n"));
    auto out = run_program(**exe, s.spec(), {x});
    KILN_CHECK(out.ok());
    return (*out)[0];
  };
  Tensor x = random_tensor({3, 96, 1, 1}, 53);
  std::string steps;
  const Tensor y = run(x, &steps);
  EXPECT_NE(steps.find("kiln_gemm"), std::string::npos) << steps;
  EXPECT_TRUE(all_close(
      y, ref_conv(x, w, &bias, nullptr, pointwise_ref({kernels::FusedActivation::Kind::kSilu}))));
  for (int64_t n = 0; n < 3; ++n) {
    EXPECT_TRUE(bitwise_equal(run(slice_batch(x, n), nullptr), slice_batch(y, n))) << n;
  }
  x.mutable_values<float>()[96 + 7] = kNaN;  // sample 1
  const Tensor poisoned = run(x, nullptr);
  const auto v = poisoned.values<float>();
  for (int64_t i = 0; i < 3 * 48; ++i) EXPECT_EQ(std::isnan(v[i]), i / 48 == 1) << i;
}

// A 1x1 conv on single pixels with no input channels sums nothing: each output is its bias (the
// product path counts its rows from the input's dims, which hold no channel to divide by).
TEST(CpuConvSinglePixels, NoInputChannelsGiveTheBias) {
  const Tensor w = random_tensor({5, 0, 1, 1}, 55), bias = random_tensor({5}, 56);
  SpecBuilder s;
  const int32_t xi = s.input("x", {2, 0, 1, 1});
  const int32_t y = s.output("y", {2, 5, 1, 1});
  s.dispatch("fc", "Conv", {xi, s.constant("w", w), s.constant("b", bias)}, {y});
  auto device = create_cpu_device({});
  ASSERT_TRUE(device.ok());
  auto exe = (*device)->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  auto out = run_program(**exe, s.spec(), {random_tensor({2, 0, 1, 1}, 57)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto v = (*out)[0].values<float>();
  const auto b = bias.values<float>();
  for (int64_t i = 0; i < 2 * 5; ++i) EXPECT_EQ(v[i], b[i % 5]) << i;
}

// Runs one Conv of x with weights w, bias and a residual (the same shape as its output) and
// `attributes`, on the default CPU device; `steps` (where not null) gets its dispatch's steps.
Tensor run_conv_with_residual(const Tensor& x, const Tensor& w, const Tensor& bias,
                              const Tensor& residual, const Attributes& attributes,
                              std::string* steps) {
  SpecBuilder s;
  const int32_t xi = s.input("x", x.shape());
  const int32_t ri = s.input("res", residual.shape());
  const int32_t y = s.output("y", residual.shape());
  s.dispatch("conv", "Conv", {xi, s.constant("w", w), s.constant("b", bias), ri}, {y}, attributes);
  auto device = create_cpu_device({});
  KILN_CHECK(device.ok());
  auto exe = (*device)->prepare(s.spec());
  KILN_CHECK(exe.ok());
  if (steps != nullptr) *steps = fmt::format("{}", fmt::join((*exe)->describe_dispatch(0), "\n"));
  auto out = run_program(**exe, s.spec(), {x, residual});
  KILN_CHECK(out.ok());
  return (*out)[0];
}

// A 1x1 stride-1 conv on channels-last data of at most 64 pixels (ResNet's 7x7 stage on AVX-512,
// where oneDNN keeps NHWC) runs as kiln's matrix product over the pixels, a row each, with bias,
// residual and relu in its epilogue: the reference's values, each sample's bits at any batch, and a
// NaN pixel makes that pixel's outputs NaN (through the relu) and no others. With relu6, which
// the epilogue lacks, it stays on oneDNN.
TEST(CpuConvChannelsLastPointwise, RunsAsAMatrixProductOverPixels) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const Tensor w = random_tensor({256, 512, 1, 1}, 61), bias = random_tensor({256}, 62);
  auto run = [&](const Tensor& x, const Tensor& residual, std::string* steps,
                 kernels::FusedActivation activation = {kernels::FusedActivation::Kind::kRelu}) {
    Attributes a;
    kernels::set_fused_activation(a, activation);
    return run_conv_with_residual(x, w, bias, residual, a, steps);
  };
  Tensor x = random_tensor({3, 512, 7, 7}, 63);
  const Tensor residual = random_tensor({3, 256, 7, 7}, 64);
  std::string steps;
  const Tensor y = run(x, residual, &steps);
  if (steps.find("acdb") == std::string::npos) {
    GTEST_SKIP() << "oneDNN keeps this conv's data in another layout here:\n" << steps;
  }
  EXPECT_NE(steps.find("kiln_gemm"), std::string::npos) << steps;
  EXPECT_NE(steps.find("1x1 over channels-last pixels"), std::string::npos) << steps;
  EXPECT_NE(steps.find("+relu"), std::string::npos) << steps;
  // An activation the product's epilogue lacks (relu6 here) stays on oneDNN, which fuses it.
  std::string clip_steps;
  run(x, residual, &clip_steps, {kernels::FusedActivation::Kind::kClip, 0.0, 6.0});
  EXPECT_EQ(clip_steps.find("kiln_gemm"), std::string::npos) << clip_steps;
  EXPECT_TRUE(all_close(
      y, ref_conv(x, w, &bias, &residual, pointwise_ref({kernels::FusedActivation::Kind::kRelu}))));
  for (int64_t n = 0; n < 3; ++n) {
    EXPECT_TRUE(
        bitwise_equal(run(slice_batch(x, n), slice_batch(residual, n), nullptr), slice_batch(y, n)))
        << n;
  }
  const int64_t pixels = 7 * 7, pixel = 5 * 7 + 2;
  x.mutable_values<float>()[(1 * 512 + 17) * pixels + pixel] = kNaN;  // sample 1, channel 17
  const Tensor poisoned = run(x, residual, nullptr);
  const auto v = poisoned.values<float>();
  for (int64_t i = 0; i < 3 * 256 * pixels; ++i) {
    EXPECT_EQ(std::isnan(v[i]), i / (256 * pixels) == 1 && i % pixels == pixel) << i;
  }
}

// A strided 1x1 conv onto at most 64 channels-last pixels (ResNet-50 v1's stage-4 entry, 14x14 ->
// 7x7 by stride 2) runs as kiln's matrix product over the pixels it reads, copied out first, with
// bias, residual and relu in its epilogue: the reference's values, each sample's bits at any batch,
// a NaN at a pixel the stride skips changes nothing, and one at a pixel it reads makes that
// output pixel NaN in every channel (through the relu) and no other.
TEST(CpuConvChannelsLastPointwise, AStridedOneRunsOnTheCopiedPixels) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const Tensor w = random_tensor({128, 256, 1, 1}, 71), bias = random_tensor({128}, 72);
  Attributes a = attrs({{"strides", std::vector<int64_t>{2, 2}}});
  kernels::set_fused_activation(a, {kernels::FusedActivation::Kind::kRelu});
  auto run = [&](const Tensor& x, const Tensor& residual, std::string* steps) {
    return run_conv_with_residual(x, w, bias, residual, a, steps);
  };
  // 13x13 -> 7x7: output pixel (r, c) reads input pixel (2r, 2c).
  Tensor x = random_tensor({3, 256, 13, 13}, 73);
  const Tensor residual = random_tensor({3, 128, 7, 7}, 74);
  std::string steps;
  const Tensor y = run(x, residual, &steps);
  if (steps.find("acdb") == std::string::npos) {
    GTEST_SKIP() << "oneDNN keeps this conv's data in another layout here:\n" << steps;
  }
  EXPECT_NE(steps.find("kiln_gemm"), std::string::npos) << steps;
  EXPECT_NE(steps.find("1x1 over channels-last pixels, acdb 3x256x7x7"), std::string::npos)
      << steps;
  ConvRef ref = pointwise_ref({kernels::FusedActivation::Kind::kRelu});
  ref.strides = {2, 2};
  EXPECT_TRUE(all_close(y, ref_conv(x, w, &bias, &residual, ref)));
  for (int64_t n = 0; n < 3; ++n) {
    EXPECT_TRUE(
        bitwise_equal(run(slice_batch(x, n), slice_batch(residual, n), nullptr), slice_batch(y, n)))
        << n;
  }
  // Sample 1, channel 17: input pixel (5, 3) is skipped; (10, 4) is read by output pixel (5, 2).
  Tensor skipped = x.clone();
  skipped.mutable_values<float>()[((1 * 256 + 17) * 13 + 5) * 13 + 3] = kNaN;
  EXPECT_TRUE(identical(run(skipped, residual, nullptr), y));
  x.mutable_values<float>()[((1 * 256 + 17) * 13 + 10) * 13 + 4] = kNaN;
  const Tensor poisoned = run(x, residual, nullptr);
  const auto v = poisoned.values<float>();
  const int64_t pixels = 7 * 7, pixel = 5 * 7 + 2;
  for (int64_t i = 0; i < 3 * 128 * pixels; ++i) {
    EXPECT_EQ(std::isnan(v[i]), i / (128 * pixels) == 1 && i % pixels == pixel) << i;
  }
}

// A sum post-op (kiln's residual) is seen in a primitive descriptor, whatever other post-ops it
// has. oneDNN's get_post_ops() hands out a view into the attribute it is called on: read through
// a temporary attribute the kinds were garbage, so every probe below ran without its residual,
// on whatever the allocator's memory held.
TEST(DnnlUtil, SumsIntoDestination) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  auto conv = [&](bool sum, bool relu) {
    dnnl::post_ops ops;
    if (sum) ops.append_sum(1.0f);
    if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        dnnl_desc({1, 16, 4, 4}, dt::f32, tag::any), dnnl_desc({16, 16, 1, 1}, dt::f32, tag::any),
        dnnl_desc({1, 16, 4, 4}, dt::f32, tag::any), {1, 1}, {0, 0}, {0, 0});
    return dnnl::convolution_forward::primitive_desc(desc, attr, engine);
  };
  EXPECT_TRUE(sums_into_destination(conv(true, false)));
  EXPECT_TRUE(sums_into_destination(conv(true, true)));
  EXPECT_FALSE(sums_into_destination(conv(false, true)));
  EXPECT_FALSE(sums_into_destination(conv(false, false)));
}

// The probes' cases below were chosen on a team of 2 (the machine's two cores): how oneDNN's
// batched brgconv blocks its work, so whether it sums a sample in the one-sample order, follows the
// team. Each test runs on a team of 2 and gives the caller its own team back after
// (CallerThreads).

// The probe tells a batched brgconv that blocks output positions across images (a 3x3 conv with
// 3x4 outputs per image: sample 0 rounds differently at batch 2) from one that does not (a 1x1
// conv on 7x7 images), by running both. Only where oneDNN runs brgconv (AVX-512), on a team of 2:
// the first case's blocks span both images on 2 threads, not on 3 (OMP_NUM_THREADS=3 made it
// pass the probe, and 4 made the second case below fail it).
TEST(ConvBatchProbe, TellsBatchedKernelsThatSumInAnotherOrder) {
  const CallerThreads restore;
  use_threads(2);
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto conv = [&](int64_t n, int64_t c, int64_t m, int64_t h, int64_t w, int64_t k) {
    const int64_t pad = k / 2;
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        dnnl_desc({n, c, h, w}, dt::f32, tag::any), dnnl_desc({m, c, k, k}, dt::f32, tag::any),
        dnnl_desc({m}, dt::f32, tag::a), dnnl_desc({n, m, h, w}, dt::f32, tag::any), {1, 1}, {0, 0},
        {pad, pad}, {pad, pad});
    return dnnl::convolution_forward::primitive_desc(desc, attr, engine);
  };
  struct Case {
    int64_t c, m, h, w, k, batch;
    bool same_bits;
  };
  for (const Case& t : {Case{480, 24, 3, 4, 3, 2, false}, Case{320, 1280, 7, 7, 1, 8, true}}) {
    SCOPED_TRACE(fmt::format("{}x{} k{} batch {}", t.h, t.w, t.k, t.batch));
    const auto single = conv(1, t.c, t.m, t.h, t.w, t.k);
    const auto batched = conv(t.batch, t.c, t.m, t.h, t.w, t.k);
    if (impl_name(batched).rfind("brgconv", 0) != 0) {
      GTEST_SKIP() << "oneDNN runs " << impl_name(batched) << " here, not brgconv";
    }
    EXPECT_EQ(batched_conv_matches_per_sample(engine, single, batched, t.batch, true), t.same_bits);
  }
}

// With a residual (a sum post-op) the probes fill the destination with it before each run, so
// they compare sums, not what the memory held before. A conv whose batched kernel sums in the
// one-sample order (ResNet's last 1x1 conv of a block on 7x7 images) passes both the batch probe
// and the fused-relu probe, also after the allocator has handed out memory full of other values
// (which the two runs of a probe that skipped the residual would each have added).
TEST(ConvBatchProbe, AddsTheResidualBeforeEachRun) {
  const CallerThreads restore;
  use_threads(2);
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const int64_t batch = 8, c = 128, m = 512, h = 7;
  auto conv = [&](int64_t n, bool relu) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_post_ops(ops);
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        dnnl_desc({n, c, h, h}, dt::f32, tag::acdb), dnnl_desc({m, c, 1, 1}, dt::f32, tag::any),
        dnnl_desc({m}, dt::f32, tag::a), dnnl_desc({n, m, h, h}, dt::f32, tag::acdb), {1, 1},
        {0, 0}, {0, 0});
    return dnnl::convolution_forward::primitive_desc(desc, attr, engine);
  };
  const auto single = conv(1, false), batched = conv(batch, false);
  if (impl_name(batched) != impl_name(single) ||
      impl_name(conv(batch, true)) != impl_name(single)) {
    GTEST_SKIP() << "oneDNN runs " << impl_name(batched) << " at batch " << batch << ", "
                 << impl_name(single) << " alone";
  }
  // Memory of the destination's size, full of distinct values, back to the allocator.
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Tensor t = random_tensor({batch * m * h * h}, seed);
    t.mutable_values<float>()[0] += 1.0f;
  }
  EXPECT_TRUE(batched_conv_matches_per_sample(engine, single, batched, batch, true));
  EXPECT_TRUE(fused_activation_matches(engine, batched, conv(batch, true), true,
                                       {kernels::FusedActivation::Kind::kRelu}));
}

// A conv whose residual comes after its activation gives the bits of the conv with its activation
// followed by an Add, on every path: oneDNN's post-ops while the input is finite (1x1, clip),
// kiln's steps when a sample holds a NaN (the plain conv, kiln's clip, the sum) or when nothing can
// be guarded (SiLU; no bias), and kiln's Winograd epilogue. A NaN or an infinity in the residual
// reaches the output as the Add gives it.
TEST(CpuConvResidualAfterActivation, GivesTheBitsOfTheActivationAndTheAdd) {
  struct Case {
    const char* name;
    ConcreteShape x, w;
    std::vector<int64_t> pads;
    bool bias;
    kernels::FusedActivation activation;
  };
  const Case cases[] = {
      {"pointwise_relu6", {2, 32, 6, 6}, {32, 32, 1, 1}, {}, true, kRelu6},
      {"winograd_relu6", {2, 16, 8, 8}, {16, 16, 3, 3}, {1, 1, 1, 1}, true, kRelu6},
      {"pointwise_silu",
       {2, 24, 6, 6},
       {24, 24, 1, 1},
       {},
       true,
       {kernels::FusedActivation::Kind::kSilu}},
      {"no_bias_leaky_relu",
       {2, 8, 6, 6},
       {8, 8, 3, 3},
       {1, 1, 1, 1},
       false,
       {.kind = kernels::FusedActivation::Kind::kLeakyRelu, .alpha = 0.1}},
  };
  auto device = create_cpu_device({});
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  for (const Case& c : cases) {
    for (const char* poison : {"none", "nan in x", "nan and inf in the residual"}) {
      SCOPED_TRACE(fmt::format("{}, {}", c.name, poison));
      Tensor x = random_tensor(c.x, 11, -2.0f, 2.0f);
      Tensor w = random_tensor(c.w, 12, -0.5f, 0.5f);
      Tensor b = random_tensor({c.w[0]}, 13);
      ConcreteShape y_shape = c.x;
      y_shape[1] = c.w[0];
      Tensor r = random_tensor(y_shape, 14, -3.0f, 3.0f);
      const float nan = std::numeric_limits<float>::quiet_NaN();
      if (std::string(poison) == "nan in x") x.mutable_values<float>()[x.element_count() - 5] = nan;
      if (std::string(poison) == "nan and inf in the residual") {
        r.mutable_values<float>()[3] = nan;
        r.mutable_values<float>()[r.element_count() - 2] = std::numeric_limits<float>::infinity();
      }
      Attributes a;
      if (!c.pads.empty()) a.set("pads", c.pads);
      kernels::set_fused_activation(a, c.activation);
      auto spec = [&](bool fused) {
        SpecBuilder s;
        const int32_t xi = s.input("x", c.x), ri = s.input("r", y_shape);
        std::vector<int32_t> conv_in{xi, s.constant("w", w)};
        if (c.bias) conv_in.push_back(s.constant("b", b));
        const int32_t y = s.output("y", y_shape);
        if (fused) {
          if (!c.bias) conv_in.push_back(-1);
          conv_in.push_back(ri);
          Attributes after = a;
          after.set(kernels::kResidualAfterActivationAttribute, int64_t{1});
          s.dispatch("conv", "Conv", conv_in, {y}, after);
        } else {
          const int32_t t = s.value("t", y_shape);
          s.dispatch("conv", "Conv", conv_in, {t}, a);
          s.dispatch("add", "Add", {t, ri}, {y});
        }
        return s;
      };
      std::vector<Tensor> outputs;
      for (bool fused : {false, true}) {
        SpecBuilder s = spec(fused);
        auto exe = (*device)->prepare(s.spec());
        ASSERT_TRUE(exe.ok()) << exe.status().to_string();
        auto out = run_program(**exe, s.spec(), {x, r});
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        outputs.push_back(std::move((*out)[0]));
        if (fused) {
          const std::string steps =
              fmt::format("{}", fmt::join((*exe)->describe_dispatch(0), "\n"));
          EXPECT_NE(steps.find("+residual"), std::string::npos) << steps;
          // The 1x1 conv's clip and sum run inside oneDNN's primitive while x is finite.
          if (std::string(c.name) == "pointwise_relu6") {
            EXPECT_NE(steps.find("fused while finite"), std::string::npos) << steps;
          }
        }
      }
      const float* unfused = outputs[0].values<float>().data();
      const float* fused = outputs[1].values<float>().data();
      int differ = 0;
      for (int64_t i = 0; i < outputs[0].element_count(); ++i) {
        const bool both_nan = std::isnan(unfused[i]) && std::isnan(fused[i]);
        differ += !both_nan && std::memcmp(&unfused[i], &fused[i], sizeof(float)) != 0;
      }
      EXPECT_EQ(differ, 0);
      if (std::string(poison) != "none") {
        EXPECT_TRUE(std::any_of(fused, fused + outputs[1].element_count(),
                                [](float v) { return std::isnan(v); }));
      }
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
