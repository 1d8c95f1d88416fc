// QLinearConv and QLinearMatMul on the CPU backend's int8 fast path (qlinear_op.cc) against the
// portable kernels, bit for bit, on random data: u8 and s8 activations, per-tensor and
// per-channel weight scales, bias, pads (the activation zero point pads), strides, dilations,
// groups, 1-D to 3-D, batches, weights that are not constants, i8 and u8 outputs, and scales that
// are powers of two so that many products land exactly on ties (with an odd output zero point).
// On a CPU without VNNI the dispatches take the portable path; the test says which ran.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>

#include "kiln/hal/cpu/cpu_device.h"
#include "tests/support/hal/program.h"
#include "tests/support/kernels/run_op.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

Tensor random_int8(DType dtype, ConcreteShape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n = kernels::product(shape);
  if (dtype == DType::kU8) {
    std::uniform_int_distribution<int> d(0, 255);
    std::vector<uint8_t> v(static_cast<size_t>(n));
    for (auto& e : v) e = static_cast<uint8_t>(d(rng));
    return make_tensor(dtype, std::move(shape), v);
  }
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> v(static_cast<size_t>(n));
  for (auto& e : v) e = static_cast<int8_t>(d(rng));
  return make_tensor(dtype, std::move(shape), v);
}

Tensor scalar_f32(float v) { return make_tensor(DType::kF32, {}, std::vector<float>{v}); }
Tensor zero_point(DType dtype, int v) {
  return dtype == DType::kU8 ? make_tensor(dtype, {}, std::vector<uint8_t>{uint8_t(v)})
                             : make_tensor(dtype, {}, std::vector<int8_t>{int8_t(v)});
}

bool vnni() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx512_core_bf16 ||
         isa == dnnl::cpu_isa::avx512_core_amx || isa == dnnl::cpu_isa::avx2_vnni;
}

struct Operands {
  std::vector<Tensor> tensors;  // the op's inputs in order
  std::vector<bool> runtime;    // per input: a graph input (else a constant)
};

// Runs the single dispatch on the CPU device and through the portable kernel; both outputs and
// the dispatch's description.
void expect_same(const std::string& op_type, const Operands& in, const Attributes& attributes,
                 bool expect_fast) {
  std::vector<In> ins;
  for (const Tensor& t : in.tensors) ins.push_back(value(t));
  auto expected = run_op(op_type, ins, attributes);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  const Tensor& want = (*expected)[0];

  SpecBuilder s;
  std::vector<int32_t> ids;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    const Tensor& t = in.tensors[i];
    if (in.runtime[i]) {
      ids.push_back(s.input(fmt::format("in{}", i), t.shape(), t.dtype()));
      inputs.push_back(t);
    } else {
      ids.push_back(s.constant(fmt::format("in{}", i), t));
    }
  }
  const int32_t y = s.output("y", want.shape(), want.dtype());
  s.dispatch("q", op_type, ids, {y}, attributes);
  auto device = create_cpu_device({});
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  auto exe = (*device)->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  const std::string steps = fmt::format("{}", fmt::join((*exe)->describe_dispatch(0), "\n"));
  EXPECT_EQ(steps.find("int8 ") != std::string::npos, expect_fast && vnni()) << steps;
  auto out = run_program(**exe, s.spec(), inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ((*out)[0].dtype(), want.dtype());
  ASSERT_EQ((*out)[0].shape(), want.shape());
  EXPECT_EQ(values_of((*out)[0]), values_of(want)) << steps;
}

struct QConvCase {
  std::string name;
  ConcreteShape x, w;
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
  DType x_type = DType::kU8, y_type = DType::kU8;
  bool per_channel = true, bias = true, constant_weights = true, ties = false;
  int w_zero = 0;
  DType w_type = DType::kI8;
};
void PrintTo(const QConvCase& c, std::ostream* os) { *os << c.name; }

