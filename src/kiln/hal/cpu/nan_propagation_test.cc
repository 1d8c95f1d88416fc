// NaN is never hidden: a NaN planted before every activation the CPU backend runs reaches the
// output, on every path (oneDNN direct conv, kiln's Winograd conv, oneDNN batch norm, matmul and
// gemm, the standalone Relu and Gelu, max pooling, softmax, the portable kernels), as ONNX Runtime
// and PyTorch keep it.
// oneDNN computes relu and clip as max(x, bound), which turns a NaN into the bound; the backend
// must not let it (activation_step.h). Expected values come from the float64 references of
// test_support.h, whose activations keep NaN.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/hal/cpu/cpu_device_for_tests.h"
#include "kiln/hal/cpu/winograd_conv_op.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using Kind = kernels::FusedActivation::Kind;
const kernels::FusedActivation kRelu{Kind::kRelu};
const kernels::FusedActivation kRelu6{Kind::kClip, 0.0, 6.0};
const kernels::FusedActivation kClipAboveZero{Kind::kClip, 0.25, 2.0};  // moves padding zeros
const kernels::FusedActivation kLeakyRelu{.kind = Kind::kLeakyRelu, .alpha = 0.1};
const kernels::FusedActivation kSilu{Kind::kSilu};
const kernels::FusedActivation kMish{Kind::kMish};

Tensor planted(Tensor t, std::initializer_list<int64_t> flat, float value = kNaN) {
  auto v = t.mutable_values<float>();
  for (int64_t i : flat) v[i] = value;
  return t;
}

int64_t nan_count(const Tensor& t) {
  int64_t n = 0;
  for (float v : t.values<float>()) n += std::isnan(v);
  return n;
}

// Equal NaN positions (and at least one NaN), the rest within tolerance.
::testing::AssertionResult keeps_nan(const Tensor& actual, const Tensor& expected) {
  const int64_t want = nan_count(expected), got = nan_count(actual);
  if (want == 0) return ::testing::AssertionFailure() << "the expected output has no NaN";
  if (got != want) {
    return ::testing::AssertionFailure()
           << fmt::format("{} NaN in the output, expected {}", got, want);
  }
  return all_close(actual, expected);
}

struct Ran {
  std::vector<Tensor> outputs;
  std::string steps;  // every dispatch's step descriptions
};

StatusOr<Ran> run(SpecBuilder& s, const std::vector<Tensor>& inputs) {
  auto dev = default_cpu_device();
  KILN_ASSIGN_OR_RETURN(auto exe, dev->prepare(s.spec()));
  Ran r;
  for (size_t d = 0; d < s.spec().dispatches.size(); ++d) {
    r.steps += fmt::format("{}\n", fmt::join(exe->describe_dispatch(d), "\n"));
  }
  KILN_ASSIGN_OR_RETURN(r.outputs, run_program(*exe, s.spec(), inputs));
  return r;
}

