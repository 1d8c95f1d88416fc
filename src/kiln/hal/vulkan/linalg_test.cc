// The Vulkan backend's matrix products (MatMul, Gemm), normalizations (Softmax, LogSoftmax,
// LayerNormalization), reductions (ReduceSum/Mean/Max/Min) and data movement (Transpose, Concat,
// Slice, Split, Expand, Gather) against the float64 reference evaluator: shapes that are not
// multiples of the matmul tile, NaN propagation, batch invariance bit for bit, int64 data, and
// forms the GPU kernels do not take, which must still compute the right result on the CPU
// fallback. The validation layer is on (vulkan_test_env.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/hal/vulkan/op_table.h"
#include "kiln/hal/vulkan/vulkan_context.h"
#include "kiln/hal/vulkan/vulkan_device.h"
#include "kiln/hal/vulkan/vulkan_executable.h"
#include "tests/support/expect.h"
#include "tests/support/graph_eval/op_graph.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"
#include "tests/support/vulkan/vulkan_test_env.h"

namespace kiln::hal::vulkan {
namespace {

using namespace kiln::testing;
using testing::make_vulkan_device;

constexpr Tolerance kTol{.atol = 1e-4, .rtol = 1e-4};
constexpr Tolerance kExact{.atol = 0, .rtol = 0};

// An input of a test dispatch: a graph input, or a constant (weights, Slice bounds, axes).
struct In {
  Tensor t;
  bool constant = false;
};
In constant(Tensor t) { return {std::move(t), true}; }

// The reference evaluator's outputs of one `op_type` node.
std::vector<Tensor> expected_of(const std::string& op_type, const std::vector<In>& ins,
                                const Attributes& attributes, size_t outputs, int64_t opset) {
  OpGraph graph(op_type, opset);
  std::vector<Tensor> runtime;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].t.data() == nullptr && ins[i].t.shape().empty()) {
      graph.absent();
    } else if (ins[i].constant) {
      graph.constant("c" + std::to_string(i), ins[i].t);
    } else {
      graph.input("x" + std::to_string(i), ins[i].t.dtype(), shape_from_concrete(ins[i].t.shape()));
      runtime.push_back(ins[i].t);
    }
  }
  for (const auto& [name, value] : attributes.all()) graph.attr(name, value);
  graph.outputs(outputs);
  auto out = graph.run(std::move(runtime));
  EXPECT_TRUE(out.ok()) << op_type << ": " << out.status().to_string();
  return out.ok() ? std::move(*out) : std::vector<Tensor>{};
}

class VulkanLinalgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = make_vulkan_device();
    ASSERT_NE(device_, nullptr);
  }
  void TearDown() override {
    set_matmul_shader_for_testing(MatmulShader::kTiled);
    if (device_ == nullptr) return;
    Status validation = vulkan().context().validation_status();
    EXPECT_TRUE(validation.ok()) << validation.to_string();
  }
  VulkanDevice& vulkan() { return static_cast<VulkanDevice&>(*device_); }

  // Runs one `op_type` dispatch on `ins` (outputs shaped as the reference's); on_gpu says where
  // the dispatch must be placed. Returns the outputs, empty on a failure (reported).
  std::vector<Tensor> run_op(const std::string& op_type, const std::vector<In>& ins,
                             const Attributes& attributes, const std::vector<Tensor>& expected,
                             bool on_gpu = true) {
    SpecBuilder s;
    std::vector<int32_t> inputs, outputs;
    std::vector<Tensor> runtime;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i].t.data() == nullptr && ins[i].t.shape().empty()) {
        inputs.push_back(-1);
      } else if (ins[i].constant) {
        inputs.push_back(s.constant("c" + std::to_string(i), ins[i].t));
      } else {
        inputs.push_back(s.input("x" + std::to_string(i), ins[i].t.shape(), ins[i].t.dtype()));
        runtime.push_back(ins[i].t);
      }
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      outputs.push_back(
          s.output("y" + std::to_string(i), expected[i].shape(), expected[i].dtype()));
    }
    s.dispatch("op", op_type, inputs, outputs, attributes);
    Status gpu = vulkan().runs_on_gpu(s.spec().dispatches[0], s.spec().values);
    EXPECT_EQ(gpu.ok(), on_gpu) << op_type << ": " << gpu.to_string();
    auto exe = device_->prepare(s.spec());
    EXPECT_TRUE(exe.ok()) << exe.status().to_string();
    if (!exe.ok()) return {};
    EXPECT_EQ(static_cast<VulkanExecutable&>(**exe).placements()[0].on_gpu, on_gpu);
    auto out = run_program(*device_, **exe, s.spec(), runtime);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? std::move(*out) : std::vector<Tensor>{};
  }

  // run_op against the reference; every output within `tol`.
  void check(const std::string& op_type, const std::vector<In>& ins,
             const Attributes& attributes = {}, Tolerance tol = kTol, bool on_gpu = true,
             size_t outputs = 1, int64_t opset = 18) {
    std::vector<Tensor> expected = expected_of(op_type, ins, attributes, outputs, opset);
    ASSERT_EQ(expected.size(), outputs);
    std::vector<Tensor> got = run_op(op_type, ins, attributes, expected, on_gpu);
    ASSERT_EQ(got.size(), outputs);
    for (size_t i = 0; i < outputs; ++i) {
      EXPECT_TRUE(all_close(got[i], expected[i], tol)) << op_type << " output " << i;
    }
  }

  // check() of a one-output op on a batch of 2 whose sample 1 holds a NaN that spreads over all of
  // its output (a mask's NaN through the softmax): every output of sample 1 NaN, none of sample 0.
  void check_nan_in_second_sample_only(const std::string& op_type, const std::vector<In>& ins,
                                       const Attributes& attributes) {
    const std::vector<Tensor> expected = expected_of(op_type, ins, attributes, 1, 18);
    ASSERT_EQ(expected.size(), 1u);
    const std::vector<Tensor> got = run_op(op_type, ins, attributes, expected);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(all_close(got[0], expected[0], kTol));
    const auto y = got[0].values<float>();
    const int64_t sample = got[0].element_count() / 2;
    for (int64_t i = 0; i < 2 * sample; ++i) EXPECT_EQ(std::isnan(y[i]), i >= sample) << i;
  }

  std::unique_ptr<Device> device_;
};

