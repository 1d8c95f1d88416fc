// Add/Sub/Mul/Div with numpy broadcasting and variadic Sum, on plain inputs and on blocked conv
// outputs (odd channel counts included, so padded blocked layouts pass through binary ops).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "kiln/hal/cpu/cpu_device_for_tests.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

const char* op_name(char op) {
  switch (op) {
    case '+': return "Add";
    case '-': return "Sub";
    case '*': return "Mul";
    default: return "Div";
  }
}

struct BinaryCase {
  char op;
  ConcreteShape a, b;
};

class CpuBinaryTest : public ::testing::TestWithParam<BinaryCase> {};

TEST_P(CpuBinaryTest, PlainBroadcastMatchesReference) {
  const BinaryCase& c = GetParam();
  Tensor a = random_tensor(c.a, 1);
  Tensor b = random_tensor(c.b, 2, 0.5f, 2.0f);
  Tensor expected = ref_binary(c.op, a, b);
  SpecBuilder s;
  const int32_t ai = s.input("a", c.a);
  const int32_t bi = s.input("b", c.b);
  const int32_t y = s.output("y", expected.shape());
  s.dispatch("op", op_name(c.op), {ai, bi}, {y});
  auto exe = default_cpu_device()->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = run_program(**exe, s.spec(), {a, b});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], expected, {.atol = 1e-6, .rtol = 1e-6}));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuBinaryTest,
    ::testing::Values(BinaryCase{'+', {2, 3, 4}, {2, 3, 4}}, BinaryCase{'-', {2, 3, 4}, {}},
                      BinaryCase{'*', {2, 3, 4}, {4}}, BinaryCase{'/', {2, 3, 4}, {3, 1}},
                      BinaryCase{'/', {3, 1, 5}, {4, 1}}, BinaryCase{'-', {1, 4}, {3, 1}},
                      BinaryCase{'+', {4}, {2, 3, 4}}, BinaryCase{'-', {5}, {2, 5}},
                      BinaryCase{'*', {2, 1, 3, 1}, {1, 4, 1, 5}},
                      BinaryCase{'/', {70000}, {70000}}, BinaryCase{'+', {}, {}}));

