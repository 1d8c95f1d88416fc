// f16 and bf16 Conv, MatMul, Gemm, pooling and BatchNormalization on the CPU backend's oneDNN
// paths (conv_op.cc, matmul_op.cc, pool_op.cc, batch_norm_op.cc) against the portable kernels (the
// ops' definitions, run by run_op) on the same f16/bf16 data, and which path a dispatch takes. Both
// sides sum in f32 and round the result (after bias, residual, activation, alpha and beta * C) once
// to the output's type, so they differ by at most about one unit in the last place: the tolerances
// below allow two (f16: 11 significant bits, rtol 2^-9; bf16: 8 bits, rtol 2^-6), with an absolute
// term for sums that cancel to near zero, where the f32 sums' own rounding order shows.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kiln/base/half.h"
#include "kiln/hal/cpu/convert_step.h"
#include "kiln/hal/cpu/cpu_device.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/kernels/run_op.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

Tolerance tolerance_for(DType dtype) {
  return dtype == DType::kF16 ? Tolerance{.atol = 1e-3, .rtol = 1.0 / 512}
                              : Tolerance{.atol = 1e-2, .rtol = 1.0 / 64};
}

// Uniform [-1, 1) data rounded to `dtype`.
Tensor random_of(DType dtype, const ConcreteShape& shape, uint32_t seed) {
  return make_tensor(dtype, shape, values_of(random_tensor(shape, seed)));
}

// Prepares and runs the spec; `steps` receives the descriptions of the first dispatch's steps.
StatusOr<std::vector<Tensor>> prepare_and_run(SpecBuilder& s, const std::vector<Tensor>& inputs,
                                              std::string& steps) {
  KILN_ASSIGN_OR_RETURN(auto device, create_cpu_device({}));
  KILN_RETURN_IF_ERROR(device->supports(s.spec().dispatches[0], s.spec().values));
  KILN_ASSIGN_OR_RETURN(auto exe, device->prepare(s.spec()));
  steps = fmt::format("{}", fmt::join(exe->describe_dispatch(0), "\n"));
  return run_program(*exe, s.spec(), inputs);
}

// The dispatch ran on oneDNN (`what` names the step, e.g. "conv" or "matmul"), not the portable
// kernel.
void expect_onednn(const std::string& steps, const std::string& what) {
  EXPECT_NE(steps.find(fmt::format(": {} ", what)), std::string::npos) << steps;
  EXPECT_EQ(steps.find("portable"), std::string::npos) << steps;
}

const kernels::FusedActivation kRelu{kernels::FusedActivation::Kind::kRelu};
const kernels::FusedActivation kRelu6{kernels::FusedActivation::Kind::kClip, 0.0, 6.0};

struct HalfConvCase {
  std::string name;
  ConcreteShape x, w;
  std::vector<int64_t> strides, pads, dilations;  // empty: attribute absent
  int64_t group = 1;
  bool bias = true;
  bool residual = false;
  kernels::FusedActivation activation;
  bool constant_weights = true;
};

HalfConvCase conv_case(std::string name, ConcreteShape x, ConcreteShape w,
                       void (*set)(HalfConvCase&) = nullptr) {
  HalfConvCase c;
  c.name = std::move(name);
  c.x = std::move(x);
  c.w = std::move(w);
  if (set) set(c);
  return c;
}

class CpuHalfConvTest : public ::testing::TestWithParam<std::tuple<HalfConvCase, DType>> {};

