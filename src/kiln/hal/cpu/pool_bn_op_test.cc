// Pooling, BatchNormalization and Relu on the CPU backend against naive references, on plain
// graph inputs and on blocked conv outputs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/hal/cpu/cpu_device_for_tests.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

StatusOr<Tensor> run_one(SpecBuilder& s, std::vector<Tensor> inputs) {
  auto dev = default_cpu_device();
  KILN_ASSIGN_OR_RETURN(auto exe, dev->prepare(s.spec()));
  KILN_ASSIGN_OR_RETURN(auto out, run_program(*exe, s.spec(), inputs));
  return out[0];
}

struct PoolCase {
  std::string name;
  std::string op;  // MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool
  ConcreteShape x;
  std::vector<int64_t> kernel, strides, pads, dilations;
  bool ceil = false;
  bool include_pad = false;
  bool after_conv = false;  // feed the pool from a conv (blocked layout)
};

void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

PoolCase pool_case(std::string name, std::string op, ConcreteShape x, std::vector<int64_t> kernel,
                   void (*set)(PoolCase&) = nullptr) {
  PoolCase c;
  c.name = std::move(name);
  c.op = std::move(op);
  c.x = std::move(x);
  c.kernel = std::move(kernel);
  if (set) set(c);
  return c;
}

class CpuPoolTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(CpuPoolTest, MatchesReference) {
  const PoolCase& c = GetParam();
  const size_t r = c.x.size() - 2;
  const bool global = c.op.rfind("Global", 0) == 0;
  PoolRef ref;
  ref.max = c.op == "MaxPool" || c.op == "GlobalMaxPool";
  ref.count_include_pad = c.include_pad;
  ref.kernel = global ? std::vector<int64_t>(c.x.begin() + 2, c.x.end()) : c.kernel;
  ref.strides = c.strides.empty() ? std::vector<int64_t>(r, 1) : c.strides;
  ref.dilations = c.dilations.empty() ? std::vector<int64_t>(r, 1) : c.dilations;
  std::vector<int64_t> pads = c.pads.empty() ? std::vector<int64_t>(2 * r, 0) : c.pads;
  ref.pads_begin.assign(pads.begin(), pads.begin() + r);
  ref.pads_end.assign(pads.begin() + r, pads.end());
  ref.out = {c.x[0], c.x[1]};
  for (size_t i = 0; i < r; ++i) {
    const int64_t span =
        c.x[2 + i] + pads[i] + pads[r + i] - (ref.dilations[i] * (ref.kernel[i] - 1) + 1);
    ref.out.push_back(
        (c.ceil ? (span + ref.strides[i] - 1) / ref.strides[i] : span / ref.strides[i]) + 1);
  }