// ---- MatMul and Gemm

struct MatMulCase {
  ConcreteShape a, b;
  bool on_gpu = true;
  bool constant_b = false;  // B as weights
};

class VulkanMatMulTest : public VulkanLinalgTest,
                         public ::testing::WithParamInterface<MatMulCase> {};

TEST_P(VulkanMatMulTest, MatchesReference) {
  const MatMulCase& c = GetParam();
  check("MatMul", {{random_tensor(c.a, 1)}, {random_tensor(c.b, 2), c.constant_b}}, {}, kTol,
        c.on_gpu);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, VulkanMatMulTest,
    ::testing::Values(MatMulCase{{1, 5}, {5, 3}}, MatMulCase{{3, 7}, {7, 5}},
                      MatMulCase{{65, 33}, {33, 70}}, MatMulCase{{64, 128}, {128, 64}},
                      MatMulCase{{130, 17}, {17, 3}}, MatMulCase{{2, 3, 17, 9}, {9, 13}},
                      MatMulCase{{9, 13}, {2, 3, 13, 5}}, MatMulCase{{2, 1, 5, 4}, {1, 4, 6}},
                      MatMulCase{{2, 40, 70}, {2, 70, 33}}, MatMulCase{{7}, {7, 4}},
                      MatMulCase{{4, 7}, {7}}, MatMulCase{{7}, {7}}, MatMulCase{{3, 5}, {2, 5, 4}},
                      MatMulCase{{2, 0, 4}, {4, 3}}, MatMulCase{{3, 50, 96}, {96, 40}, true, true},
                      // Batch broadcasts one stride per operand cannot express: CPU fallback.
                      MatMulCase{{2, 1, 3, 4}, {3, 4, 5}, false},
                      MatMulCase{{3, 2, 4}, {2, 3, 4, 5}, false}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

struct GemmCase {
  bool trans_a, trans_b;
  double alpha, beta;
  std::optional<ConcreteShape> c;
};

class VulkanGemmTest : public VulkanLinalgTest, public ::testing::WithParamInterface<GemmCase> {};

TEST_P(VulkanGemmTest, MatchesReference) {
  const GemmCase& p = GetParam();
  const int64_t m = 33, k = 70, n = 65;
  std::vector<In> ins = {{random_tensor(p.trans_a ? ConcreteShape{k, m} : ConcreteShape{m, k}, 3)},
                         {random_tensor(p.trans_b ? ConcreteShape{n, k} : ConcreteShape{k, n}, 4)}};
  if (p.c) ins.push_back(constant(random_tensor(*p.c, 5)));
  Attributes a = attrs({{"alpha", p.alpha},
                        {"beta", p.beta},
                        {"transA", int64_t{p.trans_a}},
                        {"transB", int64_t{p.trans_b}}});
  check("Gemm", ins, a);
}

INSTANTIATE_TEST_SUITE_P(Forms, VulkanGemmTest,
                         ::testing::Values(GemmCase{false, false, 1, 1, std::nullopt},
                                           GemmCase{true, false, 0.5, 1, ConcreteShape{65}},
                                           GemmCase{false, true, 1, 2, ConcreteShape{33, 65}},
                                           GemmCase{true, true, -1.5, 0.25, ConcreteShape{33, 1}},
                                           GemmCase{false, true, 1, 1, ConcreteShape{}},
                                           GemmCase{false, false, 2, -1, ConcreteShape{1, 65}}),
                         [](const auto& info) { return "form" + std::to_string(info.index); });

// Row i of a [3, K] x [K, N] product is the [1, K] x [K, N] product of row i, bit for bit.
TEST_F(VulkanLinalgTest, MatMulIsBatchInvariant) {
  const int64_t k = 200, n = 70;
  Tensor a = random_tensor({3, k}, 7);
  Tensor b = random_tensor({k, n}, 8);
  std::vector<Tensor> whole =
      run_op("MatMul", {{a}, {b}}, {}, {*Tensor::create(DType::kF32, {3, n})});
  ASSERT_EQ(whole.size(), 1u);
  for (int64_t i = 0; i < 3; ++i) {
    Tensor row = *Tensor::create(DType::kF32, {1, k});
    std::memcpy(row.mutable_data(), a.data() + i * k * 4, k * 4);
    std::vector<Tensor> one =
        run_op("MatMul", {{row}, {b}}, {}, {*Tensor::create(DType::kF32, {1, n})});
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(std::memcmp(one[0].data(), whole[0].data() + i * n * 4, n * 4), 0) << "row " << i;
  }
}

TEST_F(VulkanLinalgTest, NaiveAndTiledMatMulAgree) {
  Tensor a = random_tensor({2, 37, 90}, 9);
  Tensor b = random_tensor({2, 90, 71}, 10);
  Tensor expected = ref_matmul(a, b);
  set_matmul_shader_for_testing(MatmulShader::kNaive);
  std::vector<Tensor> naive = run_op("MatMul", {{a}, {b}}, {}, {expected});
  set_matmul_shader_for_testing(MatmulShader::kTiled);
  ASSERT_EQ(naive.size(), 1u);
  EXPECT_TRUE(all_close(naive[0], expected, kTol));
  std::vector<Tensor> gemm_naive;
  set_matmul_shader_for_testing(MatmulShader::kNaive);
  Tensor ga = random_tensor({20, 30}, 11), gb = random_tensor({40, 30}, 12);
  Tensor gc = random_tensor({40}, 13);
  Attributes t = attrs({{"transB", int64_t{1}}, {"alpha", 0.5}});
  gemm_naive = run_op("Gemm", {{ga}, {gb}, {gc}}, t, {ref_gemm(ga, gb, &gc, 0.5, 1, false, true)});
  set_matmul_shader_for_testing(MatmulShader::kTiled);
  ASSERT_EQ(gemm_naive.size(), 1u);
  EXPECT_TRUE(all_close(gemm_naive[0], ref_gemm(ga, gb, &gc, 0.5, 1, false, true), kTol));
}

// kiln_scale (passes::fuse_matmul) runs on the GPU: the shader's alpha.
TEST_F(VulkanLinalgTest, MatMulKilnScaleRunsOnTheGpu) {
  check("MatMul", {{random_tensor({2, 3, 17, 9}, 1)}, {random_tensor({2, 3, 9, 13}, 2)}},
        attrs({{"kiln_scale", 0.125}}));
}

// kiln_softmax (passes::fuse_matmul) runs on the GPU too: the product, then the softmax shader's
// rows in place; rows longer than a workgroup, and a NaN in A making its row NaN.
TEST_F(VulkanLinalgTest, MatMulKilnSoftmaxRunsOnTheGpu) {
  Tensor a = random_tensor({2, 3, 17, 9}, 3, -3.0f, 3.0f);
  a.mutable_values<float>()[9 + 4] = std::numeric_limits<float>::quiet_NaN();
  check("MatMul", {{a}, {random_tensor({2, 3, 9, 300}, 4)}},
        attrs({{"kiln_scale", 0.125}, {"kiln_softmax", int64_t{1}}}));
}

// kiln_bias, kiln_residual and kiln_activation (passes::fuse_matmul: a transformer's weight
// products) run on the GPU: the bias as the shader's C, the residual and the GELU as passes over
// the product; with batched and 2-D products, a bias alone, a residual alone, both forms of GELU.
TEST_F(VulkanLinalgTest, MatMulKilnBiasResidualAndGeluRunOnTheGpu) {
  const Tensor a = random_tensor({2, 3, 17, 9}, 21), w = random_tensor({9, 13}, 22);
  const Tensor bias = random_tensor({13}, 23), residual = random_tensor({2, 3, 17, 13}, 24);
  check("MatMul", {{a}, constant(w), constant(bias), {residual}},
        attrs({{"kiln_activation", std::string("gelu")}}));
  check("MatMul", {{a}, constant(w), constant(bias), {residual}},
        attrs({{"kiln_scale", 0.5}, {"kiln_activation", std::string("gelu_tanh")}}));
  check("MatMul", {{random_tensor({70, 9}, 25)}, constant(w), constant(bias)});
  check("MatMul", {{a}, {random_tensor({2, 3, 9, 13}, 26)}, {Tensor()}, {residual}});
}

// Attention's masked scores (passes::fuse_matmul folds the mask [B, 1, 1, S] into the scores
// product as a kiln_residual that broadcasts, then the softmax): on the GPU, with -inf in the mask
// (a padded position, which the softmax makes 0), a causal mask [S, S] of a lower rank, and a NaN
// in one sample's mask (its rows NaN).
TEST_F(VulkanLinalgTest, MaskedScoresRunOnTheGpu) {
  const Tensor q = random_tensor({2, 3, 13, 8}, 27), k = random_tensor({2, 3, 8, 13}, 28);
  Tensor mask = random_tensor({2, 1, 1, 13}, 29);
  mask.mutable_values<float>()[4] = -std::numeric_limits<float>::infinity();
  const Attributes scores = attrs({{"kiln_scale", 0.125}, {"kiln_softmax", int64_t{1}}});
  check("MatMul", {{q}, {k}, {Tensor()}, {mask}}, scores);
  check("MatMul", {{q}, {k}, {Tensor()}, {random_tensor({13, 13}, 30)}}, scores);  // causal [S, S]
  mask.mutable_values<float>()[13 + 2] = std::numeric_limits<float>::quiet_NaN();
  check_nan_in_second_sample_only("MatMul", {{q}, {k}, {Tensor()}, {mask}}, scores);
}

// kiln_values (passes::fuse_matmul: attention's probabilities times V) runs on the GPU: the
// masked scores in the program's scratch buffer, then the product with V into the output; V
// per head and V of rank 2 for every head, and a NaN in one sample's mask (its rows NaN).
TEST_F(VulkanLinalgTest, AttentionValuesRunOnTheGpu) {
  const Tensor q = random_tensor({2, 3, 13, 8}, 31), k = random_tensor({2, 3, 8, 13}, 32);
  Tensor mask = random_tensor({2, 1, 1, 13}, 33);
  const Attributes scores = attrs({{"kiln_scale", 0.125}, {"kiln_softmax", int64_t{1}}});
  check("MatMul", {{q}, {k}, {Tensor()}, {mask}, {random_tensor({2, 3, 13, 5}, 34)}}, scores);
  check("MatMul", {{q}, {k}, {Tensor()}, {Tensor()}, {random_tensor({13, 70}, 35)}}, scores);
  mask.mutable_values<float>()[13 + 2] = std::numeric_limits<float>::quiet_NaN();
  check_nan_in_second_sample_only(
      "MatMul", {{q}, {k}, {Tensor()}, {mask}, {random_tensor({2, 3, 13, 5}, 36)}}, scores);
}

// Two attention dispatches in one program share one scratch buffer for their scores (the second's
// are fewer, so it reuses the first's; a barrier separates them): the second reads the first's
// output, and both match the reference.
TEST_F(VulkanLinalgTest, AttentionDispatchesShareTheirScratch) {
  const Tensor q = random_tensor({2, 3, 13, 8}, 41), k = random_tensor({2, 3, 8, 13}, 42);
  const Tensor v = random_tensor({2, 3, 13, 8}, 43), k2 = random_tensor({2, 3, 8, 7}, 44);
  const Tensor v2 = random_tensor({2, 3, 7, 5}, 45);
  const Attributes scores = attrs({{"kiln_scale", 0.125}, {"kiln_softmax", int64_t{1}}});
  const std::vector<Tensor> first =
      expected_of("MatMul", {{q}, {k}, {Tensor()}, {Tensor()}, {v}}, scores, 1, 18);
  ASSERT_EQ(first.size(), 1u);
  const std::vector<Tensor> second =
      expected_of("MatMul", {{first[0]}, {k2}, {Tensor()}, {Tensor()}, {v2}}, scores, 1, 18);
  ASSERT_EQ(second.size(), 1u);
  SpecBuilder s;
  const int32_t qi = s.input("q", q.shape()), ki = s.input("k", k.shape());
  const int32_t vi = s.input("v", v.shape()), k2i = s.input("k2", k2.shape());
  const int32_t v2i = s.input("v2", v2.shape());
  const int32_t y0 = s.value("y0", first[0].shape()), y1 = s.output("y1", second[0].shape());
  s.dispatch("attend0", "MatMul", {qi, ki, -1, -1, vi}, {y0}, scores);
  s.dispatch("attend1", "MatMul", {y0, k2i, -1, -1, v2i}, {y1}, scores);
  auto exe = device_->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  for (const DispatchPlacement& p : static_cast<VulkanExecutable&>(**exe).placements()) {
    EXPECT_TRUE(p.on_gpu) << p.reason;
  }
  auto out = run_program(*device_, **exe, s.spec(), {q, k, v, k2, v2});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], second[0], kTol));
}