TEST_P(CpuHalfConvTest, MatchesPortableKernel) {
  const auto& [c, dtype] = GetParam();
  Attributes a;
  a.set("group", c.group);
  if (!c.strides.empty()) a.set("strides", c.strides);
  if (!c.pads.empty()) a.set("pads", c.pads);
  if (!c.dilations.empty()) a.set("dilations", c.dilations);
  a.set("kernel_shape", std::vector<int64_t>(c.w.begin() + 2, c.w.end()));
  kernels::set_fused_activation(a, c.activation);

  Tensor x = random_of(dtype, c.x, 1);
  Tensor w = random_of(dtype, c.w, 2);
  Tensor b = random_of(dtype, {c.w[0]}, 3);
  auto probe = run_op("Conv", {value(x), value(w)}, a);
  ASSERT_TRUE(probe.ok()) << probe.status().to_string();
  const ConcreteShape y_shape = (*probe)[0].shape();
  Tensor res = random_of(dtype, y_shape, 4);
  auto portable = run_op(
      "Conv",
      {value(x), value(w), c.bias ? value(b) : absent(), c.residual ? value(res) : absent()}, a);
  ASSERT_TRUE(portable.ok()) << portable.status().to_string();
  const Tensor& expected = (*portable)[0];
  ASSERT_EQ(expected.dtype(), dtype);

  SpecBuilder s;
  std::vector<Tensor> inputs{x};
  const int32_t xi = s.input("x", c.x, dtype);
  int32_t wi;
  if (c.constant_weights) {
    wi = s.constant("w", w);
  } else {
    wi = s.input("w", c.w, dtype);
    inputs.push_back(w);
  }
  std::vector<int32_t> ins{xi, wi, c.bias ? s.constant("b", b) : -1};
  if (c.residual) {
    ins.push_back(s.input("res", y_shape, dtype));
    inputs.push_back(res);
  }
  while (!ins.empty() && ins.back() < 0) ins.pop_back();
  const int32_t y = s.output("y", y_shape, dtype);
  s.dispatch("conv", "Conv", ins, {y}, a);

  std::string steps;
  auto out = prepare_and_run(s, inputs, steps);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ((*out)[0].dtype(), dtype);
  EXPECT_TRUE(all_close((*out)[0], expected, tolerance_for(dtype))) << steps;
  expect_onednn(steps, "conv");
}