  SpecBuilder s;
  Tensor x = random_tensor(c.x, 7);
  Tensor pool_in = x;
  const int32_t xi = s.input("x", c.x);
  int32_t src = xi;
  if (c.after_conv) {
    // 1x1 conv with identity-like random weights: the reference pools the conv's output.
    Tensor w = random_tensor({c.x[1], c.x[1], 1, 1}, 8);
    ConvRef cr{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
    pool_in = ref_conv(x, w, nullptr, nullptr, cr);
    src = s.value("conv_out", c.x);
    s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {src});
  }
  const int32_t y = s.output("y", ref.out);
  Attributes a;
  if (!global) {
    a.set("kernel_shape", c.kernel);
    if (!c.strides.empty()) a.set("strides", c.strides);
    if (!c.pads.empty()) a.set("pads", c.pads);
    if (!c.dilations.empty()) a.set("dilations", c.dilations);
    if (c.ceil) a.set("ceil_mode", int64_t{1});
    if (c.op == "AveragePool") a.set("count_include_pad", int64_t{c.include_pad ? 1 : 0});
  }
  s.dispatch("pool", c.op, {src}, {y}, a);
  auto out = run_one(s, {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close(*out, ref_pool(pool_in, ref)));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuPoolTest,
    ::testing::Values(
        pool_case("max_3x3_s2_p1", "MaxPool", {2, 16, 15, 15}, {3, 3},
                  [](PoolCase& c) {
                    c.strides = {2, 2};
                    c.pads = {1, 1, 1, 1};
                  }),
        pool_case("max_after_conv", "MaxPool", {2, 16, 14, 14}, {3, 3},
                  [](PoolCase& c) {
                    c.strides = {2, 2};
                    c.pads = {1, 1, 1, 1};
                    c.after_conv = true;
                  }),
        pool_case("max_ceil", "MaxPool", {1, 8, 10, 10}, {3, 3},
                  [](PoolCase& c) {
                    c.strides = {2, 2};
                    c.ceil = true;
                  }),
        pool_case("max_dilated", "MaxPool", {1, 8, 9, 9}, {2, 2},
                  [](PoolCase& c) {
                    c.dilations = {2, 2};
                  }),
        pool_case("max_asymmetric_pads", "MaxPool", {2, 5, 7, 8}, {2, 3},
                  [](PoolCase& c) {
                    c.strides = {2, 1};
                    c.pads = {0, 1, 1, 0};
                  }),
        pool_case("max_1d", "MaxPool", {2, 4, 11}, {3}, [](PoolCase& c) { c.strides = {2}; }),
        pool_case("avg_include_pad", "AveragePool", {2, 16, 7, 7}, {3, 3},
                  [](PoolCase& c) {
                    c.pads = {1, 1, 1, 1};
                    c.include_pad = true;
                  }),
        pool_case("avg_exclude_pad", "AveragePool", {2, 16, 7, 7}, {3, 3},
                  [](PoolCase& c) {
                    c.pads = {1, 1, 1, 1};
                  }),
        pool_case("avg_ceil_exclude_pad", "AveragePool", {1, 8, 10, 10}, {3, 3},
                  [](PoolCase& c) {
                    c.strides = {2, 2};
                    c.ceil = true;
                  }),
        pool_case("avg_ceil_include_pad_no_overhang", "AveragePool", {1, 8, 11, 11}, {3, 3},
                  [](PoolCase& c) {
                    c.strides = {2, 2};
                    c.pads = {1, 1, 1, 1};
                    c.ceil = true;
                    c.include_pad = true;
                  }),
        pool_case("avg_after_conv_odd_channels", "AveragePool", {2, 5, 6, 6}, {2, 2},
                  [](PoolCase& c) {
                    c.strides = {2, 2};
                    c.after_conv = true;
                  }),
        pool_case("avg_3d", "AveragePool", {1, 4, 5, 5, 5}, {2, 2, 2}),
        pool_case("global_avg", "GlobalAveragePool", {2, 16, 7, 7}, {}),
        pool_case("global_avg_after_conv", "GlobalAveragePool", {2, 32, 7, 7}, {},
                  [](PoolCase& c) { c.after_conv = true; }),
        pool_case("global_max", "GlobalMaxPool", {2, 8, 5, 6}, {})),
    [](const ::testing::TestParamInfo<PoolCase>& info) { return info.param.name; });

TEST(CpuPoolTest, CeilOverhangWithIncludePadFallsBackToThePortableKernel) {
  // oneDNN would count the overhang in the divisor; the portable AveragePool runs it instead.
  SpecBuilder s;
  const int32_t x = s.input("x", {1, 8, 10, 10});
  const int32_t y = s.output("y", {1, 8, 5, 5});
  s.dispatch("avg", "AveragePool", {x}, {y},
             attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                    {"strides", std::vector<int64_t>{2, 2}},
                    {"ceil_mode", int64_t{1}},
                    {"count_include_pad", int64_t{1}}}));
  Status st = default_cpu_device()->supports(s.spec().dispatches[0], s.spec().values);
  EXPECT_TRUE(st.ok()) << st.to_string();
}

TEST(CpuPoolTest, MaxPoolIndicesOutputFallsBackToThePortableKernel) {
  SpecBuilder s;
  const int32_t x = s.input("x", {1, 8, 4, 4});
  const int32_t y = s.output("y", {1, 8, 2, 2});
  const int32_t idx = s.output("idx", {1, 8, 2, 2}, DType::kI64);
  s.dispatch("mp", "MaxPool", {x}, {y, idx},
             attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                    {"strides", std::vector<int64_t>{2, 2}}}));
  auto exe = default_cpu_device()->prepare(s.spec());
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
}