TEST_F(VulkanLinalgTest, MatMulPropagatesNaN) {
  Tensor a = random_tensor({5, 20}, 14);
  a.mutable_values<float>()[2 * 20 + 3] = std::numeric_limits<float>::quiet_NaN();
  Tensor b = random_tensor({20, 70}, 15);
  std::vector<Tensor> out = run_op("MatMul", {{a}, {b}}, {}, {ref_matmul(a, b)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(all_close(out[0], ref_matmul(a, b), kTol));
  for (int64_t j = 0; j < 70; ++j) EXPECT_TRUE(std::isnan(out[0].values<float>()[2 * 70 + j]));
  EXPECT_FALSE(std::isnan(out[0].values<float>()[0]));
}

// ---- Softmax, LogSoftmax, LayerNormalization

struct AxisCase {
  std::string op;
  ConcreteShape shape;
  int64_t axis;
};

class VulkanSoftmaxTest : public VulkanLinalgTest,
                          public ::testing::WithParamInterface<AxisCase> {};

TEST_P(VulkanSoftmaxTest, MatchesReferenceAndPropagatesNaN) {
  const AxisCase& c = GetParam();
  Tensor x = random_tensor(c.shape, 16, -8.0f, 8.0f);
  x.mutable_values<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  check(c.op, {{x}}, attrs({{"axis", c.axis}}), kTol, true, 1, 13);
}

INSTANTIATE_TEST_SUITE_P(
    Axes, VulkanSoftmaxTest,
    ::testing::Values(AxisCase{"Softmax", {2, 3, 5}, -1}, AxisCase{"Softmax", {2, 3, 5}, 1},
                      AxisCase{"Softmax", {2, 3, 5}, 0}, AxisCase{"Softmax", {4, 1000}, 1},
                      AxisCase{"LogSoftmax", {2, 3, 5}, -1}, AxisCase{"LogSoftmax", {6, 7}, 0}),
    [](const auto& info) { return info.param.op + std::to_string(info.index); });

TEST_F(VulkanLinalgTest, SoftmaxOfLargeValuesDoesNotOverflow) {
  Tensor x = f32({2, 3}, {1000, 1001, 1002, -1000, 0, 1000});
  check("Softmax", {{x}}, attrs({{"axis", int64_t{1}}}), kTol, true, 1, 13);
  check("LogSoftmax", {{x}}, attrs({{"axis", int64_t{1}}}), kTol, true, 1, 13);
}

TEST_F(VulkanLinalgTest, LayerNormalizationMatchesReference) {
  Tensor x = random_tensor({2, 5, 16}, 17, -3.0f, 3.0f);
  check("LayerNormalization",
        {{x}, constant(random_tensor({16}, 18)), constant(random_tensor({16}, 19))},
        attrs({{"epsilon", 1e-3}}));
  check("LayerNormalization", {{x}, {random_tensor({5, 16}, 20)}}, attrs({{"axis", int64_t{1}}}));
  check("LayerNormalization", {{x}, constant(random_tensor({1}, 21)), {random_tensor({16}, 22)}},
        attrs({{"axis", int64_t{-1}}}));
  // NaN in one row spreads over that row only.
  x.mutable_values<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  check("LayerNormalization", {{x}, constant(random_tensor({16}, 18))});
}

TEST_F(VulkanLinalgTest, LayerNormalizationOfLongRows) {
  check("LayerNormalization", {{random_tensor({3, 600}, 26, -3.0f, 3.0f)},
                               constant(random_tensor({600}, 27)),
                               constant(random_tensor({600}, 28))});
}

// Row i of a [3, n] Softmax, LogSoftmax or LayerNormalization equals the row run alone, bit for
// bit (workgroup-per-row kernels: the reduction order does not depend on the row count).
TEST_F(VulkanLinalgTest, RowKernelsAreBatchInvariant) {
  const int64_t n = 300;
  Tensor x = random_tensor({3, n}, 29, -5.0f, 5.0f);
  Tensor scale = random_tensor({n}, 30);
  for (const char* op : {"Softmax", "LogSoftmax", "LayerNormalization"}) {
    const bool norm = std::string(op) == "LayerNormalization";
    std::vector<In> ins = {{x}};
    if (norm) ins.push_back(constant(scale));
    std::vector<Tensor> whole = run_op(op, ins, {}, {*Tensor::create(DType::kF32, {3, n})});
    ASSERT_EQ(whole.size(), 1u);
    for (int64_t i = 0; i < 3; ++i) {
      Tensor row = *Tensor::create(DType::kF32, {1, n});
      std::memcpy(row.mutable_data(), x.data() + i * n * 4, n * 4);
      ins[0] = {row};
      std::vector<Tensor> one = run_op(op, ins, {}, {*Tensor::create(DType::kF32, {1, n})});
      ASSERT_EQ(one.size(), 1u);
      EXPECT_EQ(std::memcmp(one[0].data(), whole[0].data() + i * n * 4, n * 4), 0)
          << op << " row " << i;
    }
  }
}

TEST_F(VulkanLinalgTest, LayerNormalizationFormsTheGpuDoesNotTakeRunOnTheCpu) {
  Tensor x = random_tensor({2, 5, 16}, 23);
  // Scale broadcast within the block.
  check("LayerNormalization", {{x}, constant(random_tensor({5, 1}, 24))},
        attrs({{"axis", int64_t{1}}}), kTol, false);
  // Mean and InvStdDev outputs.
  check("LayerNormalization", {{x}, constant(random_tensor({16}, 25))}, {}, kTol, false, 3);
}

// ---- Reductions

struct ReduceCase {
  std::string op;
  ConcreteShape shape;
  std::optional<std::vector<int64_t>> axes;  // as input 1 (a constant)
  int64_t keepdims = 1;
  int64_t noop = 0;
};

class VulkanReduceTest : public VulkanLinalgTest,
                         public ::testing::WithParamInterface<ReduceCase> {};

TEST_P(VulkanReduceTest, MatchesReference) {
  const ReduceCase& c = GetParam();
  Tensor x = random_tensor(c.shape, 26, -2.0f, 2.0f);
  std::vector<In> ins = {{x}};
  if (c.axes) {
    ins.push_back(constant(i64({static_cast<int64_t>(c.axes->size())}, *c.axes)));
  }
  check(c.op, ins, attrs({{"keepdims", c.keepdims}, {"noop_with_empty_axes", c.noop}}));
}

INSTANTIATE_TEST_SUITE_P(
    Forms, VulkanReduceTest,
    ::testing::Values(ReduceCase{"ReduceSum", {3, 4, 5}, std::vector<int64_t>{1}},
                      ReduceCase{"ReduceMean", {3, 4, 5}, std::vector<int64_t>{0, 2}, 0},
                      ReduceCase{"ReduceMax", {3, 4, 5}, std::vector<int64_t>{-1}},
                      ReduceCase{"ReduceMin", {3, 4, 5}, std::nullopt, 0},
                      ReduceCase{"ReduceMean", {2, 1, 3, 4, 2}, std::vector<int64_t>{1, 3}},
                      ReduceCase{"ReduceSum", {2, 3, 4, 5, 6}, std::vector<int64_t>{0, 2, 4}, 0},
                      ReduceCase{"ReduceMean", {8, 768}, std::vector<int64_t>{1}},
                      ReduceCase{"ReduceSum", {3, 4}, std::vector<int64_t>{}, 1, 1},
                      ReduceCase{"ReduceMax", {3, 0, 2}, std::vector<int64_t>{1}},
                      ReduceCase{"ReduceMean", {3, 0, 2}, std::vector<int64_t>{1}, 0}),
    [](const auto& info) { return info.param.op + std::to_string(info.index); });

TEST_F(VulkanLinalgTest, ReduceMaxAndMinPropagateNaN) {
  Tensor x = random_tensor({3, 6}, 27);
  x.mutable_values<float>()[6 + 2] = std::numeric_limits<float>::quiet_NaN();
  for (const char* op : {"ReduceMax", "ReduceMin", "ReduceSum"}) {
    check(op, {{x}, constant(i64({1}, {1}))});
  }
}

// Five kept and five reduced axis runs: beyond the kernel's four of each, so the CPU runs it.
TEST_F(VulkanLinalgTest, ReduceOverManyAxisRunsRunsOnTheCpu) {
  Tensor x = random_tensor({2, 3, 2, 3, 2, 3, 2, 3, 2, 3}, 28);
  check("ReduceSum", {{x}, constant(i64({5}, {1, 3, 5, 7, 9}))}, {}, kTol, false);
}

// ---- Data movement

Tensor int64_tensor(ConcreteShape shape, int64_t seed) {
  Tensor t = *Tensor::create(DType::kI64, shape);
  auto v = t.mutable_values<int64_t>();
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = (static_cast<int64_t>(i) * 7919 + seed) * (int64_t{1} << 33) + static_cast<int64_t>(i);
  }
  return t;
}

TEST_F(VulkanLinalgTest, TransposeOfFourAndEightByteElements) {
  Tensor f = random_tensor({2, 3, 4, 5}, 29);
  Tensor l = int64_tensor({2, 3, 4, 5}, 30);
  for (const Tensor* x : {&f, &l}) {
    check("Transpose", {{*x}}, attrs({{"perm", std::vector<int64_t>{2, 0, 3, 1}}}), kExact);
    check("Transpose", {{*x}}, {}, kExact);
  }
  Tensor i = *Tensor::create(DType::kI32, {3, 7});
  for (int32_t k = 0; k < 21; ++k) i.mutable_values<int32_t>()[k] = k * 1000003;
  check("Transpose", {{i}}, {}, kExact);
  // 7 dims that do not merge: beyond the kernel's rank 6.
  check("Transpose", {{random_tensor({2, 2, 2, 2, 2, 2, 2}, 31)}},
        attrs({{"perm", std::vector<int64_t>{6, 5, 4, 3, 2, 1, 0}}}), kExact, false);
  // One-byte elements: CPU.
  check("Transpose", {{u8({2, 3}, {1, 2, 3, 4, 5, 6})}}, {}, kExact, false);
}

TEST_F(VulkanLinalgTest, ConcatOfInputsAndConstants) {
  check("Concat",
        {{random_tensor({2, 3, 4}, 32)},
         constant(random_tensor({2, 1, 4}, 33)),
         {random_tensor({2, 5, 4}, 34)}},
        attrs({{"axis", int64_t{1}}}), kExact);
  check("Concat", {{int64_tensor({3, 2}, 35)}, {int64_tensor({3, 5}, 36)}},
        attrs({{"axis", int64_t{-1}}}), kExact);
  check("Concat",
        {{int64_tensor({2, 2}, 37)}, {int64_tensor({0, 2}, 38)}, {int64_tensor({1, 2}, 39)}},
        attrs({{"axis", int64_t{0}}}), kExact);
}

TEST_F(VulkanLinalgTest, SliceWithNegativeStepsAndAxes) {
  Tensor x = random_tensor({5, 6, 7}, 40);
  Tensor l = int64_tensor({5, 6, 7}, 41);
  for (const Tensor* t : {&x, &l}) {
    check("Slice",
          {{*t},
           constant(i64({2}, {1, -1})),
           constant(i64({2}, {4, 0})),
           constant(i64({2}, {0, 2})),
           constant(i64({2}, {2, -2}))},
          {}, kExact);
    check("Slice",
          {{*t},
           constant(i64({1}, {-2})),
           constant(i64({1}, {INT64_MIN})),
           constant(i64({1}, {1})),
           constant(i64({1}, {-1}))},
          {}, kExact);
    check("Slice", {{*t}, constant(i32({2}, {0, 1})), constant(i32({2}, {100, 3}))}, {}, kExact);
  }
}

TEST_F(VulkanLinalgTest, SliceBoundsTheShapeProgramKnows) {
  Tensor x = random_tensor({4, 6}, 42);
  Tensor starts = i64({1}, {1}), ends = i64({1}, {5}), axes = i64({1}, {1});
  std::vector<Tensor> expected =
      expected_of("Slice", {{x}, constant(starts), constant(ends), constant(axes)}, {}, 1, 18);
  ASSERT_EQ(expected.size(), 1u);
  SpecBuilder s;
  const int32_t xi = s.input("x", {4, 6});
  const int32_t si = s.input("starts", {1}, DType::kI64);
  const int32_t ei = s.input("ends", {1}, DType::kI64);
  const int32_t ai = s.constant("axes", axes);
  const int32_t y = s.output("y", expected[0].shape());
  s.spec().values[si].known_value = starts;
  s.spec().values[ei].known_value = ends;
  s.dispatch("slice", "Slice", {xi, si, ei, ai}, {y});
  EXPECT_TRUE(vulkan().runs_on_gpu(s.spec().dispatches[0], s.spec().values).ok());
  auto exe = device_->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = run_program(*device_, **exe, s.spec(), {x, starts, ends});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], expected[0], kExact));
  // Bounds nobody knows before the run: CPU.
  s.spec().values[si].known_value.reset();
  EXPECT_EQ(vulkan().runs_on_gpu(s.spec().dispatches[0], s.spec().values).code(),
            StatusCode::kUnimplemented);
}