QConvCase qcase(std::string name, ConcreteShape x, ConcreteShape w,
                void (*set)(QConvCase&) = nullptr) {
  QConvCase c;
  c.name = std::move(name);
  c.x = std::move(x);
  c.w = std::move(w);
  if (set) set(c);
  return c;
}

class CpuQLinearConvTest : public ::testing::TestWithParam<QConvCase> {};

TEST_P(CpuQLinearConvTest, MatchesPortableKernelBitForBit) {
  const QConvCase& c = GetParam();
  const int64_t m = c.w[0];
  int64_t k = 1;
  for (size_t i = 1; i < c.w.size(); ++i) k *= c.w[i];
  // Scales: sums * multiplier mostly within the output range; with `ties`, powers of two.
  const float x_scale = c.ties ? 0.5f : 0.02f;
  std::vector<float> w_scales;
  for (int64_t i = 0; i < (c.per_channel ? m : 1); ++i) {
    w_scales.push_back(c.ties ? 0.25f : 0.01f * (1.0f + 0.1f * static_cast<float>(i % 7)));
  }
  const float y_scale = c.ties ? 1.0f : x_scale * 0.01f * 40.0f * std::sqrt(float(k));
  Operands in;
  in.tensors = {random_int8(c.x_type, c.x, 1),
                scalar_f32(x_scale),
                zero_point(c.x_type, c.x_type == DType::kU8 ? 131 : -3),
                random_int8(c.w_type, c.w, 2),
                make_tensor(DType::kF32, {static_cast<int64_t>(w_scales.size())}, w_scales),
                zero_point(c.w_type, c.w_zero),
                scalar_f32(y_scale),
                zero_point(c.y_type, c.y_type == DType::kU8 ? 127 : 3)};
  in.runtime = {true, true, false, !c.constant_weights, false, false, false, false};
  if (c.bias) {
    std::mt19937 rng(3);
    std::uniform_int_distribution<int32_t> d(-20000, 20000);
    std::vector<int32_t> b(static_cast<size_t>(m));
    for (auto& e : b) e = d(rng);
    in.tensors.push_back(i32({m}, b));
    in.runtime.push_back(false);
  }
  Attributes a;
  a.set("group", c.group);
  if (!c.strides.empty()) a.set("strides", c.strides);
  if (!c.pads.empty()) a.set("pads", c.pads);
  if (!c.dilations.empty()) a.set("dilations", c.dilations);
  const bool fast = c.w_type == DType::kI8 && c.w_zero == 0;
  expect_same("QLinearConv", in, a, fast);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuQLinearConvTest,
    ::testing::Values(qcase("u8_3x3_pads", {2, 16, 9, 9}, {32, 16, 3, 3},
                            [](QConvCase& c) {
                              c.pads = {1, 1, 1, 1};
                            }),
                      qcase("s8_stride2_asymmetric_pads_i8_out", {1, 8, 11, 10}, {24, 8, 3, 3},
                            [](QConvCase& c) {
                              c.x_type = DType::kI8;
                              c.y_type = DType::kI8;
                              c.strides = {2, 2};
                              c.pads = {0, 1, 2, 1};
                            }),
                      qcase("groups_dilation_per_tensor", {3, 12, 10, 10}, {12, 4, 3, 3},
                            [](QConvCase& c) {
                              c.group = 3;
                              c.dilations = {2, 2};
                              c.pads = {2, 2, 2, 2};
                              c.per_channel = false;
                            }),
                      qcase("depthwise_no_bias", {1, 16, 8, 8}, {16, 1, 3, 3},
                            [](QConvCase& c) {
                              c.group = 16;
                              c.pads = {1, 1, 1, 1};
                              c.bias = false;
                            }),
                      qcase("ties_odd_zero_point", {2, 8, 6, 6}, {8, 8, 1, 1},
                            [](QConvCase& c) { c.ties = true; }),
                      qcase("one_d", {2, 5, 17}, {7, 5, 4},
                            [](QConvCase& c) {
                              c.pads = {1, 2};
                              c.strides = {3};
                            }),
                      qcase("three_d", {1, 4, 5, 6, 7}, {6, 4, 2, 3, 3},
                            [](QConvCase& c) { c.pads = {1, 0, 1, 0, 1, 1}; }),
                      qcase("runtime_weights", {1, 8, 7, 7}, {8, 8, 3, 3},
                            [](QConvCase& c) { c.constant_weights = false; }),
                      // Not the fast path's: u8 weights, a non-zero weight zero point.
                      qcase("u8_weights_portable", {1, 4, 5, 5}, {4, 4, 3, 3},
                            [](QConvCase& c) {
                              c.w_type = DType::kU8;
                              c.w_zero = 128;
                            }),
                      qcase("weight_zero_point_portable", {1, 4, 5, 5}, {4, 4, 3, 3},
                            [](QConvCase& c) {
                              c.w_zero = 2;
                              c.per_channel = false;
                            })));