// conv(x) -> op(conv_out, other) -> conv -> y, with `other` shaped `other_shape`. With channel
// counts that fill AVX2's blocks of 8, the op never runs on oneDNN's reference binary kernel (a
// per-channel B beside channel-blocked data gets the same blocking, elementwise_op.cc); oneDNN 2.6
// has no jit binary kernel for a partly filled block on AVX2.
void check_binary_between_convs(char op, int64_t c, ConcreteShape other_shape, bool other_conv) {
  const ConcreteShape xs{2, c, 6, 6};
  Tensor x = random_tensor(xs, 3);
  Tensor w1 = random_tensor({c, c, 3, 3}, 4);
  Tensor w2 = random_tensor({c, c, 1, 1}, 5);
  Tensor other = random_tensor(other_shape, 6, 0.5f, 2.0f);
  ConvRef pad1{{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1};
  ConvRef pw{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  Tensor c1 = ref_conv(x, w1, nullptr, nullptr, pad1);
  Tensor rhs = other_conv ? ref_conv(x, w2, nullptr, nullptr, pw) : other;
  Tensor expected = ref_conv(ref_binary(op, c1, rhs), w2, nullptr, nullptr, pw);

  SpecBuilder s;
  const int32_t xi = s.input("x", xs);
  const int32_t a = s.value("a", xs);
  s.dispatch("conv1", "Conv", {xi, s.constant("w1", w1)}, {a},
             attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  int32_t bi;
  if (other_conv) {
    bi = s.value("b", xs);
    s.dispatch("conv_b", "Conv", {xi, s.constant("w2b", w2)}, {bi});
  } else {
    bi = s.constant("b", other);
  }
  const int32_t m = s.value("m", xs);
  s.dispatch("op", op_name(op), {a, bi}, {m});
  const int32_t y = s.output("y", xs);
  s.dispatch("conv2", "Conv", {m, s.constant("w2", w2)}, {y});
  auto exe = default_cpu_device()->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  const std::string steps =
      fmt::format("{}", fmt::join((*exe)->describe_dispatch(other_conv ? 2 : 1), "\n"));
  if (c % 8 == 0) {
    EXPECT_EQ(steps.find("ref:"), std::string::npos) << steps;
  }
  auto out = run_program(**exe, s.spec(), {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], expected, {.atol = 2e-4, .rtol = 1e-5})) << steps;
}

TEST(CpuBinaryBlockedTest, AddTwoConvOutputs) {
  check_binary_between_convs('+', 16, {2, 16, 6, 6}, true);
}
TEST(CpuBinaryBlockedTest, DivOddChannelsKeepsPaddingClean) {
  // 0/0 in the padded channels of a blocked layout would be NaN and poison the next conv.
  check_binary_between_convs('/', 5, {2, 5, 6, 6}, true);
}
TEST(CpuBinaryBlockedTest, MulPerChannelConstant) {
  check_binary_between_convs('*', 16, {16, 1, 1}, false);
}
TEST(CpuBinaryBlockedTest, SubPlainConstantFullShape) {
  check_binary_between_convs('-', 8, {2, 8, 6, 6}, false);
}
TEST(CpuBinaryBlockedTest, DivPerChannelOddChannels) {
  check_binary_between_convs('/', 5, {1, 5, 1, 1}, false);
}
// A squeeze-excitation's scale: one value per sample and channel. 24 channels: a partly filled
// block of 16 on AVX-512.
TEST(CpuBinaryBlockedTest, MulPerSampleChannelScale) {
  check_binary_between_convs('*', 24, {2, 24, 1, 1}, false);
}
TEST(CpuBinaryBlockedTest, DivPerSampleChannelOddChannels) {
  check_binary_between_convs('/', 5, {2, 5, 1, 1}, false);
}

// The elements of `got` whose bits differ from in[i] op scale_at(i) (NaN against any NaN).
template <class ScaleAt>
int64_t mismatches(char op, std::span<const float> in, std::span<const float> got,
                   ScaleAt scale_at) {
  int64_t count = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(in.size()); ++i) {
    const float v = scale_at(i);
    const float e = op == '+'   ? in[i] + v
                    : op == '-' ? in[i] - v
                    : op == '*' ? in[i] * v
                                : in[i] / v;
    count += std::memcmp(&e, &got[i], sizeof(float)) != 0 && !(std::isnan(e) && std::isnan(got[i]));
  }
  return count;
}

// One value per sample and channel beside a plain graph input or a conv's output (channels-last
// on AVX-512: kiln's ChannelBinaryStep, channel_binary_step.h): each element is one f32
// operation, so the output equals x op s computed here, bit for bit, NaN included; the conv's
// output comes out of the same program as a second output.
TEST(CpuChannelBinaryTest, EachElementIsOneOperation) {
  for (char op : {'+', '-', '*', '/'}) {
    for (const ConcreteShape& s_shape :
         {ConcreteShape{2, 24, 1, 1}, ConcreteShape{1, 24, 1, 1}, ConcreteShape{24, 1, 1}}) {
      for (bool after_conv : {false, true}) {
        SCOPED_TRACE(fmt::format("{} by {} {}", op, fmt::join(s_shape, "x"),
                                 after_conv ? "after a conv" : "on a graph input"));
        const ConcreteShape xs{2, 24, 5, 7};
        Tensor x = random_tensor(xs, 61);
        x.mutable_values<float>()[9] = std::numeric_limits<float>::quiet_NaN();
        const Tensor sv = random_tensor(s_shape, 62, 0.5f, 2.0f);
        const Tensor w = random_tensor({24, 24, 1, 1}, 63);
        SpecBuilder s;
        const int32_t xi = s.input("x", xs);
        int32_t src = xi;
        if (after_conv) {
          src = s.value("c", xs);
          s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {src});
        }
        const int32_t y = s.output("y", xs);
        s.dispatch("op", op_name(op), {src, s.constant("s", sv)}, {y});
        if (after_conv) {
          s.dispatch("again", "Conv", {xi, s.constant("w2", w)}, {s.output("c_out", xs)});
        }
        auto exe = default_cpu_device()->prepare(s.spec());
        ASSERT_TRUE(exe.ok()) << exe.status().to_string();
        const std::string steps =
            fmt::format("{}", fmt::join((*exe)->describe_dispatch(after_conv ? 1 : 0), "\n"));
        if (!after_conv) {
          EXPECT_NE(steps.find("binary kiln per channel"), std::string::npos) << steps;
        }
        auto out = run_program(**exe, s.spec(), {x});
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        const auto in = (after_conv ? (*out)[1] : x).values<float>();
        const auto got = (*out)[0].values<float>();
        const auto scale = sv.values<float>();
        const bool per_sample = s_shape.size() == 4 && s_shape[0] == 2;
        EXPECT_EQ(mismatches(op, in, got,
                             [&](int64_t i) {
                               const int64_t n = i / (24 * 35), c = i / 35 % 24;
                               return scale[per_sample ? n * 24 + c : c];
                             }),
                  0)
            << steps;
      }
    }
  }
}