struct ConvCase {
  std::string name;
  ConcreteShape x, w;
  std::vector<int64_t> strides, pads;
  kernels::FusedActivation activation;
  bool residual = false;
  bool winograd = false;  // 3x3 stride 1, 8k -> 16k channels: Winograd on AVX2 machines
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

class NanThroughConv : public ::testing::TestWithParam<ConvCase> {};

// One NaN pixel in X (and, with a residual, one in the residual): every output whose window or
// residual element holds it is NaN after the activation.
TEST_P(NanThroughConv, ReachesTheOutput) {
  const ConvCase& c = GetParam();
  ConvRef ref;
  ref.strides = c.strides.empty() ? std::vector<int64_t>{1, 1} : c.strides;
  ref.dilations = {1, 1};
  std::vector<int64_t> pads = c.pads.empty() ? std::vector<int64_t>(4, 0) : c.pads;
  ref.pads_begin.assign(pads.begin(), pads.begin() + 2);
  ref.pads_end.assign(pads.begin() + 2, pads.end());
  ref.activation = c.activation;
  // Inputs mostly negative, so a hidden NaN would read as the activation's lower bound.
  const int64_t center = (c.x[2] / 2) * c.x[3] + c.x[3] / 2;
  Tensor x = planted(random_tensor(c.x, 31, -1.0f, 0.25f), {center});
  Tensor w = random_tensor(c.w, 32);
  Tensor b = random_tensor({c.w[0]}, 33, -1.0f, 0.0f);
  Tensor probe = ref_conv(x, w, nullptr, nullptr, ref);
  Tensor res = planted(random_tensor(probe.shape(), 34, -1.0f, 0.0f), {probe.element_count() - 1});
  Tensor expected = ref_conv(x, w, &b, c.residual ? &res : nullptr, ref);

  SpecBuilder s;
  std::vector<Tensor> inputs{x};
  std::vector<int32_t> ins{s.input("x", c.x), s.constant("w", w), s.constant("b", b)};
  if (c.residual) {
    ins.push_back(s.input("res", res.shape()));
    inputs.push_back(res);
  }
  const int32_t y = s.output("y", expected.shape());
  Attributes a;
  if (!c.strides.empty()) a.set("strides", c.strides);
  if (!c.pads.empty()) a.set("pads", c.pads);
  a.set("kernel_shape", std::vector<int64_t>(c.w.begin() + 2, c.w.end()));
  kernels::set_fused_activation(a, c.activation);
  s.dispatch("conv", "Conv", ins, {y}, a);
  auto r = run(s, inputs);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(keeps_nan(r->outputs[0], expected)) << r->steps;
  const bool winograd_ran = r->steps.find("winograd") != std::string::npos;
  if (!c.winograd) {
    EXPECT_FALSE(winograd_ran) << r->steps;
  }
  if (c.winograd && winograd_layout_in(r->steps)) {
    EXPECT_TRUE(winograd_ran) << r->steps;
  }
}

ConvCase conv_case(std::string name, ConcreteShape x, ConcreteShape w,
                   kernels::FusedActivation activation, void (*set)(ConvCase&) = nullptr) {
  ConvCase c;
  c.name = std::move(name);
  c.x = std::move(x);
  c.w = std::move(w);
  c.activation = activation;
  if (set) set(c);
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Paths, NanThroughConv,
    ::testing::Values(conv_case("direct_1x1_relu", {2, 16, 7, 7}, {32, 16, 1, 1}, kRelu),
                      conv_case("direct_1x1_relu6", {2, 16, 7, 7}, {32, 16, 1, 1}, kRelu6),
                      conv_case("direct_7x7_stride2_relu", {1, 3, 15, 15}, {8, 3, 7, 7}, kRelu,
                                [](ConvCase& c) {
                                  c.strides = {2, 2};
                                  c.pads = {3, 3, 3, 3};
                                }),
                      conv_case("direct_3x3_stride2_relu", {2, 16, 9, 9}, {32, 16, 3, 3}, kRelu,
                                [](ConvCase& c) {
                                  c.strides = {2, 2};
                                  c.pads = {1, 1, 1, 1};
                                }),
                      conv_case("direct_residual_relu", {2, 16, 6, 6}, {16, 16, 1, 1}, kRelu,
                                [](ConvCase& c) { c.residual = true; }),
                      conv_case("direct_odd_channels_relu", {1, 5, 6, 6}, {7, 5, 3, 3}, kRelu,
                                [](ConvCase& c) {
                                  c.pads = {1, 1, 1, 1};
                                }),
                      conv_case("direct_odd_channels_clip_above_zero", {1, 5, 6, 6}, {7, 5, 1, 1},
                                kClipAboveZero),
                      conv_case("direct_residual_leaky_relu", {2, 16, 6, 6}, {16, 16, 1, 1},
                                kLeakyRelu, [](ConvCase& c) { c.residual = true; }),
                      conv_case("direct_1x1_silu", {2, 16, 7, 7}, {32, 16, 1, 1}, kSilu),
                      conv_case("direct_residual_silu", {2, 16, 6, 6}, {16, 16, 1, 1}, kSilu,
                                [](ConvCase& c) { c.residual = true; }),
                      conv_case("direct_1x1_mish", {2, 16, 7, 7}, {32, 16, 1, 1}, kMish),
                      // Winograd, then Mish as kiln's ActivationStep after it.
                      conv_case("winograd_residual_mish", {2, 16, 8, 8}, {16, 16, 3, 3}, kMish,
                                [](ConvCase& c) {
                                  c.pads = {1, 1, 1, 1};
                                  c.residual = true;
                                  c.winograd = true;
                                }),
                      conv_case("direct_odd_channels_silu", {2, 5, 6, 6}, {7, 5, 3, 3}, kSilu,
                                [](ConvCase& c) {
                                  c.pads = {1, 1, 1, 1};
                                }),
                      conv_case("winograd_silu", {2, 16, 8, 8}, {16, 16, 3, 3}, kSilu,
                                [](ConvCase& c) {
                                  c.pads = {1, 1, 1, 1};
                                  c.winograd = true;
                                }),
                      conv_case("winograd_leaky_relu", {2, 16, 8, 8}, {16, 16, 3, 3}, kLeakyRelu,
                                [](ConvCase& c) {
                                  c.pads = {1, 1, 1, 1};
                                  c.winograd = true;
                                }),
                      conv_case("winograd_relu", {2, 16, 8, 8}, {16, 16, 3, 3}, kRelu,
                                [](ConvCase& c) {
                                  c.pads = {1, 1, 1, 1};
                                  c.winograd = true;
                                }),
                      conv_case("winograd_residual_relu6", {1, 16, 7, 9}, {16, 16, 3, 3}, kRelu6,
                                [](ConvCase& c) {
                                  c.pads = {1, 1, 1, 1};
                                  c.residual = true;
                                  c.winograd = true;
                                })));

// Winograd F(4x4, 3x3) mixes a 6x6 patch's values, so a NaN would reach outputs whose window does
// not hold it, and a huge value would leave rounding errors of its size there (or overflow): a
// sample with such a value runs by F(2x2) (winograd_conv_op.cc). Sample 1 holds a NaN, sample 2 a
// value of 3e36 (beyond F(4x4)'s bound; by F(4x4) an output of 2.3 came out as 5e27), sample 0
// neither: 0 keeps the bits it gets alone, and 1 and 2 match the float64 reference.
TEST(NanThroughWinograd, ASampleWithANonFiniteOrHugeValueRunsByF2x2) {
  const ConcreteShape x_shape{3, 16, 8, 8}, w_shape{16, 16, 3, 3};
  const int64_t image = 16 * 8 * 8;
  Tensor x = planted(planted(random_tensor(x_shape, 71), {image + 3 * 64 + 4 * 8 + 4}),
                     {2 * image + 5 * 64 + 2 * 8 + 3}, 3e36f);
  Tensor w = random_tensor(w_shape, 72);
  Tensor b = random_tensor({16}, 73);
  ConvRef ref;
  ref.strides = ref.dilations = {1, 1};
  ref.pads_begin = ref.pads_end = {1, 1};
  ref.activation = kRelu;
  const Tensor expected = ref_conv(x, w, &b, nullptr, ref);

  auto run_conv = [&](const Tensor& input) {
    SpecBuilder s;
    const int32_t y = s.output("y", {input.shape()[0], 16, 8, 8});
    Attributes a;
    a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    a.set("kernel_shape", std::vector<int64_t>{3, 3});
    kernels::set_fused_activation(a, kRelu);
    s.dispatch("conv", "Conv",
               {s.input("x", input.shape()), s.constant("w", w), s.constant("b", b)}, {y}, a);
    return run(s, {input});
  };
  auto batch = run_conv(x);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  if (!winograd_layout_in(batch->steps)) GTEST_SKIP() << "no Winograd layout here";
  ASSERT_NE(batch->steps.find("conv winograd_4x4_3x3"), std::string::npos) << batch->steps;
  EXPECT_TRUE(keeps_nan(batch->outputs[0], expected)) << batch->steps;

  Tensor first = Tensor::create(DType::kF32, {1, 16, 8, 8}).value();
  std::copy_n(x.values<float>().begin(), image, first.mutable_values<float>().begin());
  auto alone = run_conv(first);
  ASSERT_TRUE(alone.ok()) << alone.status().to_string();
  EXPECT_EQ(std::memcmp(alone->outputs[0].values<float>().data(),
                        batch->outputs[0].values<float>().data(), image * sizeof(float)),
            0)
      << "sample 0 in a batch with a NaN sample against alone";
}

// SiLU is oneDNN's swish post-op: at the non-finite and extreme pre-activations it gives what
// Mul(y, Sigmoid(y)) gives (kernels/activation.h): NaN -> NaN, +inf -> +inf, -inf -> NaN
// (-inf * 0), large negative -> -0 or a tiny negative. A depthwise 1x1 conv with unit weights
// passes each value through as the pre-activation; odd channels give a padded blocked layout.
TEST(NanThroughConv, SiluAtNonFiniteAndExtremeValues) {
  const std::vector<float> specials = {kNaN,  kInf,   -kInf, -100.0f, -20.0f,  -0.0f, 0.0f,
                                       20.0f, 100.0f, 3e38f, -3e38f,  -1e-30f, 1e-30f};
  const int64_t channels = 5, spatial = static_cast<int64_t>(specials.size());
  const ConcreteShape shape{2, channels, 1, spatial};
  Tensor x = random_tensor(shape, 61);
  auto xv = x.mutable_values<float>();
  for (int64_t i = 0; i < x.element_count(); ++i) xv[i] = specials[i % spatial];
  Tensor w = random_tensor({channels, 1, 1, 1}, 62);
  for (float& v : w.mutable_values<float>()) v = 1.0f;
  ConvRef ref{{1, 1}, {0, 0}, {0, 0}, {1, 1}, channels, kSilu};
  Tensor expected = ref_conv(x, w, nullptr, nullptr, ref);

  SpecBuilder s;
  const int32_t y = s.output("y", shape);
  Attributes a;
  a.set("group", channels);
  a.set("kernel_shape", std::vector<int64_t>{1, 1});
  kernels::set_fused_activation(a, kSilu);
  s.dispatch("conv", "Conv", {s.input("x", shape), s.constant("w", w)}, {y}, a);
  auto r = run(s, {x});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(keeps_nan(r->outputs[0], expected)) << r->steps;
  const auto out = r->outputs[0].values<float>();
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], kInf);
  EXPECT_TRUE(std::isnan(out[2])) << out[2];
  EXPECT_EQ(out[9], 3e38f);
}