class CpuBatchNormTest : public ::testing::TestWithParam<std::tuple<ConcreteShape, bool, bool>> {};

TEST_P(CpuBatchNormTest, MatchesReference) {
  const auto& [shape, relu, after_conv] = GetParam();
  const int64_t c = shape[1];
  Tensor x = random_tensor(shape, 11);
  Tensor scale = random_tensor({c}, 12, 0.5f, 1.5f);
  Tensor bias = random_tensor({c}, 13);
  Tensor mean = random_tensor({c}, 14);
  Tensor var = random_tensor({c}, 15, 0.1f, 2.0f);
  SpecBuilder s;
  const int32_t xi = s.input("x", shape);
  int32_t src = xi;
  Tensor bn_in = x;
  if (after_conv) {
    Tensor w = random_tensor({c, c, 3, 3}, 16);
    ConvRef cr{{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1};
    bn_in = ref_conv(x, w, nullptr, nullptr, cr);
    src = s.value("conv_out", shape);
    s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {src},
               attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  }
  const int32_t y = s.output("y", shape);
  Attributes a = attrs({{"epsilon", 1e-3}});
  if (relu) a.set("kiln_activation", std::string("relu"));
  s.dispatch("bn", "BatchNormalization",
             {src, s.constant("scale", scale), s.constant("B", bias), s.constant("mean", mean),
              s.constant("var", var)},
             {y}, a);
  auto out = run_one(s, {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close(*out, ref_batch_norm(bn_in, scale, bias, mean, var, 1e-3, relu)));
}

INSTANTIATE_TEST_SUITE_P(Variants, CpuBatchNormTest,
                         ::testing::Values(std::make_tuple(ConcreteShape{2, 16, 5, 5}, false,
                                                           false),
                                           std::make_tuple(ConcreteShape{2, 16, 5, 5}, true, false),
                                           std::make_tuple(ConcreteShape{2, 16, 6, 6}, true, true),
                                           std::make_tuple(ConcreteShape{1, 5, 4, 4}, false, true),
                                           std::make_tuple(ConcreteShape{4, 6}, true, false),
                                           std::make_tuple(ConcreteShape{2, 3, 10}, false, false)));

// ceil_mode and dilated windows at odd sizes, X = arange(n) - 100, against ONNX Runtime 1.30's
// outputs for the same models: in f32 on oneDNN's pooling and in f64 on the portable kernel. A
// dilated window with every tap in the padding gives the lowest finite value of the dtype, on
// both (and in ONNX Runtime).
TEST(CpuPoolTest, EdgeWindowsMatchOnnxRuntime) {
  const double lowest = std::numeric_limits<float>::lowest();
  struct Case {
    const char* op;
    ConcreteShape x;
    Attributes attributes;
    ConcreteShape y;
    std::vector<double> want;
  };
  using Ints = std::vector<int64_t>;
  const std::vector<Case> cases = {
      {"MaxPool",
       {1, 1, 5, 5},
       attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}),
       {1, 1, 3, 3},
       {-94, -92, -91, -84, -82, -81, -79, -77, -76}},
      {"AveragePool",
       {1, 1, 5, 5},
       attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}),
       {1, 1, 3, 3},
       {-97, -95, -93.5, -87, -85, -83.5, -79.5, -77.5, -76}},
      {"MaxPool",
       {1, 1, 2, 2},
       attrs({{"kernel_shape", Ints{2, 2}},
              {"strides", Ints{3, 3}},
              {"pads", Ints{0, 0, 1, 1}},
              {"ceil_mode", int64_t{1}}}),
       {1, 1, 1, 1},
       {-97}},
      {"AveragePool",
       {1, 1, 3, 3},
       attrs({{"kernel_shape", Ints{3, 3}},
              {"strides", Ints{2, 2}},
              {"pads", Ints{1, 1, 1, 1}},
              {"ceil_mode", int64_t{1}}}),
       {1, 1, 2, 2},
       {-98, -97, -95, -94}},
      {"MaxPool",
       {1, 1, 1, 4},
       attrs({{"kernel_shape", Ints{2, 1}}, {"dilations", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 0}}}),
       {1, 1, 1, 4},
       {lowest, lowest, lowest, lowest}},
      {"MaxPool",
       {1, 1, 1, 4},
       attrs({{"kernel_shape", Ints{2, 2}},
              {"dilations", Ints{2, 1}},
              {"strides", Ints{1, 2}},
              {"pads", Ints{1, 0, 1, 0}},
              {"ceil_mode", int64_t{1}}}),
       {1, 1, 1, 2},
       {lowest, lowest}},
  };
  for (const Case& c : cases) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      SCOPED_TRACE(fmt::format("{} [{}] {}", c.op, fmt::join(c.x, ","), dtype_name(dtype)));
      Tensor x = Tensor::create(dtype, c.x).value();
      for (int64_t i = 0; i < x.element_count(); ++i) {
        if (dtype == DType::kF32) x.mutable_values<float>()[i] = static_cast<float>(i - 100);
        if (dtype == DType::kF64) x.mutable_values<double>()[i] = static_cast<double>(i - 100);
      }
      SpecBuilder s;
      const int32_t xi = s.input("x", c.x, dtype);
      const int32_t y = s.output("y", c.y, dtype);
      s.dispatch("pool", c.op, {xi}, {y}, c.attributes);
      auto dev = default_cpu_device();
      auto exe = dev->prepare(s.spec());
      ASSERT_TRUE(exe.ok()) << exe.status().to_string();
      const std::string steps = fmt::format("{}", fmt::join((*exe)->describe_dispatch(0), "\n"));
      // f32 runs on oneDNN (its step reads "pool <impl>"), f64 on the portable kernel; but a
      // MaxPool over one channel reads a plain input that is channels last as well, and runs
      // kiln's channels-last kernel (max_pool_step.h).
      if (dtype == DType::kF32) {
        const bool kiln_max = std::string(c.op) == "MaxPool" && c.x[1] == 1;
        EXPECT_NE(steps.find(kiln_max ? "): max pool kiln" : "): pool "), std::string::npos)
            << steps;
      }
      auto out = run_program(**exe, s.spec(), {x});
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      ASSERT_EQ((*out)[0].shape(), c.y);
      for (int64_t i = 0; i < (*out)[0].element_count(); ++i) {
        const double want = c.want[i] == lowest && dtype == DType::kF64
                                ? std::numeric_limits<double>::lowest()
                                : c.want[i];
        EXPECT_EQ(element_as_double((*out)[0], i), want) << "element " << i << "\n" << steps;
      }
    }
  }
}