// The same for channels last at the last dim ([N, H, W, C] by [N or 1, 1, 1, C], as a tf2onnx
// squeeze-and-excitation block scales its plain NHWC data), the scale on either side of a Mul:
// kiln's ChannelBinaryStep, bit for bit with x op s, NaN included. A scale that is not one value
// per sample and channel ([1, 1, W, C]) takes the broadcast kernel, with the same bits.
TEST(CpuChannelBinaryTest, ChannelsAtTheLastDimAreOneOperationEach) {
  const ConcreteShape xs{2, 5, 7, 24};
  for (char op : {'+', '-', '*', '/'}) {
    for (const ConcreteShape& s_shape : {ConcreteShape{2, 1, 1, 24}, ConcreteShape{1, 1, 1, 24},
                                         ConcreteShape{24}, ConcreteShape{1, 1, 7, 24}}) {
      for (bool scale_first : {false, true}) {
        if (scale_first && op != '*') continue;  // only Add and Mul take either order
        SCOPED_TRACE(fmt::format("{} by {}{}", op, fmt::join(s_shape, "x"),
                                 scale_first ? ", the scale first" : ""));
        Tensor x = random_tensor(xs, 71);
        x.mutable_values<float>()[11] = std::numeric_limits<float>::quiet_NaN();
        const Tensor sv = random_tensor(s_shape, 72, 0.5f, 2.0f);
        SpecBuilder s;
        const int32_t xi = s.input("x", xs), si = s.constant("s", sv);
        const int32_t y = s.output("y", xs);
        s.dispatch("op", op_name(op),
                   scale_first ? std::vector<int32_t>{si, xi} : std::vector<int32_t>{xi, si}, {y});
        auto exe = default_cpu_device()->prepare(s.spec());
        ASSERT_TRUE(exe.ok()) << exe.status().to_string();
        const std::string steps = fmt::format("{}", fmt::join((*exe)->describe_dispatch(0), "\n"));
        const bool per_sample = s_shape.size() == 4 && s_shape[0] == 2;
        const bool per_column = s_shape.size() == 4 && s_shape[2] == 7;
        const bool per_channel = !per_column;
        EXPECT_EQ(steps.find("binary kiln per channel plain") != std::string::npos, per_channel)
            << steps;
        auto out = run_program(**exe, s.spec(), {x});
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        const auto in = x.values<float>();
        const auto got = (*out)[0].values<float>();
        const auto scale = sv.values<float>();
        EXPECT_EQ(mismatches(op, in, got,
                             [&](int64_t i) {
                               const int64_t n = i / (5 * 7 * 24), w = i / 24 % 7, c = i % 24;
                               return per_sample   ? scale[n * 24 + c]
                                      : per_column ? scale[w * 24 + c]
                                                   : scale[c];
                             }),
                  0)
            << steps;
      }
    }
  }
}