std::string conv_name(const ::testing::TestParamInfo<std::tuple<HalfConvCase, DType>>& info) {
  return std::get<0>(info.param).name + "_" + std::string(dtype_name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuHalfConvTest,
    ::testing::Combine(
        ::testing::Values(conv_case("basic_3x3_relu", {2, 16, 8, 8}, {16, 16, 3, 3},
                                    [](HalfConvCase& c) {
                                      c.pads = {1, 1, 1, 1};
                                      c.activation = kRelu;
                                    }),
                          conv_case("stride2_asymmetric_pads_relu6", {2, 8, 9, 10}, {24, 8, 3, 3},
                                    [](HalfConvCase& c) {
                                      c.strides = {2, 2};
                                      c.pads = {0, 1, 2, 1};
                                      c.activation = kRelu6;
                                    }),
                          conv_case("dilation2", {1, 16, 12, 12}, {8, 16, 3, 3},
                                    [](HalfConvCase& c) {
                                      c.dilations = {2, 2};
                                      c.pads = {2, 2, 2, 2};
                                    }),
                          conv_case("group4_relu", {2, 16, 7, 7}, {32, 4, 3, 3},
                                    [](HalfConvCase& c) {
                                      c.group = 4;
                                      c.pads = {1, 1, 1, 1};
                                      c.activation = kRelu;
                                    }),
                          conv_case("depthwise_stride2", {1, 24, 10, 10}, {24, 1, 3, 3},
                                    [](HalfConvCase& c) {
                                      c.group = 24;
                                      c.strides = {2, 2};
                                      c.pads = {1, 1, 1, 1};
                                    }),
                          conv_case("pointwise_no_bias", {2, 64, 6, 6}, {32, 64, 1, 1},
                                    [](HalfConvCase& c) { c.bias = false; }),
                          conv_case("residual_relu", {2, 16, 8, 8}, {16, 16, 3, 3},
                                    [](HalfConvCase& c) {
                                      c.pads = {1, 1, 1, 1};
                                      c.residual = true;
                                      c.activation = kRelu;
                                    }),
                          conv_case("odd_channels_5_to_7_residual", {2, 5, 6, 6}, {7, 5, 3, 3},
                                    [](HalfConvCase& c) {
                                      c.pads = {1, 1, 1, 1};
                                      c.residual = true;
                                    }),
                          conv_case("conv1d", {2, 8, 20}, {16, 8, 3}),
                          conv_case("conv3d", {1, 8, 6, 6, 6}, {8, 8, 3, 3, 3}),
                          conv_case("weights_not_constant", {2, 16, 6, 6}, {16, 16, 3, 3},
                                    [](HalfConvCase& c) {
                                      c.constant_weights = false;
                                      c.pads = {1, 1, 1, 1};
                                    }),
                          conv_case("batch3_stride3", {3, 16, 11, 11}, {16, 16, 3, 3},
                                    [](HalfConvCase& c) {
                                      c.strides = {3, 3};
                                    })),
        ::testing::Values(DType::kF16, DType::kBF16)),
    conv_name);

// Two convs and a MaxPool in a row keep the intermediates in oneDNN's blocked layout, in the
// values' own type, and a portable op (Sigmoid) reads the last one back as plain.
TEST(CpuHalfConvTest, BlockedIntermediateFeedsConvPoolAndPortableOp) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = random_of(dtype, {2, 16, 8, 8}, 1);
    Tensor w1 = random_of(dtype, {32, 16, 3, 3}, 2), w2 = random_of(dtype, {32, 32, 1, 1}, 3);
    ConvRef ref;
    ref.strides = {1, 1};
    ref.dilations = {1, 1};
    ref.pads_begin = {1, 1};
    ref.pads_end = {1, 1};
    ref.activation = kRelu;
    Tensor h = ref_conv(x, w1, nullptr, nullptr, ref);
    ref.pads_begin = ref.pads_end = {0, 0};
    ref.activation = {};
    Tensor g = ref_conv(h, w2, nullptr, nullptr, ref);
    const Attributes pool_attrs = attrs(
        {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
    Tensor pooled = reference("MaxPool", {g}, pool_attrs);
    Tensor expected = reference("Sigmoid", {pooled});

    SpecBuilder s;
    const int32_t xi = s.input("x", x.shape(), dtype);
    const int32_t hi = s.value("h", h.shape(), dtype);
    const int32_t gi = s.value("g", g.shape(), dtype);
    const int32_t pi = s.value("p", pooled.shape(), dtype);
    const int32_t y = s.output("y", expected.shape(), dtype);
    Attributes a1 = attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    kernels::set_fused_activation(a1, kRelu);
    s.dispatch("conv1", "Conv", {xi, s.constant("w1", w1)}, {hi}, a1);
    s.dispatch("conv2", "Conv", {hi, s.constant("w2", w2)}, {gi});
    s.dispatch("pool", "MaxPool", {gi}, {pi}, pool_attrs);
    s.dispatch("sigmoid", "Sigmoid", {pi}, {y});
    auto device = create_cpu_device({});
    ASSERT_TRUE(device.ok()) << device.status().to_string();
    auto exe = (*device)->prepare(s.spec());
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    auto out = run_program(**exe, s.spec(), {x});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(all_close((*out)[0], expected, tolerance_for(dtype)));
    const std::string conv2 = fmt::format("{}", fmt::join((*exe)->describe_dispatch(1), "\n"));
    expect_onednn(conv2, "conv");
    // The dispatch's summary names the stored type of the output it converts to.
    EXPECT_NE(conv2.find(fmt::format("-> {} ", dtype_name(dtype))), std::string::npos) << conv2;
    const std::string pool = fmt::format("{}", fmt::join((*exe)->describe_dispatch(2), "\n"));
    expect_onednn(pool, "pool");
    const std::string sigmoid = fmt::format("{}", fmt::join((*exe)->describe_dispatch(3), "\n"));
    EXPECT_NE(sigmoid.find("portable Sigmoid"), std::string::npos) << sigmoid;
  }
}

// A residual block's f16/bf16 Relu and Add (operands of the output's shape) run in f32 in the
// conv's blocked layout and round once, as the portable kernels do: no trip through plain f16.
// An Add that broadcasts stays on the portable kernel.
TEST(CpuHalfConvTest, ReluAndSameShapeAddKeepTheBlockedLayout) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = random_of(dtype, {2, 16, 8, 8}, 4);
    Tensor w = random_of(dtype, {16, 16, 3, 3}, 5);
    Tensor bias = random_of(dtype, {1, 16, 1, 1}, 6);
    ConvRef ref;
    ref.strides = {1, 1};
    ref.dilations = {1, 1};
    ref.pads_begin = ref.pads_end = {1, 1};
    Tensor h = ref_conv(x, w, nullptr, nullptr, ref);
    Tensor r = reference("Relu", {h});
    Tensor sum = reference("Add", {r, h});
    Tensor expected = reference("Add", {sum, bias});

    SpecBuilder s;
    const int32_t xi = s.input("x", x.shape(), dtype);
    const int32_t hi = s.value("h", h.shape(), dtype);
    const int32_t ri = s.value("r", r.shape(), dtype);
    const int32_t si = s.value("s", sum.shape(), dtype);
    const int32_t y = s.output("y", expected.shape(), dtype);
    s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {hi},
               attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
    s.dispatch("relu", "Relu", {hi}, {ri});
    s.dispatch("add", "Add", {ri, hi}, {si});
    s.dispatch("bias", "Add", {si, s.constant("b", bias)}, {y});
    auto device = create_cpu_device({});
    ASSERT_TRUE(device.ok()) << device.status().to_string();
    auto exe = (*device)->prepare(s.spec());
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    auto out = run_program(**exe, s.spec(), {x});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(all_close((*out)[0], expected, tolerance_for(dtype)));
    const std::string relu = fmt::format("{}", fmt::join((*exe)->describe_dispatch(1), "\n"));
    EXPECT_NE(relu.find("relu (kiln"), std::string::npos) << relu;
    EXPECT_EQ(relu.find("portable"), std::string::npos) << relu;
    EXPECT_EQ(relu.find("plain"), std::string::npos) << relu;
    const std::string add = fmt::format("{}", fmt::join((*exe)->describe_dispatch(2), "\n"));
    expect_onednn(add, "binary");
    EXPECT_EQ(add.find("plain"), std::string::npos) << add;
    const std::string broadcast = fmt::format("{}", fmt::join((*exe)->describe_dispatch(3), "\n"));
    EXPECT_NE(broadcast.find("portable Add"), std::string::npos) << broadcast;
  }
}