// Training mode: oneDNN's inference path declines it and the definition's kernel runs it, with
// the running statistics (the hand-worked case of kernels/normalize_test.cc).
TEST(CpuBatchNormTest, TrainingModeRunsThePortableKernel) {
  SpecBuilder s;
  const int32_t x = s.input("x", {2, 2, 1, 2});
  std::vector<int32_t> ins{x, s.constant("s", f32({2}, {1, 2})), s.constant("b", f32({2}, {0, 1})),
                           s.constant("m", f32({2}, {0, 0})), s.constant("v", f32({2}, {1, 1}))};
  const int32_t y = s.output("y", {2, 2, 1, 2});
  const int32_t rm = s.output("running_mean", {2});
  const int32_t rv = s.output("running_var", {2});
  s.dispatch("bn", "BatchNormalization", ins, {y, rm, rv},
             attrs({{"training_mode", int64_t{1}}, {"epsilon", 0.0}, {"momentum", 0.5}}));
  ASSERT_TRUE(default_cpu_device()->supports(s.spec().dispatches[0], s.spec().values).ok());
  auto dev = default_cpu_device();
  auto exe = dev->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = run_program(**exe, s.spec(), {f32({2, 2, 1, 2}, {1, 3, 0, 0, 5, 7, 2, 2})});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const double r5 = 1 / std::sqrt(5.0);
  EXPECT_TRUE(all_close((*out)[0], f32({2, 2, 1, 2}, {-3 * r5, -r5, -1, -1, r5, 3 * r5, 3, 3})));
  EXPECT_TRUE(all_close((*out)[1], f32({2}, {2, 0.5})));
  EXPECT_TRUE(all_close((*out)[2], f32({2}, {3, 1})));
}