// BatchNormalization with kiln's fused relu, on a plain input and on a conv's blocked output.
TEST(NanThroughBatchNorm, FusedReluKeepsNaN) {
  for (bool after_conv : {false, true}) {
    SCOPED_TRACE(after_conv ? "after conv" : "plain");
    const ConcreteShape shape{2, 16, 5, 5};
    Tensor x = planted(random_tensor(shape, 41, -1.0f, 0.0f), {12, 60});
    Tensor scale = random_tensor({16}, 42, 0.5f, 1.5f), bias = random_tensor({16}, 43, -1.0f, 0.0f);
    Tensor mean = random_tensor({16}, 44), var = random_tensor({16}, 45, 0.1f, 2.0f);
    SpecBuilder s;
    const int32_t xi = s.input("x", shape);
    int32_t src = xi;
    Tensor bn_in = x;
    if (after_conv) {
      Tensor w = random_tensor({16, 16, 1, 1}, 46);
      ConvRef cr{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
      bn_in = ref_conv(x, w, nullptr, nullptr, cr);
      src = s.value("c", shape);
      s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {src});
    }
    const int32_t y = s.output("y", shape);
    s.dispatch("bn", "BatchNormalization",
               {src, s.constant("scale", scale), s.constant("B", bias), s.constant("mean", mean),
                s.constant("var", var)},
               {y}, attrs({{"epsilon", 1e-3}, {"kiln_activation", std::string("relu")}}));
    auto r = run(s, {x});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(keeps_nan(r->outputs[0], ref_batch_norm(bn_in, scale, bias, mean, var, 1e-3, true)))
        << r->steps;
  }
}