TEST_F(VulkanLinalgTest, SplitEqualAndBySizes) {
  Tensor x = random_tensor({4, 9, 2}, 43);
  check("Split", {{x}}, attrs({{"axis", int64_t{1}}}), kExact, true, 3);
  check("Split", {{int64_tensor({4, 9, 2}, 44)}, constant(i64({3}, {2, 0, 7}))},
        attrs({{"axis", int64_t{1}}}), kExact, true, 3);
  check("Split", {{x}, constant(i64({2}, {1, 3}))}, {}, kExact, true, 2);
}

TEST_F(VulkanLinalgTest, ExpandBroadcastsWithStrideZero) {
  check("Expand", {{random_tensor({3, 1}, 45)}, constant(i64({3}, {2, 1, 4}))}, {}, kExact);
  check("Expand", {{int64_tensor({1, 5}, 46)}, constant(i64({2}, {3, 1}))}, {}, kExact);
}

TEST_F(VulkanLinalgTest, GatherWithNegativeIndices) {
  Tensor table = random_tensor({10, 8}, 47);
  check("Gather", {{table}, {i64({2, 3}, {0, -1, 4, 9, -10, 3})}}, {}, kExact);
  check("Gather", {{table}, constant(i32({2}, {7, -2}))}, attrs({{"axis", int64_t{1}}}), kExact);
  check("Gather", {{int64_tensor({4, 3, 2}, 48)}, {i32({1}, {-3})}}, attrs({{"axis", int64_t{1}}}),
        kExact);
  check("Gather", {{int64_tensor({6}, 49)}, {i64({}, {5})}}, {}, kExact);
}