TEST(CpuSumTest, SameShapeMixedLayouts) {
  const ConcreteShape xs{2, 8, 5, 5};
  Tensor x = random_tensor(xs, 1);
  Tensor w = random_tensor({8, 8, 1, 1}, 2);
  Tensor z = random_tensor(xs, 3);
  ConvRef pw{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  Tensor c = ref_conv(x, w, nullptr, nullptr, pw);
  Tensor expected = ref_binary('+', ref_binary('+', c, x), z);
  SpecBuilder s;
  const int32_t xi = s.input("x", xs);
  const int32_t zi = s.input("z", xs);
  const int32_t ci = s.value("c", xs);
  s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {ci});
  const int32_t y = s.output("y", xs);
  s.dispatch("sum", "Sum", {ci, xi, zi}, {y});
  auto exe = default_cpu_device()->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = run_program(**exe, s.spec(), {x, z});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], expected));
}

TEST(CpuSumTest, BroadcastAndSingleInput) {
  Tensor a = random_tensor({3, 1}, 1), b = random_tensor({4}, 2), c = random_tensor({2, 3, 4}, 3);
  SpecBuilder s;
  const int32_t ai = s.input("a", {3, 1}), bi = s.input("b", {4}), ci = s.input("c", {2, 3, 4});
  const int32_t y = s.output("y", {2, 3, 4});
  const int32_t y1 = s.output("y1", {4});
  s.dispatch("sum", "Sum", {ai, bi, ci}, {y});
  s.dispatch("sum1", "Sum", {bi}, {y1});
  auto exe = default_cpu_device()->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = run_program(**exe, s.spec(), {a, b, c});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], ref_binary('+', ref_binary('+', a, b), c),
                        {.atol = 1e-6, .rtol = 1e-6}));
  EXPECT_TRUE(identical((*out)[1], b));
}

TEST(CpuBinaryTest, NonBroadcastableShapesAreRejected) {
  SpecBuilder s;
  const int32_t a = s.input("a", {2, 3}), b = s.input("b", {4});
  const int32_t y = s.output("y", {2, 3});
  s.dispatch("bad_add", "Add", {a, b}, {y});
  Status st = default_cpu_device()->supports(s.spec().dispatches[0], s.spec().values);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.to_string().find("'bad_add' (Add)"), std::string::npos) << st.to_string();
  EXPECT_NE(st.to_string().find("cannot broadcast"), std::string::npos) << st.to_string();
}

TEST(CpuBinaryTest, IntegerInputsFallBackToPortableKernels) {
  // oneDNN's binary takes f32 only; other dtypes run on the portable kernels.
  SpecBuilder s;
  const int32_t a = s.input("a", {2}, DType::kI64), b = s.input("b", {2}, DType::kI64);
  const int32_t y = s.output("y", {2}, DType::kI64);
  s.dispatch("int_add", "Add", {a, b}, {y});
  EXPECT_TRUE(default_cpu_device()->supports(s.spec().dispatches[0], s.spec().values).ok());
}

TEST(CpuBinaryTest, BoolInputsAreUnimplemented) {
  // Add is not defined on bool: the definition refuses the dispatch before any path is chosen.
  SpecBuilder s;
  const int32_t a = s.input("a", {2}, DType::kBool), b = s.input("b", {2}, DType::kBool);
  const int32_t y = s.output("y", {2}, DType::kBool);
  s.dispatch("bool_add", "Add", {a, b}, {y});
  Status st = default_cpu_device()->supports(s.spec().dispatches[0], s.spec().values);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.to_string().find("input 0 'A' must have dtype"), std::string::npos)
      << st.to_string();
}

}  // namespace
}  // namespace kiln::hal::cpu