// An f16 conv takes the oneDNN path, computing in f16 only where oneDNN has kernels for it;
// bf16 computes in bf16 on CPUs with AVX-512 bf16 instructions (oneDNN's avx512_core_bf16).
TEST(CpuHalfConvTest, F16AndBf16ConvsTakeTheOneDnnPath) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    SpecBuilder s;
    const int32_t x = s.input("x", {1, 32, 14, 14}, dtype);
    const int32_t y = s.output("y", {1, 32, 14, 14}, dtype);
    s.dispatch("conv", "Conv",
               {x, s.constant("w", random_of(dtype, {32, 32, 3, 3}, 1)),
                s.constant("b", random_of(dtype, {32}, 2))},
               {y}, attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
    std::string steps;
    auto out = prepare_and_run(s, {random_of(dtype, {1, 32, 14, 14}, 3)}, steps);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    expect_onednn(steps, "conv");
    const bool native_bf16 = steps.find("avx512_core_bf16") != std::string::npos;
    if (dtype == DType::kBF16 && native_bf16) {
      // X is read in bf16 by the bf16 kernel: no conversion step before the conv.
      EXPECT_NE(steps.find("avx512_core_bf16 bf16 "), std::string::npos) << steps;
    }
    if (dtype == DType::kF16) {
      EXPECT_FALSE(native_bf16) << steps;
    }
  }
}

struct HalfMatMulCase {
  ConcreteShape a, b;
  bool constant_b;
};

class CpuHalfMatMulTest : public ::testing::TestWithParam<std::tuple<HalfMatMulCase, DType>> {};

TEST_P(CpuHalfMatMulTest, MatchesPortableKernel) {
  const auto& [c, dtype] = GetParam();
  Tensor a = random_of(dtype, c.a, 1), b = random_of(dtype, c.b, 2);
  auto portable = run_op("MatMul", {value(a), value(b)});
  ASSERT_TRUE(portable.ok()) << portable.status().to_string();
  const Tensor& expected = (*portable)[0];
  ASSERT_EQ(expected.dtype(), dtype);
  SpecBuilder s;
  std::vector<Tensor> inputs{a};
  const int32_t ai = s.input("a", c.a, dtype);
  int32_t bi;
  if (c.constant_b) {
    bi = s.constant("b", b);
  } else {
    bi = s.input("b", c.b, dtype);
    inputs.push_back(b);
  }
  const int32_t y = s.output("y", expected.shape(), dtype);
  s.dispatch("mm", "MatMul", {ai, bi}, {y});
  std::string steps;
  auto out = prepare_and_run(s, inputs, steps);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], expected, tolerance_for(dtype))) << steps;
  expect_onednn(steps, "matmul");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuHalfMatMulTest,
    ::testing::Combine(::testing::Values(HalfMatMulCase{{4, 5}, {5, 6}, true},
                                         HalfMatMulCase{{7, 33}, {33, 18}, false},
                                         // Batched, and B broadcast over A's leading dims (one
                                         // matrix, and batch dims of 1).
                                         HalfMatMulCase{{3, 4, 40}, {3, 40, 6}, false},
                                         HalfMatMulCase{{2, 3, 5, 16}, {16, 40}, true},
                                         HalfMatMulCase{{2, 1, 9, 8}, {1, 4, 8, 16}, false},
                                         HalfMatMulCase{{1, 4, 5}, {3, 5, 6}, true},
                                         // 1-D operands.
                                         HalfMatMulCase{{5}, {2, 5, 6}, false},
                                         HalfMatMulCase{{2, 4, 5}, {5}, true}),
                       ::testing::Values(DType::kF16, DType::kBF16)));