struct QMatMulCase {
  std::string name;
  ConcreteShape a, b;
  DType a_type = DType::kU8, y_type = DType::kU8;
  bool per_column = false, ties = false;
};
void PrintTo(const QMatMulCase& c, std::ostream* os) { *os << c.name; }

class CpuQLinearMatMulTest : public ::testing::TestWithParam<QMatMulCase> {};

TEST_P(CpuQLinearMatMulTest, MatchesPortableKernelBitForBit) {
  const QMatMulCase& c = GetParam();
  const int64_t k = c.b[0], n = c.b[1];
  std::vector<float> b_scales;
  for (int64_t i = 0; i < (c.per_column ? n : 1); ++i) {
    b_scales.push_back(c.ties ? 0.25f : 0.01f * (1.0f + 0.05f * static_cast<float>(i % 5)));
  }
  const float a_scale = c.ties ? 0.5f : 0.03f;
  const float y_scale = c.ties ? 1.0f : a_scale * 0.01f * 40.0f * std::sqrt(float(k));
  Operands in;
  in.tensors = {random_int8(c.a_type, c.a, 5),
                scalar_f32(a_scale),
                zero_point(c.a_type, c.a_type == DType::kU8 ? 120 : 5),
                random_int8(DType::kI8, c.b, 6),
                make_tensor(DType::kF32, {static_cast<int64_t>(b_scales.size())}, b_scales),
                make_tensor(DType::kI8, {static_cast<int64_t>(b_scales.size())},
                            std::vector<int8_t>(b_scales.size(), 0)),
                scalar_f32(y_scale),
                zero_point(c.y_type, c.y_type == DType::kU8 ? 129 : -1)};
  in.runtime = {true, false, true, false, false, false, false, false};
  expect_same("QLinearMatMul", in, {}, true);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuQLinearMatMulTest,
    ::testing::Values(
        QMatMulCase{"u8_2d", {7, 64}, {64, 33}},
        QMatMulCase{"s8_3d_per_column_i8_out", {2, 5, 48}, {48, 16}, DType::kI8, DType::kI8, true},
        QMatMulCase{"ties", {4, 8}, {8, 8}, DType::kU8, DType::kU8, false, true}));

// Int8 values between int8 ops. Two QLinearConvs in a row (a 1x1 then a 3x3, as in a ResNet
// bottleneck): the intermediate u8 value stays channels-last between them when only the second
// conv and per-tensor DequantizeLinears read it (no reorder out of the first conv, none into the
// second), and is plain when a portable op (Cast) also reads it. Then a residual-style chain,
// conv -> DequantizeLinear -> QuantizeLinear -> conv, channels-last all the way. The results are
// the portable kernels' chained, bit for bit, in every case.
struct ChainOperands {
  Tensor x = random_int8(DType::kU8, {2, 16, 7, 7}, 11);
  Tensor w1 = random_int8(DType::kI8, {24, 16, 1, 1}, 12);
  Tensor w2 = random_int8(DType::kI8, {8, 24, 3, 3}, 13);
  Tensor xs = scalar_f32(0.02f), xz = zero_point(DType::kU8, 131);
  Tensor ws1 = scalar_f32(0.01f), ws2 = scalar_f32(0.015f), wz = zero_point(DType::kI8, 0);
  Tensor ms = scalar_f32(0.05f), mz = zero_point(DType::kU8, 7);
  Tensor qs = scalar_f32(0.07f), qz = zero_point(DType::kU8, 3);
  Tensor ys = scalar_f32(0.3f), yz = zero_point(DType::kU8, 120);
  Attributes a2 = [] {
    Attributes a;
    a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    return a;
  }();
};