// A unary op run twice in one program: on the plain input, and on a 1x1 conv's blocked output.
struct PlainAndAfterConv {
  std::vector<Tensor> outputs;  // op(x), op(conv(x))
  Tensor conv_of_x;             // the reference conv(x)
  std::string blocked_kernel;   // the step lines of the second op's dispatch
};

StatusOr<PlainAndAfterConv> run_plain_and_after_conv(const std::string& op, const Attributes& a,
                                                     const Tensor& x, const Tensor& w) {
  const ConcreteShape& shape = x.shape();
  SpecBuilder s;
  const int32_t xi = s.input("x", shape);
  const int32_t c = s.value("c", shape);
  const int32_t y1 = s.output("y1", shape);
  const int32_t y2 = s.output("y2", shape);
  s.dispatch("plain", op, {xi}, {y1}, a);
  s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {c});
  s.dispatch("blocked", op, {c}, {y2}, a);
  KILN_ASSIGN_OR_RETURN(auto exe, default_cpu_device()->prepare(s.spec()));
  PlainAndAfterConv r;
  r.blocked_kernel = fmt::format("{}", fmt::join(exe->describe_dispatch(2), "\n"));
  KILN_ASSIGN_OR_RETURN(r.outputs, run_program(*exe, s.spec(), {x}));
  ConvRef cr{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  r.conv_of_x = ref_conv(x, w, nullptr, nullptr, cr);
  return r;
}

TEST(CpuReluTest, PlainAndAfterConv) {
  Tensor x = random_tensor({2, 8, 5, 5}, 21);
  Tensor w = random_tensor({8, 8, 1, 1}, 22);
  auto r = run_plain_and_after_conv("Relu", {}, x, w);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(all_close(r->outputs[0], ref_relu(x)));
  EXPECT_TRUE(all_close(r->outputs[1], ref_relu(r->conv_of_x)));
}

// Gelu as a oneDNN eltwise in the input's layout (plain, and blocked after a conv), against
// 0.5 x (1 + erf(x / sqrt 2)) and the tanh form computed here in double.
TEST(CpuGeluTest, PlainAndAfterConvWithBothApproximations) {
  auto ref_gelu = [](const Tensor& x, bool tanh_form) {
    Tensor y = Tensor::create(DType::kF32, x.shape()).value();
    auto in = x.values<float>();
    auto out = y.mutable_values<float>();
    for (size_t i = 0; i < in.size(); ++i) {
      const double v = in[i];
      const double g = tanh_form ? std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))
                                 : std::erf(v / std::sqrt(2.0));
      out[i] = static_cast<float>(0.5 * v * (1 + g));
    }
    return y;
  };
  for (bool tanh_form : {false, true}) {
    SCOPED_TRACE(tanh_form ? "tanh" : "erf");
    Tensor x = random_tensor({2, 8, 5, 5}, 23, -4.0f, 4.0f);
    Tensor w = random_tensor({8, 8, 1, 1}, 24);
    const Attributes a = attrs({{"approximate", std::string(tanh_form ? "tanh" : "none")}});
    auto r = run_plain_and_after_conv("Gelu", a, x, w);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_NE(r->blocked_kernel.find(tanh_form ? "gelu(tanh) jit" : "gelu jit"), std::string::npos)
        << r->blocked_kernel;
    EXPECT_TRUE(all_close(r->outputs[0], ref_gelu(x, tanh_form)));
    EXPECT_TRUE(all_close(r->outputs[1], ref_gelu(r->conv_of_x, tanh_form)));
  }
}