// An index out of range is the definition's error on the GPU too, and the next run still works.
TEST_F(VulkanLinalgTest, GatherIndexOutOfRangeIsTheDefinitionsError) {
  SpecBuilder s;
  const int32_t di = s.input("data", {4, 3});
  const int32_t ii = s.input("indices", {2}, DType::kI64);
  const int32_t y = s.output("y", {2, 3});
  s.dispatch("gather", "Gather", {di, ii}, {y});
  auto exe = device_->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  ASSERT_TRUE(static_cast<VulkanExecutable&>(**exe).placements()[0].on_gpu);
  Tensor data = random_tensor({4, 3}, 50);
  for (int64_t bad : {int64_t{4}, int64_t{-5}, int64_t{1} << 40}) {
    auto out = run_program(*device_, **exe, s.spec(), {data, i64({2}, {1, bad})});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find("element [1] = " + std::to_string(bad) +
                                          " is out of range [-4, 3]"),
              std::string::npos)
        << out.status().to_string();
  }
  auto good = run_program(*device_, **exe, s.spec(), {data, i64({2}, {3, -4})});
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_TRUE(all_close((*good)[0], reference("Gather", {data, i64({2}, {3, -4})}), kExact));
}

// Constant indices are checked when the dispatch is prepared: one out of range sends the Gather to
// the CPU, which reports the definition's error.
TEST_F(VulkanLinalgTest, GatherConstantIndexOutOfRangeRunsOnTheCpu) {
  SpecBuilder s;
  const int32_t di = s.input("data", {4, 3});
  const int32_t ii = s.constant("indices", i64({2}, {1, 5}));
  const int32_t y = s.output("y", {2, 3});
  s.dispatch("gather", "Gather", {di, ii}, {y});
  auto exe = device_->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  EXPECT_FALSE(static_cast<VulkanExecutable&>(**exe).placements()[0].on_gpu);
  auto out = run_program(*device_, **exe, s.spec(), {random_tensor({4, 3}, 51)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("element [1] = 5 is out of range [-4, 3]"),
            std::string::npos)
      << out.status().to_string();
}

}  // namespace
}  // namespace kiln::hal::vulkan