struct HalfGemmCase {
  bool trans_a, trans_b;
  double alpha, beta;
  std::optional<ConcreteShape> c;
  bool constant_b;
};

class CpuHalfGemmTest : public ::testing::TestWithParam<std::tuple<HalfGemmCase, DType>> {};

TEST_P(CpuHalfGemmTest, MatchesPortableKernel) {
  const auto& [g, dtype] = GetParam();
  const int64_t m = 9, k = 37, n = 19;
  const ConcreteShape as = g.trans_a ? ConcreteShape{k, m} : ConcreteShape{m, k};
  const ConcreteShape bs = g.trans_b ? ConcreteShape{n, k} : ConcreteShape{k, n};
  Tensor a = random_of(dtype, as, 1), b = random_of(dtype, bs, 2);
  Tensor c = g.c ? random_of(dtype, *g.c, 3) : Tensor();
  SpecBuilder s;
  std::vector<Tensor> inputs{a};
  std::vector<int32_t> ins{s.input("a", as, dtype)};
  if (g.constant_b) {
    ins.push_back(s.constant("b", b));
  } else {
    ins.push_back(s.input("b", bs, dtype));
    inputs.push_back(b);
  }
  if (g.c) ins.push_back(s.constant("c", c));
  const int32_t y = s.output("y", {m, n}, dtype);
  const Attributes gemm_attrs = attrs({{"transA", int64_t{g.trans_a}},
                                       {"transB", int64_t{g.trans_b}},
                                       {"alpha", g.alpha},
                                       {"beta", g.beta}});
  s.dispatch("gemm", "Gemm", ins, {y}, gemm_attrs);
  auto portable = run_op("Gemm", {value(a), value(b), g.c ? value(c) : absent()}, gemm_attrs);
  ASSERT_TRUE(portable.ok()) << portable.status().to_string();
  const Tensor& expected = (*portable)[0];
  ASSERT_EQ(expected.dtype(), dtype);
  std::string steps;
  auto out = prepare_and_run(s, inputs, steps);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], expected, tolerance_for(dtype))) << steps;
  expect_onednn(steps, "gemm");
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuHalfGemmTest,
    ::testing::Combine(
        ::testing::Values(HalfGemmCase{false, false, 1.0, 1.0, std::nullopt, true},
                          HalfGemmCase{false, true, 1.0, 1.0, ConcreteShape{19}, true},
                          HalfGemmCase{true, false, 0.5, 2.0, ConcreteShape{1, 19}, false},
                          HalfGemmCase{true, true, -1.5, 0.25, ConcreteShape{9, 1}, true},
                          HalfGemmCase{false, false, 2.0, 1.0, ConcreteShape{9, 19}, false}),
        ::testing::Values(DType::kF16, DType::kBF16)));

class CpuHalfPoolBnTest : public ::testing::TestWithParam<DType> {};