std::string steps_of(const Executable& exe, int32_t d) {
  return fmt::format("{}", fmt::join(exe.describe_dispatch(d), "\n"));
}

TEST(CpuQLinearConvChain, IntermediateStaysChannelsLastBetweenInt8Ops) {
  const ChainOperands o;
  auto mid = run_op("QLinearConv",
                    {value(o.x), value(o.xs), value(o.xz), value(o.w1), value(o.ws1), value(o.wz),
                     value(o.ms), value(o.mz)},
                    {});
  ASSERT_TRUE(mid.ok()) << mid.status().to_string();
  auto want = run_op("QLinearConv",
                     {value((*mid)[0]), value(o.ms), value(o.mz), value(o.w2), value(o.ws2),
                      value(o.wz), value(o.ys), value(o.yz)},
                     o.a2);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto want_dq = run_op("DequantizeLinear", {value((*mid)[0]), value(o.ms), value(o.mz)}, {});
  ASSERT_TRUE(want_dq.ok()) << want_dq.status().to_string();
  Attributes to_f32;
  to_f32.set("to", int64_t{1});
  auto want_cast = run_op("Cast", {value((*mid)[0])}, to_f32);
  ASSERT_TRUE(want_cast.ok()) << want_cast.status().to_string();

  for (const std::string other : {"", "DequantizeLinear", "Cast"}) {
    SCOPED_TRACE(other.empty() ? "mid read by the conv alone" : "mid also read by " + other);
    SpecBuilder s;
    const int32_t in = s.input("x", o.x.shape(), DType::kU8);
    const int32_t m = s.value("mid", (*mid)[0].shape(), DType::kU8);
    const int32_t ms_id = s.constant("ms", o.ms), mz_id = s.constant("mz", o.mz);
    const int32_t wz_id = s.constant("wz", o.wz);
    s.dispatch("conv1", "QLinearConv",
               {in, s.constant("xs", o.xs), s.constant("xz", o.xz), s.constant("w1", o.w1),
                s.constant("ws1", o.ws1), wz_id, ms_id, mz_id},
               {m}, {});
    const int32_t y = s.output("y", (*want)[0].shape(), DType::kU8);
    s.dispatch("conv2", "QLinearConv",
               {m, ms_id, mz_id, s.constant("w2", o.w2), s.constant("ws2", o.ws2), wz_id,
                s.constant("ys", o.ys), s.constant("yz", o.yz)},
               {y}, o.a2);
    if (other == "DequantizeLinear") {
      const int32_t f = s.output("f", (*mid)[0].shape(), DType::kF32);
      s.dispatch("dq", "DequantizeLinear", {m, ms_id, mz_id}, {f}, {});
    } else if (other == "Cast") {
      const int32_t f = s.output("f", (*mid)[0].shape(), DType::kF32);
      s.dispatch("cast", "Cast", {m}, {f}, to_f32);
    }
    auto device = create_cpu_device({});
    ASSERT_TRUE(device.ok()) << device.status().to_string();
    auto exe = (*device)->prepare(s.spec());
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    const std::string first = steps_of(**exe, 0), second = steps_of(**exe, 1);
    if (vnni()) {
      const bool plain = other == "Cast";
      EXPECT_EQ(first.find("-> u8 plain") != std::string::npos, plain) << first;
      EXPECT_EQ(second.find("reorder u8 plain") != std::string::npos, plain) << second;
    }
    auto out = run_program(**exe, s.spec(), {o.x});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(values_of((*out)[0]), values_of((*want)[0])) << first << "\n" << second;
    if (other == "DequantizeLinear") {
      EXPECT_EQ(values_of((*out)[1]), values_of((*want_dq)[0])) << steps_of(**exe, 2);
    } else if (other == "Cast") {
      EXPECT_EQ(values_of((*out)[1]), values_of((*want_cast)[0]));
    }
  }
}