// Standalone Relu, Gelu, Sigmoid, Tanh, Exp, Elu, Softplus and Mish on a plain input and on a
// conv's blocked output. Gelu and Mish of -inf are NaN (x * Phi(x) = -inf * 0, x * tanh(0)) and of
// +inf +inf, as in ONNX Runtime; Sigmoid gives 0 and 1 there, Tanh -1 and 1, Exp and Softplus 0 and
// +inf, Elu -1
// (-alpha) and +inf.
TEST(NanThroughStandalone, ReluAndGelu) {
  const ConcreteShape shape{2, 8, 5, 5};
  Tensor x =
      planted(planted(planted(random_tensor(shape, 51, -2.0f, 0.5f), {3}), {7}, -kInf), {11}, kInf);
  Tensor w = random_tensor({8, 8, 1, 1}, 52);
  ConvRef cr{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  Tensor x_finite = planted(random_tensor(shape, 51, -2.0f, 0.5f), {3});
  Tensor conv_of_x = ref_conv(x_finite, w, nullptr, nullptr, cr);
  auto gelu = [](const Tensor& t) {
    Tensor y = t.clone();
    for (float& v : y.mutable_values<float>()) {
      const double d = v;
      v = static_cast<float>(0.5 * d * (1 + std::erf(d / std::sqrt(2.0))));
    }
    return y;
  };
  auto map = [](const Tensor& t, double (*f)(double)) {
    Tensor y = t.clone();
    for (float& v : y.mutable_values<float>()) v = static_cast<float>(f(v));
    return y;
  };
  auto sigmoid = [](double d) { return 1 / (1 + std::exp(-d)); };
  auto tanh = [](double d) { return std::tanh(d); };
  auto exp = [](double d) { return std::exp(d); };
  auto elu = [](double d) { return d < 0 ? std::expm1(d) : d; };
  auto softplus = [](double d) { return std::max(d, 0.0) + std::log1p(std::exp(-std::fabs(d))); };
  auto mish = [](double d) {
    return d * std::tanh(std::max(d, 0.0) + std::log1p(std::exp(-std::fabs(d))));
  };
  for (const char* op : {"Relu", "Gelu", "Sigmoid", "Tanh", "Exp", "Elu", "Softplus", "Mish"}) {
    SCOPED_TRACE(op);
    SpecBuilder s;
    const int32_t xi = s.input("x", shape), xf = s.input("x_finite", shape);
    const int32_t c = s.value("c", shape);
    const int32_t y1 = s.output("y1", shape), y2 = s.output("y2", shape);
    s.dispatch("plain", op, {xi}, {y1});
    s.dispatch("conv", "Conv", {xf, s.constant("w", w)}, {c});
    s.dispatch("blocked", op, {c}, {y2});
    auto r = run(s, {x, x_finite});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const std::string type = op;
    auto want = [&](const Tensor& t) {
      if (type == "Relu") return ref_relu(t);
      if (type == "Gelu") return gelu(t);
      if (type == "Exp") return map(t, +exp);
      if (type == "Elu") return map(t, +elu);
      if (type == "Softplus") return map(t, +softplus);
      if (type == "Mish") return map(t, +mish);
      return map(t, type == "Sigmoid" ? +sigmoid : +tanh);
    };
    EXPECT_TRUE(keeps_nan(r->outputs[0], want(x))) << r->steps;
    EXPECT_TRUE(keeps_nan(r->outputs[1], want(conv_of_x))) << r->steps;
    const auto plain = r->outputs[0].values<float>();
    if (type == "Relu") {
      EXPECT_EQ(plain[11], kInf);
      EXPECT_EQ(plain[7], 0.0f);
    } else if (type == "Gelu" || type == "Mish") {
      EXPECT_EQ(plain[11], kInf);
      EXPECT_TRUE(std::isnan(plain[7]));
    } else if (type == "Exp" || type == "Elu" || type == "Softplus") {
      EXPECT_EQ(plain[11], kInf);
      EXPECT_EQ(plain[7], type == "Elu" ? -1.0f : 0.0f);
    } else {
      EXPECT_EQ(plain[11], 1.0f);
      EXPECT_EQ(plain[7], type == "Sigmoid" ? 0.0f : -1.0f);
    }
  }
}

// Gelu, Sigmoid, Tanh, Exp and Elu give the exact functions' values at NaN and +-inf wherever those
// sit in a tensor of several of the edge step's chunks (it rewrites a chunk only when a vectorized
// scan finds a non-finite value there). oneDNN 2.6's AVX2 and AVX-512 kernels already give these
// values; the step guards the kernels that clamp their input.
TEST(NanThroughStandalone, EdgeValuesInLaterChunks) {
  const ConcreteShape shape{4, 17, 1031};  // 70108 floats: 5 chunks of 16384
  Tensor x =
      planted(planted(planted(random_tensor(shape, 53, -2.0f, 2.0f), {20000}), {40001}, -kInf),
              {70100}, kInf);
  for (const char* op : {"Gelu", "Sigmoid", "Tanh", "Exp", "Elu"}) {
    SCOPED_TRACE(op);
    SpecBuilder s;
    const int32_t y = s.output("y", shape);
    const std::string type = op;
    s.dispatch("op", op, {s.input("x", shape)}, {y},
               type == "Elu" ? attrs({{"alpha", 0.5}}) : Attributes{});
    auto r = run(s, {x});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const auto out = r->outputs[0].values<float>();
    EXPECT_TRUE(std::isnan(out[20000]));
    EXPECT_EQ(nan_count(r->outputs[0]), type == "Gelu" ? 2 : 1);
    if (type == "Gelu") {
      EXPECT_TRUE(std::isnan(out[40001]));
      EXPECT_EQ(out[70100], kInf);
    } else if (type == "Exp" || type == "Elu") {
      EXPECT_EQ(out[40001], type == "Exp" ? 0.0f : -0.5f);
      EXPECT_EQ(out[70100], kInf);
    } else {
      EXPECT_EQ(out[40001], type == "Sigmoid" ? 0.0f : -1.0f);
      EXPECT_EQ(out[70100], 1.0f);
    }
  }
}

// MatMul and Gemm (oneDNN) feed a Relu: the NaN row stays NaN.
TEST(NanThroughStandalone, MatMulAndGemmThenRelu) {
  Tensor a = planted(random_tensor({4, 8}, 61), {11});  // row 1
  Tensor b = random_tensor({8, 5}, 62, -1.0f, 0.0f);
  for (const char* op : {"MatMul", "Gemm"}) {
    SCOPED_TRACE(op);
    SpecBuilder s;
    const int32_t ai = s.input("a", {4, 8});
    const int32_t m = s.value("m", {4, 5});
    const int32_t y = s.output("y", {4, 5});
    s.dispatch("mm", op, {ai, s.constant("b", b)}, {m});
    s.dispatch("relu", "Relu", {m}, {y});
    auto r = run(s, {a});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(keeps_nan(r->outputs[0], ref_relu(ref_matmul(a, b)))) << r->steps;
    EXPECT_EQ(nan_count(r->outputs[0]), 5);
  }
}

// MaxPool and GlobalMaxPool on oneDNN (whose max skips a NaN): a window holding a NaN gives NaN,
// as PyTorch and the portable kernel do; a window with +inf and -inf but no NaN gives +inf.
TEST(NanThroughPooling, MaxPoolWindowsWithNaN) {
  const ConcreteShape shape{1, 8, 6, 6};
  // Channel 0: NaN at (1, 1). Channel 1: +inf at (3, 2), -inf at (3, 3).
  Tensor x =
      planted(planted(planted(random_tensor(shape, 81), {7}), {36 + 20}, kInf), {36 + 21}, -kInf);
  Tensor x_nan = planted(random_tensor(shape, 83), {7});
  SpecBuilder s;
  const int32_t xi = s.input("x", shape), xn = s.input("x_nan", shape);
  const int32_t c = s.value("c", shape);
  const int32_t y1 = s.output("y1", {1, 8, 3, 3}), y2 = s.output("y2", {1, 8, 3, 3});
  const int32_t g = s.output("g", {1, 8, 1, 1});
  const Attributes a = attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                              {"strides", std::vector<int64_t>{2, 2}},
                              {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  s.dispatch("plain", "MaxPool", {xi}, {y1}, a);
  s.dispatch("conv", "Conv", {xn, s.constant("w", random_tensor({8, 8, 1, 1}, 82))}, {c});
  s.dispatch("blocked", "MaxPool", {c}, {y2}, a);
  s.dispatch("global", "GlobalMaxPool", {xi}, {g});
  auto r = run(s, {x, x_nan});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Windows cover rows and columns [2o - 1, 2o + 1]: (1, 1) is in windows 0 and 1 of each axis.
  const auto plain = r->outputs[0].values<float>();
  for (int i = 0; i < 9; ++i) EXPECT_EQ(std::isnan(plain[i]), i == 0 || i == 1 || i == 3 || i == 4);
  EXPECT_EQ(nan_count(r->outputs[0]), 4);
  EXPECT_EQ(plain[9 + 4], kInf);  // channel 1, window (1, 1): +inf and -inf
  // After the 1x1 conv every channel is NaN at (1, 1): 4 windows in each of 8 channels.
  EXPECT_EQ(nan_count(r->outputs[1]), 32) << r->steps;
  const auto global = r->outputs[2].values<float>();
  EXPECT_TRUE(std::isnan(global[0]));
  EXPECT_EQ(global[1], kInf);
  for (int i = 2; i < 8; ++i) EXPECT_TRUE(std::isfinite(global[i])) << i;
}

// Softmax on oneDNN, along every axis: a lane (the elements normalized together) holding a NaN
// or +inf, or only -inf, is NaN in every element, as exp(x - max) / sum gives and ONNX Runtime
// and PyTorch compute (oneDNN 2.6 gave a lane with a NaN or +inf along the last axis one NaN and
// zeros). A -inf beside finite values is an exact 0 and leaves its lane finite.
TEST(NanThroughSoftmax, LaneWithNaNOrInfIsNaN) {
  const ConcreteShape shape{2, 3, 4, 5};
  // Flat 7 = [0,0,1,2]: NaN. Flat 64 = [1,0,0,4]: +inf. Flat 100 = [1,2,0,0]: -inf. The lane
  // along the axis through [1,2,3,4] (flat 119): -inf only.
  const Tensor planted_x = planted(
      planted(planted(random_tensor(shape, 91, -3.0f, 3.0f), {7}), {64}, kInf), {100}, -kInf);
  const int64_t strides[] = {60, 20, 5, 1};
  for (int64_t axis : {-1, 3, 2, 1, 0, -4}) {
    SCOPED_TRACE(fmt::format("axis {}", axis));
    const int64_t a = axis < 0 ? axis + 4 : axis;
    Tensor x = planted_x.clone();
    for (int64_t k = 0; k < shape[a]; ++k) {
      x.mutable_values<float>()[119 - (shape[a] - 1 - k) * strides[a]] = -kInf;
    }
    SpecBuilder s;
    const int32_t xi = s.input("x", shape);
    const int32_t y = s.output("y", shape);
    s.dispatch("softmax", "Softmax", {xi}, {y}, attrs({{"axis", axis}}));
    auto r = run(s, {x});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(keeps_nan(r->outputs[0], ref_softmax(x, axis))) << r->steps;
    EXPECT_EQ(nan_count(r->outputs[0]), 3 * shape[a]) << r->steps;  // three lanes, all NaN
    EXPECT_EQ(r->outputs[0].values<float>()[100], 0.0f);
  }
}

// The same after a conv that writes a blocked layout (reordered to plain for the softmax), with
// one NaN pixel: every channel of that pixel is NaN after the 1x1 conv, so along the channel axis
// that one lane is NaN; along the last axis that pixel's row in every channel.
TEST(NanThroughSoftmax, AfterBlockedConv) {
  const ConcreteShape shape{2, 16, 3, 4};
  const Tensor x = planted(random_tensor(shape, 92), {5});  // [0, 0, 1, 1]
  const Tensor w = random_tensor({16, 16, 1, 1}, 93);
  const ConvRef cr{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  const Tensor c = ref_conv(x, w, nullptr, nullptr, cr);
  for (int64_t axis : {1, -1}) {
    SCOPED_TRACE(fmt::format("axis {}", axis));
    SpecBuilder s;
    const int32_t xi = s.input("x", shape);
    const int32_t ci = s.value("c", shape);
    const int32_t y = s.output("y", shape);
    s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {ci});
    s.dispatch("softmax", "Softmax", {ci}, {y}, attrs({{"axis", axis}}));
    auto r = run(s, {x});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(keeps_nan(r->outputs[0], ref_softmax(c, axis))) << r->steps;
    EXPECT_EQ(nan_count(r->outputs[0]), axis == 1 ? 16 : 16 * 4) << r->steps;
  }
}

// A NaN beside +inf in a MaxPool window: oneDNN's max is +inf and the average mask is NaN, as for
// a window with +inf and -inf only; the backend reads such windows' taps to tell them apart. On a
// plain input and on a blocked one (a conv's output plus the planted values), with windows that
// do not overlap and with padded, dilated, overlapping ones (against ref_pool, whose max keeps
// NaN).
TEST(NanThroughPooling, MaxPoolNaNBesideInfinity) {
  const ConcreteShape shape{1, 8, 6, 6};
  // Channel 0, 2x2 windows k = 3 * row + col: k0 {NaN, +inf}, k1 {+inf, -inf}, k2 {NaN, +inf,
  // -inf}, k3 {NaN}, k4 {-inf, NaN}. Channel 3, k8: {+inf}. Channel 5: +inf, -inf, NaN apart.
  Tensor p = Tensor::create(DType::kF32, shape).value();  // zeros
  p = planted(
      planted(planted(p, {0, 4, 12, 21, 36 * 5 + 14}), {7, 2, 5, 108 + 28, 36 * 5 + 0}, kInf),
      {9, 10, 14, 36 * 5 + 35}, -kInf);
  const Tensor x = random_tensor(shape, 95);
  const Tensor w = random_tensor({8, 8, 1, 1}, 96);
  const ConvRef cr{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  const Tensor x_plus_p = ref_binary('+', x, p);
  const Tensor c_plus_p = ref_binary('+', ref_conv(x, w, nullptr, nullptr, cr), p);
  SpecBuilder s;
  const int32_t xi = s.input("x", shape), pi = s.input("p", shape);
  const int32_t sum = s.value("sum", shape), c = s.value("c", shape), blocked = s.value("b", shape);
  const int32_t y_plain = s.output("y_plain", {1, 8, 3, 3});
  const int32_t y_blocked = s.output("y_blocked", {1, 8, 3, 3});
  const int32_t y_padded = s.output("y_padded", {1, 8, 3, 2});
  const Attributes two = attrs(
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  const Attributes padded = attrs({{"kernel_shape", std::vector<int64_t>{3, 2}},
                                   {"strides", std::vector<int64_t>{2, 3}},
                                   {"dilations", std::vector<int64_t>{1, 2}},
                                   {"pads", std::vector<int64_t>{1, 1, 1, 0}}});
  s.dispatch("sum", "Add", {xi, pi}, {sum});
  s.dispatch("plain", "MaxPool", {sum}, {y_plain}, two);
  s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {c});
  s.dispatch("add", "Add", {c, pi}, {blocked});
  s.dispatch("blocked", "MaxPool", {blocked}, {y_blocked}, two);
  s.dispatch("padded", "MaxPool", {blocked}, {y_padded}, padded);
  auto r = run(s, {x, p});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (int i : {0, 1}) {
    SCOPED_TRACE(i == 0 ? "plain" : "blocked");
    const auto y = r->outputs[i].values<float>();
    for (int k = 0; k < 5; ++k) EXPECT_EQ(std::isnan(y[k]), k != 1) << "window " << k;
    EXPECT_EQ(y[1], kInf);
    EXPECT_EQ(y[27 + 8], kInf);
    EXPECT_EQ(nan_count(r->outputs[i]), 4 + 1) << r->steps;  // channel 5: one window with NaN
    PoolRef pr{true, false, {2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, {1, 8, 3, 3}};
    EXPECT_TRUE(keeps_nan(r->outputs[i], ref_pool(i == 0 ? x_plus_p : c_plus_p, pr))) << r->steps;
  }
  PoolRef pr{true, false, {3, 2}, {2, 3}, {1, 1}, {1, 0}, {1, 2}, {1, 8, 3, 2}};
  EXPECT_TRUE(keeps_nan(r->outputs[2], ref_pool(c_plus_p, pr))) << r->steps;
}

// Activations the portable kernels run on the CPU backend, and ONNX Clip / Max / Min: a NaN in
// gives a NaN out at the same place, the other elements finite. (ONNX Runtime 1.30 agrees for
// each; Shrink and ThresholdedRelu map NaN to 0 by their definitions, in ONNX Runtime too.)
TEST(NanThroughStandalone, PortableActivations) {
  const ConcreteShape shape{1, 3, 4};
  Tensor x = planted(random_tensor(shape, 71, -3.0f, 3.0f), {0, 5});
  Tensor lo = Tensor::create(DType::kF32, {}).value(), hi = Tensor::create(DType::kF32, {}).value();
  lo.mutable_values<float>()[0] = 0;
  hi.mutable_values<float>()[0] = 6;
  struct Op {
    const char* type;
    Attributes attributes;
    bool clip_bounds = false;
    bool zero_second = false;  // Max / Min / PRelu against a constant second input
  };
  const std::vector<Op> ops = {
      {"LeakyRelu", attrs({{"alpha", 0.1}})},
      {"Sigmoid", {}},
      {"HardSigmoid", attrs({{"alpha", 0.2}, {"beta", 0.5}})},
      {"HardSwish", {}},
      {"Selu", {}},
      {"Celu", {}},
      {"Softsign", {}},
      {"Tanh", {}},
      {"Clip", {}, true},
      {"Max", {}, false, true},
      {"Min", {}, false, true},
      {"PRelu", {}, false, true},
  };
  for (const Op& op : ops) {
    SCOPED_TRACE(op.type);
    SpecBuilder s;
    std::vector<int32_t> ins{s.input("x", shape)};
    if (op.clip_bounds) {
      ins.push_back(s.constant("lo", lo));
      ins.push_back(s.constant("hi", hi));
    }
    if (op.zero_second) ins.push_back(s.constant("k", Tensor::create(DType::kF32, {1}).value()));
    const int32_t y = s.output("y", shape);
    s.dispatch("op", op.type, ins, {y}, op.attributes);
    auto r = run(s, {x});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const auto v = r->outputs[0].values<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      if (i == 0 || i == 5) {
        EXPECT_TRUE(std::isnan(v[i])) << "element " << i << ": " << v[i];
      } else {
        EXPECT_TRUE(std::isfinite(v[i])) << "element " << i << ": " << v[i];
      }
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