// Pooling runs oneDNN's f32 pooling between conversions; max and average round once, as the
// portable kernel does.
TEST_P(CpuHalfPoolBnTest, MatchesPortableKernel) {
  const DType dtype = GetParam();
  struct Case {
    const char* op;
    Attributes attributes;
  } cases[] = {
      {"MaxPool", attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                         {"strides", std::vector<int64_t>{2, 2}},
                         {"pads", std::vector<int64_t>{1, 1, 1, 1}}})},
      {"AveragePool", attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                             {"strides", std::vector<int64_t>{2, 2}},
                             {"pads", std::vector<int64_t>{1, 1, 1, 1}}})},
      {"GlobalAveragePool", {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    Tensor x = random_of(dtype, {2, 16, 9, 9}, 7);
    auto portable = run_op(c.op, {value(x)}, c.attributes);
    ASSERT_TRUE(portable.ok()) << portable.status().to_string();
    const Tensor& expected = (*portable)[0];
    SpecBuilder s;
    const int32_t y = s.output("y", expected.shape(), dtype);
    s.dispatch("pool", c.op, {s.input("x", x.shape(), dtype)}, {y}, c.attributes);
    std::string steps;
    auto out = prepare_and_run(s, {x}, steps);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(all_close((*out)[0], expected, tolerance_for(dtype))) << steps;
    expect_onednn(steps, "pool");
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CpuHalfPoolBnTest, ::testing::Values(DType::kF16, DType::kBF16));

// BatchNormalization (with and without kiln's fused relu) normalizes in f32 between conversions,
// on a conv's blocked output and on a plain graph input.
TEST_P(CpuHalfPoolBnTest, BatchNormMatchesPortableKernel) {
  const DType dtype = GetParam();
  const int64_t c = 24;
  std::vector<double> var_values = values_of(random_tensor({c}, 15, 0.5f, 2.0f));
  Tensor scale = random_of(dtype, {c}, 11), bias = random_of(dtype, {c}, 12);
  Tensor mean = random_of(dtype, {c}, 13), var = make_tensor(dtype, {c}, var_values);
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "relu" : "no activation");
    Attributes a = attrs({{"epsilon", 1e-3}});
    if (relu) kernels::set_fused_activation(a, kRelu);
    Tensor x = random_of(dtype, {2, c, 5, 7}, 14);
    auto portable =
        run_op("BatchNormalization",
               {value(x), constant(scale), constant(bias), constant(mean), constant(var)}, a);
    ASSERT_TRUE(portable.ok()) << portable.status().to_string();
    const Tensor& expected = (*portable)[0];
    SpecBuilder s;
    const int32_t y = s.output("y", expected.shape(), dtype);
    s.dispatch("bn", "BatchNormalization",
               {s.input("x", x.shape(), dtype), s.constant("scale", scale),
                s.constant("bias", bias), s.constant("mean", mean), s.constant("var", var)},
               {y}, a);
    std::string steps;
    auto out = prepare_and_run(s, {x}, steps);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(all_close((*out)[0], expected, tolerance_for(dtype))) << steps;
    expect_onednn(steps, "batch_norm");
  }
}

// The conversions between f32 and f16/bf16 round as kiln/base/half.h does (F16C instructions
// where the CPU has them): ties to even, overflow to infinity, subnormals, NaN kept.
TEST(CpuConvertTest, RoundsAsHalfDotH) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values{0.0f,
                            -0.0f,
                            1.0f,
                            1.0f + 1.0f / 2048,  // tie, to even
                            1.0f + 3.0f / 2048,
                            65504.0f,
                            65520.0f,
                            -70000.0f,  // overflow
                            1e-7f,
                            -3e-8f,
                            6.1e-5f,
                            nan,
                            inf,
                            -inf,
                            3.14159f,
                            -2.71828f,
                            1e30f,
                            1.0f + 1.0f / 256};
  while (values.size() < 40) values.push_back(static_cast<float>(values.size()) * 0.37f - 7.0f);
  for (auto type : {dnnl::memory::data_type::f16, dnnl::memory::data_type::bf16}) {
    const bool f16 = type == dnnl::memory::data_type::f16;
    std::vector<uint16_t> narrow(values.size());
    convert_elements(dnnl::memory::data_type::f32,
                     reinterpret_cast<const std::byte*>(values.data()), type,
                     reinterpret_cast<std::byte*>(narrow.data()), values.size());
    std::vector<float> wide(values.size());
    convert_elements(type, reinterpret_cast<const std::byte*>(narrow.data()),
                     dnnl::memory::data_type::f32, reinterpret_cast<std::byte*>(wide.data()),
                     values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      SCOPED_TRACE(fmt::format("{} {}", f16 ? "f16" : "bf16", values[i]));
      const uint16_t want = f16 ? float_to_half_bits(values[i]) : float_to_bfloat16_bits(values[i]);
      const float back = f16 ? half_bits_to_float(want) : bfloat16_bits_to_float(want);
      if (std::isnan(values[i])) {
        EXPECT_TRUE(std::isnan(wide[i]));
        continue;
      }
      EXPECT_EQ(narrow[i], want);
      EXPECT_EQ(wide[i], back);
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