// Sigmoid and Tanh as oneDNN eltwise, plain and after a conv: 8 channels (a blocked layout without
// padding) and 5 (padded blocks: Sigmoid(0) = 0.5 must not land in the padding, so it reads the
// conv's output plain), against the functions computed here in double.
TEST(CpuSigmoidTanhTest, PlainAndAfterConvMatchDouble) {
  auto reference = [](const Tensor& x, bool sigmoid) {
    Tensor y = Tensor::create(DType::kF32, x.shape()).value();
    auto in = x.values<float>();
    auto out = y.mutable_values<float>();
    for (size_t i = 0; i < in.size(); ++i) {
      const double v = in[i];
      out[i] = static_cast<float>(sigmoid ? 1 / (1 + std::exp(-v)) : std::tanh(v));
    }
    return y;
  };
  for (const char* op : {"Sigmoid", "Tanh"}) {
    for (int64_t channels : {8, 5}) {
      SCOPED_TRACE(fmt::format("{} channels {}", op, channels));
      Tensor x = random_tensor({2, channels, 5, 5}, 25, -6.0f, 6.0f);
      Tensor w = random_tensor({channels, channels, 1, 1}, 26);
      auto r = run_plain_and_after_conv(op, {}, x, w);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      const bool sigmoid = std::string(op) == "Sigmoid";
      EXPECT_NE(r->blocked_kernel.find(sigmoid ? "sigmoid jit" : "tanh jit"), std::string::npos)
          << r->blocked_kernel;
      EXPECT_TRUE(all_close(r->outputs[0], reference(x, sigmoid)));
      EXPECT_TRUE(all_close(r->outputs[1], reference(r->conv_of_x, sigmoid)));
    }
  }
}

// Exp and Elu (its default alpha and 0.5) as oneDNN eltwise and Softplus and Mish on kiln's
// kernels, plain and after a conv (8 channels, and 5: Exp(0) = 1 and Softplus(0) = ln 2 must not
// land in a padded block either; Mish(0) = 0 runs in the blocked layout), against the functions
// computed here in double (Elu by expm1, as the portable kernel).
TEST(CpuExpEluSoftplusMishTest, PlainAndAfterConvMatchDouble) {
  struct Case {
    const char* op;
    Attributes attributes;
    double alpha;
  };
  const std::vector<Case> cases = {{"Exp", {}, 0.0},
                                   {"Elu", {}, 1.0},
                                   {"Elu", attrs({{"alpha", 0.5}}), 0.5},
                                   {"Softplus", {}, 0.0},
                                   {"Mish", {}, 0.0}};
  for (const Case& c : cases) {
    const std::string type = c.op;
    auto reference = [&](const Tensor& x) {
      Tensor y = Tensor::create(DType::kF32, x.shape()).value();
      auto in = x.values<float>();
      auto out = y.mutable_values<float>();
      for (size_t i = 0; i < in.size(); ++i) {
        const double v = in[i], softplus = std::log1p(std::exp(v));
        out[i] = static_cast<float>(type == "Exp"        ? std::exp(v)
                                    : type == "Elu"      ? (v < 0 ? c.alpha * std::expm1(v) : v)
                                    : type == "Softplus" ? softplus
                                                         : v * std::tanh(softplus));
      }
      return y;
    };
    for (int64_t channels : {8, 5}) {
      SCOPED_TRACE(fmt::format("{} alpha {} channels {}", c.op, c.alpha, channels));
      Tensor x = random_tensor({2, channels, 5, 5}, 27, -6.0f, 6.0f);
      Tensor w = random_tensor({channels, channels, 1, 1}, 28);
      auto r = run_plain_and_after_conv(c.op, c.attributes, x, w);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      const std::string kernel = type == "Exp"        ? "exp jit"
                                 : type == "Elu"      ? "elu jit"
                                 : type == "Softplus" ? "softplus kiln"
                                                      : "mish kiln";
      EXPECT_NE(r->blocked_kernel.find(kernel), std::string::npos) << r->blocked_kernel;
      EXPECT_TRUE(all_close(r->outputs[0], reference(x)));
      EXPECT_TRUE(all_close(r->outputs[1], reference(r->conv_of_x)));
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