TEST(CpuQLinearConvChain, DequantizeQuantizeBetweenConvsStayChannelsLast) {
  const ChainOperands o;
  auto mid = run_op("QLinearConv",
                    {value(o.x), value(o.xs), value(o.xz), value(o.w1), value(o.ws1), value(o.wz),
                     value(o.ms), value(o.mz)},
                    {});
  ASSERT_TRUE(mid.ok()) << mid.status().to_string();
  auto f = run_op("DequantizeLinear", {value((*mid)[0]), value(o.ms), value(o.mz)}, {});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto q = run_op("QuantizeLinear", {value((*f)[0]), value(o.qs), value(o.qz)}, {});
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  auto want = run_op("QLinearConv",
                     {value((*q)[0]), value(o.qs), value(o.qz), value(o.w2), value(o.ws2),
                      value(o.wz), value(o.ys), value(o.yz)},
                     o.a2);
  ASSERT_TRUE(want.ok()) << want.status().to_string();

  SpecBuilder s;
  const int32_t in = s.input("x", o.x.shape(), DType::kU8);
  const int32_t m = s.value("mid", (*mid)[0].shape(), DType::kU8);
  const int32_t fi = s.value("f", (*f)[0].shape(), DType::kF32);
  const int32_t qi = s.value("q", (*q)[0].shape(), DType::kU8);
  const int32_t ms_id = s.constant("ms", o.ms), mz_id = s.constant("mz", o.mz);
  const int32_t qs_id = s.constant("qs", o.qs), qz_id = s.constant("qz", o.qz);
  const int32_t wz_id = s.constant("wz", o.wz);
  s.dispatch("conv1", "QLinearConv",
             {in, s.constant("xs", o.xs), s.constant("xz", o.xz), s.constant("w1", o.w1),
              s.constant("ws1", o.ws1), wz_id, ms_id, mz_id},
             {m}, {});
  s.dispatch("dq", "DequantizeLinear", {m, ms_id, mz_id}, {fi}, {});
  s.dispatch("q", "QuantizeLinear", {fi, qs_id, qz_id}, {qi}, {});
  const int32_t y = s.output("y", (*want)[0].shape(), DType::kU8);
  s.dispatch("conv2", "QLinearConv",
             {qi, qs_id, qz_id, s.constant("w2", o.w2), s.constant("ws2", o.ws2), wz_id,
              s.constant("ys", o.ys), s.constant("yz", o.yz)},
             {y}, o.a2);
  auto device = create_cpu_device({});
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  auto exe = (*device)->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  const std::string all = fmt::format("{}\n{}\n{}\n{}", steps_of(**exe, 0), steps_of(**exe, 1),
                                      steps_of(**exe, 2), steps_of(**exe, 3));
  EXPECT_NE(steps_of(**exe, 1).find("dequantize (kiln)"), std::string::npos) << all;
  if (vnni()) {
    EXPECT_EQ(steps_of(**exe, 0).find("-> u8 plain"), std::string::npos) << all;
    EXPECT_EQ(steps_of(**exe, 1).find("plain"), std::string::npos) << all;
    EXPECT_EQ(steps_of(**exe, 3).find("reorder u8 plain"), std::string::npos) << all;
    EXPECT_NE(steps_of(**exe, 2).find("quantize (kiln) u8 channels-last"), std::string::npos)
        << all;
  }
  auto out = run_program(**exe, s.spec(), {o.x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values_of((*out)[0]), values_of((*want)[0])) << all;
}

}  // namespace
}  // namespace kiln::hal::cpu
