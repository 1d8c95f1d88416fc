// Gemm, MatMul, Softmax and the data-movement ops (Flatten, Reshape, Identity, Dropout) against
// naive references; Flatten/Reshape after blocked convs check the reorder back to plain.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <tuple>

#include "kiln/hal/cpu/cpu_device_for_tests.h"
#include "kiln/kernels/op_attributes.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

StatusOr<std::vector<Tensor>> prepare_and_run(SpecBuilder& s, const std::vector<Tensor>& inputs) {
  auto dev = default_cpu_device();
  KILN_ASSIGN_OR_RETURN(auto exe, dev->prepare(s.spec()));
  return run_program(*exe, s.spec(), inputs);
}

struct GemmCase {
  bool trans_a, trans_b;
  double alpha, beta;
  std::optional<ConcreteShape> c;
  bool constant_b;
  int64_t m = 5;
  int64_t k = 37, n = 19;
};

class CpuGemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(CpuGemmTest, MatchesReference) {
  const GemmCase& g = GetParam();
  const int64_t m = g.m, k = g.k, n = g.n;
  const ConcreteShape as = g.trans_a ? ConcreteShape{k, m} : ConcreteShape{m, k};
  const ConcreteShape bs = g.trans_b ? ConcreteShape{n, k} : ConcreteShape{k, n};
  Tensor a = random_tensor(as, 1), b = random_tensor(bs, 2);
  Tensor c = g.c ? random_tensor(*g.c, 3) : Tensor();
  SpecBuilder s;
  std::vector<Tensor> inputs{a};
  std::vector<int32_t> ins{s.input("a", as)};
  if (g.constant_b) {
    ins.push_back(s.constant("b", b));
  } else {
    ins.push_back(s.input("b", bs));
    inputs.push_back(b);
  }
  if (g.c) ins.push_back(s.constant("c", c));
  const int32_t y = s.output("y", {m, n});
  s.dispatch("gemm", "Gemm", ins, {y},
             attrs({{"transA", int64_t{g.trans_a}},
                    {"transB", int64_t{g.trans_b}},
                    {"alpha", g.alpha},
                    {"beta", g.beta}}));
  auto out = prepare_and_run(s, inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0],
                        ref_gemm(a, b, g.c ? &c : nullptr, g.alpha, g.beta, g.trans_a, g.trans_b)));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuGemmTest,
    ::testing::Values(GemmCase{false, false, 1.0, 1.0, std::nullopt, true},
                      GemmCase{false, true, 1.0, 1.0, ConcreteShape{19}, true},
                      GemmCase{true, false, 0.5, 2.0, ConcreteShape{1, 19}, true},
                      GemmCase{true, true, -1.5, 0.25, ConcreteShape{5, 1}, true},
                      GemmCase{false, false, 2.0, 1.0, ConcreteShape{5, 19}, false},
                      GemmCase{false, true, 1.0, -1.0, ConcreteShape{}, false},
                      GemmCase{true, false, 1.0, 0.0, ConcreteShape{19}, false},
                      GemmCase{true, true, 0.75, 1.0, ConcreteShape{19}, false},
                      GemmCase{false, true, 1.0, 1.0, ConcreteShape{19}, true, 1},
                      // A square constant B stored plain is byte for byte the layout oneDNN asks
                      // for: transB must still read it transposed (a transformer's out_proj Gemm
                      // gave x @ W + b instead of x @ W^T + b).
                      GemmCase{false, true, 1.0, 1.0, ConcreteShape{16}, true, 6, 16, 16},
                      GemmCase{true, true, 1.0, 1.0, std::nullopt, true, 16, 16, 16},
                      GemmCase{false, true, 1.0, 1.0, std::nullopt, false, 6, 16, 16},
                      // Across the kernel's 6-row blocks, 16-column panels and 256-long k blocks.
                      GemmCase{true, true, 0.5, 2.0, ConcreteShape{97, 1}, true, 97, 300, 33},
                      GemmCase{false, false, 1.0, 1.0, ConcreteShape{13, 17}, false, 13, 513, 17}));

struct MatMulCase {
  ConcreteShape a, b;
  bool constant_b;
};

class CpuMatMulTest : public ::testing::TestWithParam<MatMulCase> {};

TEST_P(CpuMatMulTest, MatchesReference) {
  const MatMulCase& c = GetParam();
  Tensor a = random_tensor(c.a, 1), b = random_tensor(c.b, 2);
  Tensor expected = ref_matmul(a, b);
  SpecBuilder s;
  std::vector<Tensor> inputs{a};
  const int32_t ai = s.input("a", c.a);
  int32_t bi;
  if (c.constant_b) {
    bi = s.constant("b", b);
  } else {
    bi = s.input("b", c.b);
    inputs.push_back(b);
  }
  const int32_t y = s.output("y", expected.shape());
  s.dispatch("mm", "MatMul", {ai, bi}, {y});
  auto out = prepare_and_run(s, inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], expected));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuMatMulTest,
    ::testing::Values(
        MatMulCase{{4, 5}, {5, 6}, true}, MatMulCase{{4, 5}, {5, 6}, false},
        MatMulCase{{2, 3, 4, 5}, {5, 6}, true}, MatMulCase{{3, 4, 5}, {3, 5, 6}, false},
        MatMulCase{{1, 4, 5}, {3, 5, 6}, false}, MatMulCase{{3, 4, 5}, {1, 5, 6}, true},
        MatMulCase{{2, 1, 4, 5}, {3, 5, 6}, false}, MatMulCase{{5}, {5, 6}, true},
        MatMulCase{{2, 4, 5}, {5}, false}, MatMulCase{{5}, {5}, false},
        MatMulCase{{1, 7}, {7, 3}, true},
        // Across the kernel's 6-row blocks, 16-column panels and 256-long k blocks;
        // B broadcast over some of A's leading dims.
        MatMulCase{{2, 97, 300}, {300, 33}, true}, MatMulCase{{3, 7, 260}, {3, 260, 17}, false},
        MatMulCase{{2, 3, 5, 16}, {3, 16, 40}, true},
        MatMulCase{{2, 1, 9, 8}, {1, 4, 8, 16}, false},
        // Empty: k = 0 gives zeros; no rows, no columns.
        MatMulCase{{2, 0}, {0, 3}, true}, MatMulCase{{2, 0}, {0, 3}, false},
        MatMulCase{{0, 4}, {4, 3}, true}, MatMulCase{{3, 4}, {4, 0}, false}));

// MatMul's kiln_bias and kiln_residual (inputs 2 and 3, passes::fuse_matmul) give the bits of
// MatMul then Add then Add, with NaN in the bias propagating to its column and in the residual to
// its element; several matrices of A, and a batched B (one product per matrix).
TEST(CpuMatMulTest, KilnBiasAndResidualGiveTheUnfusedBits) {
  struct Case {
    ConcreteShape a, b;
    bool bias, residual;
  };
  for (const Case& c : std::vector<Case>{{{4, 5}, {5, 6}, true, false},
                                         {{2, 97, 300}, {300, 33}, true, true},
                                         {{3, 16, 800}, {800, 49}, false, true},
                                         {{4, 5}, {5, 6}, false, true},
                                         {{3, 7, 20}, {3, 20, 17}, true, true},
                                         {{9}, {9, 6}, false, true}}) {
    const int64_t n = c.b.back();
    const Tensor a = random_tensor(c.a, 1), w = random_tensor(c.b, 2);
    Tensor bias = random_tensor({n}, 3);
    bias.mutable_values<float>()[1] = std::numeric_limits<float>::quiet_NaN();
    ConcreteShape ys = c.a;
    ys.back() = n;
    Tensor residual = random_tensor(ys, 4);
    residual.mutable_values<float>()[2] = std::numeric_limits<float>::quiet_NaN();
    SpecBuilder fused;
    {
      const int32_t ai = fused.input("a", c.a), ri = fused.input("r", ys);
      const int32_t y = fused.output("y", ys);
      std::vector<int32_t> ins{ai, fused.constant("w", w)};
      ins.push_back(c.bias ? fused.constant("bias", bias) : -1);
      if (c.residual) ins.push_back(ri);
      fused.dispatch("mm", "MatMul", ins, {y});
    }
    SpecBuilder unfused;
    {
      const int32_t ai = unfused.input("a", c.a), ri = unfused.input("r", ys);
      const int32_t y = unfused.output("y", ys);
      int32_t v = unfused.value("p", ys);
      unfused.dispatch("mm", "MatMul", {ai, unfused.constant("w", w)}, {v});
      if (c.bias) {
        const int32_t next = c.residual ? unfused.value("q", ys) : y;
        unfused.dispatch("add", "Add", {v, unfused.constant("bias", bias)}, {next});
        v = next;
      }
      if (c.residual) unfused.dispatch("residual", "Add", {ri, v}, {y});
    }
    auto got = prepare_and_run(fused, {a, residual});
    auto want = prepare_and_run(unfused, {a, residual});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    const Tensor& g = (*got)[0];
    const Tensor& e = (*want)[0];
    ASSERT_EQ(g.byte_size(), e.byte_size());
    for (int64_t i = 0; i < g.element_count(); ++i) {
      const float x = g.values<float>()[i], ex = e.values<float>()[i];
      if ((c.bias && i % n == 1) || (c.residual && i == 2)) {
        EXPECT_TRUE(std::isnan(x)) << i;
        continue;
      }
      ASSERT_EQ(std::memcmp(&x, &ex, sizeof(float)), 0) << i << ": " << x << " vs " << ex;
    }
  }
}

// The value, or an empty tensor (that no comparison passes) and a test failure.
Tensor value_or_fail(StatusOr<std::vector<Tensor>> r) {
  if (!r.ok()) {
    ADD_FAILURE() << r.status().to_string();
    return Tensor();
  }
  return std::move(r->at(0));
}

// Relu(x) -> Transpose(perm) -> MatMul with the transpose as input `slot` (0: A, 1: B) and
// `other` as the other operand (a graph input, or a constant).
struct TransposedOperand {
  Tensor x;
  ConcreteShape perm;
  size_t slot;
  Tensor other;
  bool constant_other = false;
  bool shape_reader = false;  // a Shape of the transpose too, which reads its dims only
  std::string matmul_says;    // what the MatMul's description holds where the view is read
};

// Runs `c` twice: with the MatMul the transpose's only reader, where the transpose must be a view
// (a copy the runtime skips by placing both at one offset), and with a second reader that forces
// the copy (a reorder). Returns the MatMul's output of each run.
std::vector<Tensor> run_view_and_copy(const TransposedOperand& c) {
  ConcreteShape t_shape;
  for (int64_t p : c.perm) t_shape.push_back(c.x.shape()[static_cast<size_t>(p)]);
  const ConcreteShape& a = c.slot == 0 ? t_shape : c.other.shape();
  const ConcreteShape& b = c.slot == 0 ? c.other.shape() : t_shape;
  ConcreteShape y = a;
  y.back() = b.back();
  for (size_t d = 0; d + 2 < y.size() && b.size() == y.size(); ++d) y[d] = std::max(y[d], b[d]);
  const std::string name =
      fmt::format("{} perm {}", fmt::join(c.x.shape(), "x"), fmt::join(c.perm, ","));
  std::vector<Tensor> outputs;
  for (bool also_read : {false, true}) {
    SpecBuilder s;
    std::vector<Tensor> inputs{c.x};
    const int32_t xi = s.input("x", c.x.shape());
    int32_t oi;
    if (c.constant_other) {
      oi = s.constant("other", c.other);
    } else {
      oi = s.input("other", c.other.shape());
      inputs.push_back(c.other);
    }
    const int32_t relu = s.value("relu", c.x.shape());
    s.dispatch("relu", "Relu", {xi}, {relu});
    const int32_t t = s.value("t", t_shape);
    s.dispatch("transpose", "Transpose", {relu}, {t}, attrs({{"perm", c.perm}}));
    const int32_t out = s.output("y", y);
    s.dispatch("matmul", "MatMul", c.slot == 0 ? std::vector<int32_t>{t, oi} : std::vector{oi, t},
               {out});
    if (also_read) {
      const int32_t copy = s.output("t_copy", t_shape);
      s.dispatch("identity", "Relu", {t}, {copy});
    }
    if (c.shape_reader) {
      const int32_t dims = s.output("t_shape", {static_cast<int64_t>(t_shape.size())}, DType::kI64);
      s.dispatch("shape", "Shape", {t}, {dims});
    }
    auto exe = default_cpu_device()->prepare(s.spec());
    if (!exe.ok()) {
      ADD_FAILURE() << exe.status().to_string();
      return {};
    }
    const std::vector<std::string> lines = (*exe)->describe_dispatch(1);
    EXPECT_EQ(!lines.empty() && lines[0].find("reorder") == std::string::npos, !also_read)
        << name << (lines.empty() ? "" : lines[0]);
    if (!also_read && !c.matmul_says.empty()) {
      const std::vector<std::string> matmul = (*exe)->describe_dispatch(2);
      EXPECT_TRUE(!matmul.empty() && matmul[0].find(c.matmul_says) != std::string::npos)
          << name << (matmul.empty() ? "" : matmul[0]);
    }
    outputs.push_back(value_or_fail(run_program(**exe, s.spec(), inputs)));
  }
  return outputs;
}

// A Transpose whose only reader is a MatMul taking it as B hands over a strided view of its input
// (no copy): attention's K^T as a "cab" view of K [seq, heads, d], and a batched (0,1,3,2).
// Packing B from those strides gives the bits of packing the transposed copy, which the same
// program makes when the transpose is also read by another op.
TEST(CpuMatMulTest, ATransposedBIsReadThroughItsStridesWithTheCopysBits) {
  struct Case {
    ConcreteShape k, perm, q;
  };
  for (const Case& c :
       {Case{{7, 3, 4}, {1, 2, 0}, {3, 5, 4}}, Case{{2, 3, 9, 4}, {0, 1, 3, 2}, {2, 3, 6, 4}}}) {
    const Tensor k = random_tensor(c.k, 31), q = random_tensor(c.q, 32);
    const std::vector<Tensor> outputs = run_view_and_copy({k, c.perm, 1, q});
    ASSERT_EQ(outputs.size(), 2u);
    EXPECT_TRUE(identical(outputs[0], outputs[1])) << fmt::format("{}", fmt::join(c.k, "x"));
    Tensor transposed = reference("Transpose", {ref_relu(k)}, attrs({{"perm", c.perm}}));
    EXPECT_TRUE(all_close(outputs[0], ref_matmul(q, transposed), {.atol = 1e-5, .rtol = 1e-5}));
  }
}

// A Transpose feeding a MatMul as A, keeping the last axis last (attention's head split of Q), is
// read through its strides in place, with the bits of the copied transpose: B an input of the
// output's rank (a product per matrix), and B a constant matrix (one B for every matrix of A).
// A sequence-first view [T, N, k] of [N, T, k] bytes with a constant B (PyTorch's
// MultiheadAttention's in_proj) runs a product of T rows per sample, and a Shape reading the
// transpose (the export's size arithmetic) leaves it a view.
TEST(CpuMatMulTest, ATransposedAIsReadThroughItsStridesWithTheCopysBits) {
  struct Case {
    ConcreteShape q, perm, b;
    bool constant_b;
    bool shape_reader = false;
    std::string matmul_says;
  };
  const std::string rows_along_dim0 = "rows along dim 0";
  for (const Case& c :
       {Case{{2, 5, 3, 4}, {0, 2, 1, 3}, {2, 3, 4, 6}, false},
        Case{{9, 2, 8}, {1, 0, 2}, {8, 7}, true, false, "9x8x7 x2 matrices"},
        Case{{3, 1, 4, 2, 5}, {1, 3, 0, 2, 4}, {1, 2, 3, 5, 3}, false},
        Case{{2, 9, 8}, {1, 0, 2}, {8, 7}, true, true, "9x8x7 x2 matrices (" + rows_along_dim0},
        Case{{3, 40, 70}, {1, 0, 2}, {70, 50}, true, true, "40x70x50 x3 matrices"}}) {
    const Tensor q = random_tensor(c.q, 41), other = random_tensor(c.b, 42);
    const std::vector<Tensor> outputs =
        run_view_and_copy({q, c.perm, 0, other, c.constant_b, c.shape_reader, c.matmul_says});
    ASSERT_EQ(outputs.size(), 2u);
    const std::string name = fmt::format("{}", fmt::join(c.q, "x"));
    EXPECT_TRUE(identical(outputs[0], outputs[1])) << name;
    Tensor transposed = reference("Transpose", {ref_relu(q)}, attrs({{"perm", c.perm}}));
    EXPECT_TRUE(all_close(outputs[0], ref_matmul(transposed, other), {.atol = 1e-5, .rtol = 1e-5}))
        << name;
  }
}

// A Transpose that moves A's last axis (k) is copied: the kernel reads A's rows contiguous in k.
TEST(CpuMatMulTest, ATransposeMovingKIsCopied) {
  SpecBuilder s;
  const int32_t qi = s.input("q", {4, 6}), bi = s.input("b", {4, 3});
  const int32_t relu = s.value("relu", {4, 6});
  s.dispatch("relu", "Relu", {qi}, {relu});
  const int32_t t = s.value("qt", {6, 4});
  s.dispatch("transpose", "Transpose", {relu}, {t}, attrs({{"perm", ConcreteShape{1, 0}}}));
  const int32_t out = s.output("y", {6, 3});
  s.dispatch("matmul", "MatMul", {t, bi}, {out});
  auto exe = default_cpu_device()->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  const std::vector<std::string> lines = (*exe)->describe_dispatch(1);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("reorder"), std::string::npos) << lines[0];
  const Tensor q = random_tensor({4, 6}, 43), b = random_tensor({4, 3}, 44);
  auto ran = run_program(**exe, s.spec(), {q, b});
  ASSERT_TRUE(ran.ok()) << ran.status().to_string();
  Tensor qt = reference("Transpose", {ref_relu(q)}, attrs({{"perm", ConcreteShape{1, 0}}}));
  EXPECT_TRUE(all_close(ran->at(0), ref_matmul(qt, b), {.atol = 1e-5, .rtol = 1e-5}));
}

// A MatMul with kiln_scale gives the bits of the MatMul followed by a Mul by that scalar (and by
// a Div by its reciprocal, a power of two): kiln's gemm multiplies each sum by alpha.
TEST(CpuMatMulTest, KilnScaleGivesTheBitsOfAMulAfterTheProduct) {
  const ConcreteShape as{2, 3, 17, 9}, bs{2, 3, 9, 13}, ys{2, 3, 17, 13};
  const Tensor a = random_tensor(as, 51), b = random_tensor(bs, 52);
  for (float scale : {0.125f, -0.3f}) {
    Tensor s_value = Tensor::create(DType::kF32, {}).value();
    s_value.mutable_values<float>()[0] = scale;
    std::vector<std::vector<Tensor>> outputs;
    for (int form : {0, 1, 2}) {  // fused; MatMul then Mul; MatMul then Div by 1/scale
      if (form == 2 && scale != 0.125f) continue;
      SpecBuilder s;
      const int32_t ai = s.input("a", as), bi = s.input("b", bs);
      const int32_t y = s.output("y", ys);
      if (form == 0) {
        s.dispatch("mm", "MatMul", {ai, bi}, {y},
                   attrs({{kernels::kMatmulScaleAttribute, static_cast<double>(scale)}}));
      } else {
        const int32_t p = s.value("p", ys);
        s.dispatch("mm", "MatMul", {ai, bi}, {p});
        Tensor divisor = Tensor::create(DType::kF32, {}).value();
        divisor.mutable_values<float>()[0] = 8.0f;
        const int32_t c = s.constant("c", form == 1 ? s_value : divisor);
        s.dispatch("scale", form == 1 ? "Mul" : "Div", {p, c}, {y});
      }
      auto exe = default_cpu_device()->prepare(s.spec());
      ASSERT_TRUE(exe.ok()) << exe.status().to_string();
      auto ran = run_program(**exe, s.spec(), {a, b});
      ASSERT_TRUE(ran.ok()) << ran.status().to_string();
      outputs.push_back(std::move(ran).value());
    }
    for (size_t i = 1; i < outputs.size(); ++i) {
      EXPECT_TRUE(identical(outputs[0][0], outputs[i][0])) << scale << " form " << i;
    }
  }
}

// What passes::fuse_matmul relies on to fold a power-of-two scale of an operand: a MatMul with
// kiln_scale s gives the bits of the product of A (or of B) scaled by s first, as Div or Mul by a
// scalar, when the values stay in f32's normal range (PyTorch's MultiheadAttention divides q by
// sqrt(64) before q k^T).
TEST(CpuMatMulTest, APowerOfTwoKilnScaleGivesTheBitsOfScalingAnOperandFirst) {
  const ConcreteShape as{2, 3, 17, 64}, bs{2, 3, 64, 19}, ys{2, 3, 17, 19};
  const Tensor a = random_tensor(as, 53), b = random_tensor(bs, 54);
  for (const auto& [scale, op, slot] :
       {std::tuple{0.125f, "Div", 0}, std::tuple{0.25f, "Mul", 1}, std::tuple{-2.0f, "Mul", 0}}) {
    std::vector<Tensor> outputs;
    for (bool fused : {true, false}) {
      SpecBuilder s;
      const int32_t ai = s.input("a", as), bi = s.input("b", bs);
      const int32_t y = s.output("y", ys);
      if (fused) {
        s.dispatch("mm", "MatMul", {ai, bi}, {y},
                   attrs({{kernels::kMatmulScaleAttribute, static_cast<double>(scale)}}));
      } else {
        Tensor factor = Tensor::create(DType::kF32, {}).value();
        factor.mutable_values<float>()[0] = std::string(op) == "Div" ? 1.0f / scale : scale;
        const int32_t c = s.constant("c", factor);
        const int32_t operand = slot == 0 ? ai : bi;
        const int32_t scaled = s.value("scaled", slot == 0 ? as : bs);
        s.dispatch("scale", op, {operand, c}, {scaled});
        s.dispatch("mm", "MatMul", {slot == 0 ? scaled : ai, slot == 0 ? bi : scaled}, {y});
      }
      auto exe = default_cpu_device()->prepare(s.spec());
      ASSERT_TRUE(exe.ok()) << exe.status().to_string();
      auto ran = run_program(**exe, s.spec(), {a, b});
      ASSERT_TRUE(ran.ok()) << ran.status().to_string();
      outputs.push_back(std::move(ran)->at(0));
    }
    EXPECT_TRUE(identical(outputs[0], outputs[1])) << op << " " << scale << " of operand " << slot;
  }
}

// A MatMul with kiln_softmax (and kiln_scale) gives the bits of the MatMul followed by a Softmax
// dispatch along the last axis: batched scores of ragged sizes, a row with a NaN (NaN throughout)
// and a row with a +inf (NaN throughout, as the definition gives), on both ISAs' code.
TEST(CpuMatMulTest, KilnSoftmaxGivesTheBitsOfASoftmaxAfterTheProduct) {
  struct Case {
    ConcreteShape a, b;
  };
  for (const Case& c : {Case{{2, 3, 17, 64}, {2, 3, 64, 19}}, Case{{197, 64}, {64, 197}},
                        Case{{4, 9, 5}, {5, 40}}}) {
    Tensor a = random_tensor(c.a, 55, -4.0f, 4.0f);
    const Tensor b = random_tensor(c.b, 56);
    const int64_t k = c.a.back();
    a.mutable_values<float>()[static_cast<size_t>(2 * k + 1)] =
        std::numeric_limits<float>::quiet_NaN();
    a.mutable_values<float>()[static_cast<size_t>(3 * k)] = std::numeric_limits<float>::infinity();
    ConcreteShape ys = c.a.size() >= c.b.size() ? c.a : c.b;
    ys[ys.size() - 2] = c.a[c.a.size() - 2];
    ys.back() = c.b.back();
    std::vector<Tensor> outputs;
    for (bool fused : {true, false}) {
      SpecBuilder s;
      const int32_t ai = s.input("a", c.a), bi = s.input("b", c.b);
      const int32_t y = s.output("y", ys);
      if (fused) {
        s.dispatch("mm", "MatMul", {ai, bi}, {y},
                   attrs({{kernels::kMatmulScaleAttribute, 0.125},
                          {kernels::kMatmulSoftmaxAttribute, int64_t{1}}}));
      } else {
        const int32_t p = s.value("p", ys);
        s.dispatch("mm", "MatMul", {ai, bi}, {p}, attrs({{kernels::kMatmulScaleAttribute, 0.125}}));
        s.dispatch("softmax", "Softmax", {p}, {y}, attrs({{"axis", int64_t{-1}}}));
      }
      auto exe = default_cpu_device()->prepare(s.spec());
      ASSERT_TRUE(exe.ok()) << exe.status().to_string();
      if (fused) {
        const std::vector<std::string> lines = (*exe)->describe_dispatch(0);
        ASSERT_FALSE(lines.empty());
        EXPECT_NE(lines[0].find("+softmax"), std::string::npos) << lines[0];
      }
      auto ran = run_program(**exe, s.spec(), {a, b});
      ASSERT_TRUE(ran.ok()) << ran.status().to_string();
      outputs.push_back(std::move(ran)->at(0));
    }
    const std::string name = fmt::format("{}", fmt::join(c.a, "x"));
    EXPECT_TRUE(identical(outputs[0], outputs[1])) << name;
    const int64_t n = c.b.back();
    const std::span<const float> y = outputs[0].values<float>();
    for (int64_t row : {2, 3}) {
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_TRUE(std::isnan(y[static_cast<size_t>(row * n + j)])) << name << " row " << row;
      }
    }
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += y[static_cast<size_t>(n + j)];
    EXPECT_NEAR(sum, 1.0, 1e-5) << name;
  }
}

// A kiln_residual that broadcasts over the product's leading dims and rows (attention's mask,
// passes::fuse_matmul), with kiln_scale and with or without kiln_softmax, gives the bits of the
// MatMul, an Add of the mask with numpy broadcasting and a Softmax dispatch: a padding mask [B, 1,
// 1, S] of 0 and -10000 with a -inf and a NaN in it, a causal one [1, 1, S, S] or [S, S] (of a
// lower rank, right-aligned) and one per head [B, H, 1, S]; several matrices of A and B (one
// product per matrix).
TEST(CpuMatMulTest, ABroadcastKilnResidualGivesTheBitsOfAMaskAdd) {
  struct Case {
    ConcreteShape mask;
    bool softmax;
  };
  const ConcreteShape as{2, 3, 17, 64}, bs{2, 3, 64, 19}, ys{2, 3, 17, 19};
  for (const Case& c :
       {Case{{2, 1, 1, 19}, true}, Case{{2, 1, 1, 19}, false}, Case{{1, 1, 17, 19}, true},
        Case{{17, 19}, true}, Case{{2, 3, 1, 19}, true}}) {
    const Tensor a = random_tensor(as, 61, -2.0f, 2.0f), b = random_tensor(bs, 62);
    Tensor mask = random_tensor(c.mask, 63);
    std::span<float> mv = mask.mutable_values<float>();
    for (size_t i = 0; i < mv.size(); ++i) mv[i] = i % 5 == 4 ? -10000.0f : 0.0f;
    mv[1] = -std::numeric_limits<float>::infinity();
    mv[mv.size() - 1] = std::numeric_limits<float>::quiet_NaN();
    std::vector<Tensor> outputs;
    std::string described;
    for (bool fused : {true, false}) {
      SpecBuilder s;
      const int32_t ai = s.input("a", as), bi = s.input("b", bs), mi = s.input("mask", c.mask);
      const int32_t y = s.output("y", ys);
      Attributes scale = attrs({{kernels::kMatmulScaleAttribute, 0.125}});
      if (fused) {
        if (c.softmax) scale.set(kernels::kMatmulSoftmaxAttribute, int64_t{1});
        s.dispatch("mm", "MatMul", {ai, bi, -1, mi}, {y}, scale);
      } else {
        const int32_t p = s.value("p", ys), q = c.softmax ? s.value("q", ys) : y;
        s.dispatch("mm", "MatMul", {ai, bi}, {p}, scale);
        s.dispatch("mask", "Add", {p, mi}, {q});
        if (c.softmax) s.dispatch("softmax", "Softmax", {q}, {y}, attrs({{"axis", int64_t{-1}}}));
      }
      auto exe = default_cpu_device()->prepare(s.spec());
      ASSERT_TRUE(exe.ok()) << exe.status().to_string();
      if (fused) described = (*exe)->describe_dispatch(0).at(0);
      auto ran = run_program(**exe, s.spec(), {a, b, mask});
      ASSERT_TRUE(ran.ok()) << ran.status().to_string();
      outputs.push_back(std::move(ran)->at(0));
    }
    const std::string name =
        fmt::format("mask {}{}", fmt::join(c.mask, "x"), c.softmax ? " +softmax" : "");
    EXPECT_NE(described.find("kiln_gemm"), std::string::npos) << name << ": " << described;
    EXPECT_NE(described.find("+mask"), std::string::npos) << name << ": " << described;
    EXPECT_TRUE(identical(outputs[0], outputs[1])) << name;
    // The NaN in the mask's last element reaches the last row (softmax: all of it).
    const std::span<const float> y = outputs[0].values<float>();
    EXPECT_TRUE(std::isnan(y.back())) << name;
    if (c.softmax) {
      EXPECT_TRUE(std::isnan(y[y.size() - 19])) << name;
    }
  }
}

// A MatMul with kiln_values (attention's probabilities times V, passes::fuse_matmul) gives the bits
// of the MatMul with its scale, mask and softmax followed by a MatMul of the probabilities and V:
// several heads with a padding mask holding a NaN (NaN throughout its batch's rows), 197 rows (two
// chunks of rows), a V of rank 2 for every matrix, an output read by a head-merging Transpose
// (written for it, as the unfused second product is), and a V split into heads by a Transpose
// (read through its strides, so the Transpose copies nothing).
TEST(CpuMatMulTest, KilnValuesGiveTheBitsOfTheProbabilitiesTimesV) {
  struct Case {
    ConcreteShape q, k, mask, v;
    bool merge = false;
    bool split_v = false;
  };
  for (const Case& c :
       {Case{{2, 3, 17, 64}, {2, 3, 64, 19}, {2, 1, 1, 19}, {2, 3, 19, 40}},
        Case{{197, 64}, {64, 197}, {}, {197, 64}}, Case{{4, 9, 5}, {4, 5, 40}, {}, {40, 7}},
        Case{{2, 3, 17, 64}, {2, 3, 64, 19}, {2, 1, 1, 19}, {2, 3, 19, 40}, true},
        Case{{2, 3, 17, 64}, {2, 3, 64, 19}, {2, 1, 1, 19}, {2, 19, 3, 40}, false, true}}) {
    const std::string name = fmt::format("{}{}{}", fmt::join(c.q, "x"), c.merge ? " merged" : "",
                                         c.split_v ? " V split" : "");
    const Tensor q = random_tensor(c.q, 71, -2.0f, 2.0f), k = random_tensor(c.k, 72);
    const Tensor v = random_tensor(c.v, 73);
    Tensor mask = random_tensor(c.mask.empty() ? ConcreteShape{1} : c.mask, 74);
    mask.mutable_values<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    ConcreteShape ps = c.q;
    ps.back() = c.k.back();
    ConcreteShape ys = c.q;
    ys.back() = c.v.back();
    const ConcreteShape perm{0, 2, 1, 3};
    // The V the products read: the input, or its heads split out by a Transpose (perm).
    ConcreteShape vs = c.v;
    if (c.split_v) vs = {c.v[0], c.v[2], c.v[1], c.v[3]};
    ConcreteShape ts;
    if (c.merge) {
      for (int64_t i : perm) ts.push_back(ys[static_cast<size_t>(i)]);
    }
    std::vector<Tensor> outputs;
    std::string described, split;
    for (bool fused : {true, false}) {
      SpecBuilder s;
      const int32_t qi = s.input("q", c.q), ki = s.input("k", c.k);
      int32_t vi = s.input("v", c.v);
      if (c.split_v) {
        // A computed V (a graph input's bytes cannot be lent to a view).
        const int32_t computed = s.value("v_relu", c.v), heads = s.value("v_heads", vs);
        s.dispatch("relu", "Relu", {vi}, {computed});
        s.dispatch("split", "Transpose", {computed}, {heads}, attrs({{"perm", perm}}));
        vi = heads;
      }
      const int32_t mi = c.mask.empty() ? -1 : s.input("mask", c.mask);
      const int32_t out = c.merge ? s.output("out", ts) : s.output("out", ys);
      const int32_t y = c.merge ? s.value("y", ys) : out;
      const Attributes scores = attrs({{kernels::kMatmulScaleAttribute, 0.125},
                                       {kernels::kMatmulSoftmaxAttribute, int64_t{1}}});
      if (fused) {
        s.dispatch("mm", "MatMul", {qi, ki, -1, mi, vi}, {y}, scores);
      } else {
        const int32_t p = s.value("p", ps);
        s.dispatch("mm", "MatMul", {qi, ki, -1, mi}, {p}, scores);
        s.dispatch("mm2", "MatMul", {p, vi}, {y});
      }
      if (c.merge) s.dispatch("merge", "Transpose", {y}, {out}, attrs({{"perm", perm}}));
      auto exe = default_cpu_device()->prepare(s.spec());
      ASSERT_TRUE(exe.ok()) << exe.status().to_string();
      if (fused) {
        described = (*exe)->describe_dispatch(c.split_v ? 2 : 0).at(0);
        if (c.split_v) split = (*exe)->describe_dispatch(1).at(0);
      }
      std::vector<Tensor> in{q, k, v};
      if (!c.mask.empty()) in.push_back(mask);
      auto ran = run_program(**exe, s.spec(), in);
      ASSERT_TRUE(ran.ok()) << ran.status().to_string();
      outputs.push_back(std::move(ran)->at(0));
    }
    EXPECT_NE(described.find("then x V"), std::string::npos) << name << ": " << described;
    EXPECT_EQ(described.find("written for the transpose") != std::string::npos, c.merge)
        << name << ": " << described;
    EXPECT_TRUE(identical(outputs[0], outputs[1])) << name;
    if (c.split_v) {
      EXPECT_EQ(split.find("reorder"), std::string::npos) << name << ": " << split;
    }
    if (c.mask.empty()) continue;
    // The mask's NaN (batch 0's first key) makes batch 0's rows NaN, batch 1's finite.
    const std::span<const float> y = outputs[0].values<float>();
    EXPECT_TRUE(std::isnan(y[0])) << name;
    EXPECT_FALSE(std::isnan(y.back())) << name;
  }
}

// Attention's head merge: a batched product read only by a Transpose that keeps the last axis
// last is written in the layout that makes the Transpose's output plain, and the Transpose then
// copies nothing; the bits are those of the plain product and a copying Transpose (the same
// program with the product also read by a second dispatch). Rank 3 (ViT's [heads, tokens, d]) and
// rank 4 (BERT's [batch, heads, tokens, d]); the Transpose's output read by a Relu.
TEST(CpuMatMulTest, AProductBeforeAHeadMergeIsWrittenForTheTranspose) {
  struct Case {
    ConcreteShape a, b, perm;
  };
  for (const Case& c :
       {Case{{12, 7, 5}, {12, 5, 9}, {1, 0, 2}}, Case{{2, 3, 4, 5}, {2, 3, 5, 6}, {0, 2, 1, 3}}}) {
    const std::string name = fmt::format("{}", fmt::join(c.a, "x"));
    const Tensor a = random_tensor(c.a, 57), b = random_tensor(c.b, 58);
    ConcreteShape ys = c.a;
    ys.back() = c.b.back();
    ConcreteShape ts;
    for (int64_t p : c.perm) ts.push_back(ys[static_cast<size_t>(p)]);
    std::vector<Tensor> outputs;
    for (bool also_read : {false, true}) {
      SpecBuilder s;
      const int32_t ai = s.input("a", c.a), bi = s.input("b", c.b);
      const int32_t y = s.value("y", ys), t = s.value("t", ts);
      const int32_t out = s.output("out", ts);
      s.dispatch("mm", "MatMul", {ai, bi}, {y});
      s.dispatch("merge", "Transpose", {y}, {t}, attrs({{"perm", c.perm}}));
      s.dispatch("relu", "Relu", {t}, {out});
      if (also_read) s.dispatch("again", "Relu", {y}, {s.output("y_again", ys)});
      auto exe = default_cpu_device()->prepare(s.spec());
      ASSERT_TRUE(exe.ok()) << exe.status().to_string();
      const std::vector<std::string> product = (*exe)->describe_dispatch(0);
      const std::vector<std::string> merge = (*exe)->describe_dispatch(1);
      ASSERT_FALSE(product.empty() || merge.empty()) << name;
      EXPECT_EQ(product[0].find("written for the transpose") != std::string::npos, !also_read)
          << name << ": " << product[0];
      EXPECT_EQ(merge[0].find("reorder") == std::string::npos, !also_read)
          << name << ": " << merge[0];
      auto ran = run_program(**exe, s.spec(), {a, b});
      ASSERT_TRUE(ran.ok()) << ran.status().to_string();
      outputs.push_back(std::move(ran)->at(0));
    }
    EXPECT_TRUE(identical(outputs[0], outputs[1])) << name;
    Tensor merged = reference("Transpose", {ref_matmul(a, b)}, attrs({{"perm", c.perm}}));
    EXPECT_TRUE(all_close(outputs[0], ref_relu(merged), {.atol = 1e-5, .rtol = 1e-5})) << name;
  }
}

TEST(CpuMatMulTest, MismatchedInnerDimsAreRejected) {
  SpecBuilder s;
  const int32_t a = s.input("a", {2, 3}), b = s.input("b", {4, 5});
  const int32_t y = s.output("y", {2, 5});
  s.dispatch("mm", "MatMul", {a, b}, {y});
  Status st = default_cpu_device()->supports(s.spec().dispatches[0], s.spec().values);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      st.to_string().find("contracted dim (K = last dim of input 0 'A' [2,3]) must be 3, got 4"),
      std::string::npos)
      << st.to_string();
}

// ---- batch invariance (docs/architecture.md invariant 4) in any leading dim ----

// Sample `i` of `t` along `dim` (that dim becomes 1).
Tensor slice_dim(const Tensor& t, size_t dim, int64_t i) {
  ConcreteShape shape = t.shape();
  const int64_t outer = std::accumulate(shape.begin(), shape.begin() + static_cast<ptrdiff_t>(dim),
                                        int64_t{1}, std::multiplies<>());
  const int64_t inner = std::accumulate(shape.begin() + static_cast<ptrdiff_t>(dim) + 1,
                                        shape.end(), int64_t{1}, std::multiplies<>());
  const int64_t count = shape[dim];
  shape[dim] = 1;
  Tensor out = Tensor::create(DType::kF32, shape).value();
  const float* from = t.values<float>().data();
  float* to = out.mutable_values<float>().data();
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(to + o * inner, from + (o * count + i) * inner, inner * sizeof(float));
  }
  return out;
}

// Runs MatMul(a, b) with b constant (else an input) and returns the output.
Tensor run_matmul(const Tensor& a, const Tensor& b, bool constant_b, int threads = 0) {
  SpecBuilder s;
  std::vector<Tensor> inputs{a};
  const int32_t ai = s.input("a", a.shape());
  int32_t bi;
  if (constant_b) {
    bi = s.constant("b", b);
  } else {
    bi = s.input("b", b.shape());
    inputs.push_back(b);
  }
  ConcreteShape ys = a.shape();
  ys.back() = b.shape().back();
  for (size_t d = 0; d + 2 < b.shape().size(); ++d) {
    ys[d] = std::max(ys[d], b.shape()[d]);
  }
  const int32_t y = s.output("y", ys);
  s.dispatch("mm", "MatMul", {ai, bi}, {y});
  auto dev = create_cpu_device({threads});
  KILN_CHECK(dev.ok());
  auto exe = (*dev)->prepare(s.spec());
  if (!exe.ok()) return value_or_fail(exe.status());
  return value_or_fail(run_program(**exe, s.spec(), inputs));
}

struct RowInvarianceCase {
  int64_t t, n, k, cols;  // A [t, n, k] (the batch in dim 1) times a shared B [k, cols]
};

class CpuMatMulRowInvarianceTest : public ::testing::TestWithParam<RowInvarianceCase> {};

// PyTorch's sequence-first MultiheadAttention: in_proj is MatMul [T,N,K] x [K,3K], the batch in
// dim 1. Each sample's rows must get the bits they get at N = 1 (oneDNN's gemm gave them a gemm
// of N rows per step t: 1.4e-6 apart for the CRNN), and the same holds with the batch in dim 0.
TEST_P(CpuMatMulRowInvarianceTest, EachSampleMatchesItselfAlone) {
  const RowInvarianceCase& c = GetParam();
  const Tensor w = random_tensor({c.k, c.cols}, 3, -0.2f, 0.2f);
  const Tensor x = random_tensor({c.t, c.n, c.k}, 4);
  for (int threads : {0, 1}) {
    SCOPED_TRACE(fmt::format("threads {}", threads));
    const Tensor y = run_matmul(x, w, /*constant_b=*/true, threads);
    EXPECT_TRUE(all_close(y, ref_matmul(x, w), {.atol = 1e-5, .rtol = 1e-5}));
    for (int64_t i = 0; i < c.n; ++i) {
      const Tensor alone = run_matmul(slice_dim(x, 1, i), w, true, threads);
      EXPECT_TRUE(identical(alone, slice_dim(y, 1, i))) << "sample " << i << " (dim 1)";
    }
    // The same rows batch first, [N,T,K]: every sample, and B not a constant.
    Tensor xt = Tensor::create(DType::kF32, {c.n, c.t, c.k}).value();
    for (int64_t i = 0; i < c.n; ++i) {
      for (int64_t j = 0; j < c.t; ++j) {
        std::memcpy(xt.mutable_values<float>().data() + (i * c.t + j) * c.k,
                    x.values<float>().data() + (j * c.n + i) * c.k, c.k * sizeof(float));
      }
    }
    const Tensor yt = run_matmul(xt, w, /*constant_b=*/false, threads);
    for (int64_t i = 0; i < c.n; ++i) {
      const Tensor alone = run_matmul(slice_dim(xt, 0, i), w, false, threads);
      EXPECT_TRUE(identical(alone, slice_dim(yt, 0, i))) << "sample " << i << " (dim 0)";
      for (int64_t j = 0; j < c.t; ++j) {  // and the rows of both layouts alike
        EXPECT_EQ(
            std::memcmp(yt.values<float>().data() + (i * c.t + j) * c.cols,
                        y.values<float>().data() + (j * c.n + i) * c.cols, c.cols * sizeof(float)),
            0)
            << "sample " << i << " row " << j;
      }
    }
  }
}

// Row counts across 1..6-row blocks and row chunks, k across the 256-long k blocks, column
// counts across the 16-column panels (and oneDNN's gemv at one row, its 6-row blocks with
// 1-3-row ends, and its copy-based kernels past about 260 rows).
INSTANTIATE_TEST_SUITE_P(Sizes, CpuMatMulRowInvarianceTest,
                         ::testing::Values(RowInvarianceCase{25, 2, 64, 192},  // the CRNN's in_proj
                                           RowInvarianceCase{7, 5, 300, 37},
                                           RowInvarianceCase{1, 13, 33, 16},
                                           RowInvarianceCase{50, 3, 257, 70},
                                           RowInvarianceCase{3, 100, 20, 1},
                                           RowInvarianceCase{2, 150, 512, 24}),
                         [](const ::testing::TestParamInfo<RowInvarianceCase>& info) {
                           const RowInvarianceCase& c = info.param;
                           return fmt::format("T{}_N{}_K{}_M{}", c.t, c.n, c.k, c.cols);
                         });

// A batch in dim 1 of both operands ([T,N,S,K] x [T,N,K,M], e.g. attention scores of a
// sequence-first model), and a Gemm whose rows are the samples (transB, a bias).
TEST(CpuMatMulRowInvarianceTest, BatchedOperandsAndGemmRows) {
  const Tensor a = random_tensor({3, 4, 5, 40}, 5), b = random_tensor({3, 4, 40, 9}, 6);
  const Tensor y = run_matmul(a, b, false);
  EXPECT_TRUE(all_close(y, ref_matmul(a, b)));
  for (int64_t i = 0; i < 4; ++i) {
    const Tensor alone = run_matmul(slice_dim(a, 1, i), slice_dim(b, 1, i), false);
    EXPECT_TRUE(identical(alone, slice_dim(y, 1, i))) << "sample " << i;
  }
  const Tensor w = random_tensor({30, 70}, 7), bias = random_tensor({30}, 8);
  auto gemm = [&](const Tensor& x) {
    SpecBuilder s;
    const int32_t xi = s.input("x", x.shape());
    const int32_t out = s.output("y", {x.shape()[0], 30});
    s.dispatch("fc", "Gemm", {xi, s.constant("w", w), s.constant("bias", bias)}, {out},
               attrs({{"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}}));
    return value_or_fail(prepare_and_run(s, {x}));
  };
  const Tensor x = random_tensor({19, 70}, 9);
  const Tensor yg = gemm(x);
  EXPECT_TRUE(all_close(yg, ref_gemm(x, w, &bias, 0.5, 2.0, false, true)));
  for (int64_t i = 0; i < 19; ++i) {
    EXPECT_TRUE(identical(gemm(slice_batch(x, i)), slice_batch(yg, i))) << "row " << i;
  }
}

// MatMul's kiln_activation (GELU, passes::fuse_matmul) is GELU of the unfused MatMul + bias, within
// the kernel's bound (gemm_kernel.h), NaN in the bias staying NaN; a sample run alone gets the
// bits it gets in the batch.
TEST(CpuMatMulTest, KilnActivationIsGeluOfTheUnfusedResult) {
  const ConcreteShape as{3, 29, 96}, ws{96, 50}, ys{3, 29, 50};
  const Tensor a = random_tensor(as, 1, -3.0f, 3.0f), w = random_tensor(ws, 2, -0.5f, 0.5f);
  Tensor bias = random_tensor({50}, 3);
  bias.mutable_values<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  for (const char* form : {"gelu", "gelu_tanh"}) {
    auto fused = [&](const ConcreteShape& in_shape) {
      ConcreteShape out_shape = in_shape;
      out_shape.back() = 50;
      SpecBuilder s;
      const int32_t ai = s.input("a", in_shape), y = s.output("y", out_shape);
      Attributes attrs;
      attrs.set(kernels::kActivationAttribute, std::string(form));
      s.dispatch("mm", "MatMul", {ai, s.constant("w", w), s.constant("bias", bias)}, {y}, attrs);
      return s;
    };
    SpecBuilder unfused;
    {
      const int32_t ai = unfused.input("a", as), y = unfused.output("y", ys);
      const int32_t p = unfused.value("p", ys);
      unfused.dispatch("mm", "MatMul", {ai, unfused.constant("w", w)}, {p});
      unfused.dispatch("add", "Add", {p, unfused.constant("bias", bias)}, {y});
    }
    SpecBuilder batch = fused(as);
    auto got = prepare_and_run(batch, {a});
    auto plain = prepare_and_run(unfused, {a});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_TRUE(plain.ok()) << plain.status().to_string();
    const auto g = (*got)[0].values<float>(), x = (*plain)[0].values<float>();
    for (size_t i = 0; i < g.size(); ++i) {
      if (i % 50 == 1) {
        EXPECT_TRUE(std::isnan(g[i])) << form << " " << i;
        continue;
      }
      const double v = x[i];
      const double want =
          std::string(form) == "gelu"
              ? 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))
              : 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
      ASSERT_LE(std::abs(g[i] - want), 1.5e-6 * std::max(1.0, std::abs(want)))
          << form << " element " << i << " of x = " << v;
    }
    SpecBuilder one = fused({1, 29, 96});
    auto alone = prepare_and_run(one, {slice_dim(a, 0, 2)});
    ASSERT_TRUE(alone.ok()) << alone.status().to_string();
    EXPECT_TRUE(identical((*alone)[0], slice_dim((*got)[0], 0, 2))) << form;
  }
}

class CpuSoftmaxTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(CpuSoftmaxTest, MatchesReference) {
  const ConcreteShape xs{2, 3, 17};
  Tensor x = random_tensor(xs, 5, -4.0f, 4.0f);
  SpecBuilder s;
  const int32_t xi = s.input("x", xs);
  const int32_t y = s.output("y", xs);
  s.dispatch("softmax", "Softmax", {xi}, {y}, attrs({{"axis", GetParam()}}));
  auto out = prepare_and_run(s, {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], ref_softmax(x, GetParam()), {.atol = 1e-6, .rtol = 1e-5}));
}

INSTANTIATE_TEST_SUITE_P(Axes, CpuSoftmaxTest, ::testing::Values(0, 1, 2, -1, -3));

TEST(CpuSoftmaxTest, DefaultAxisAfterBlockedConv) {
  const ConcreteShape xs{2, 16, 3, 3};
  Tensor x = random_tensor(xs, 1);
  Tensor w = random_tensor({16, 16, 1, 1}, 2);
  SpecBuilder s;
  const int32_t xi = s.input("x", xs);
  const int32_t c = s.value("c", xs);
  s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {c});
  const int32_t y = s.output("y", xs);
  s.dispatch("softmax", "Softmax", {c}, {y}, attrs({{"axis", int64_t{1}}}));
  auto out = prepare_and_run(s, {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ConvRef pw{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  EXPECT_TRUE(all_close((*out)[0], ref_softmax(ref_conv(x, w, nullptr, nullptr, pw), 1),
                        {.atol = 1e-6, .rtol = 1e-5}));
}

// conv (blocked) -> Flatten -> Gemm and conv -> Reshape -> output: the flattened data must be
// the plain NCHW order, not the blocked one.
TEST(CpuReshapeTest, FlattenAndReshapeAfterBlockedConv) {
  const ConcreteShape xs{2, 13, 4, 4};
  Tensor x = random_tensor(xs, 1);
  Tensor w = random_tensor({24, 13, 3, 3}, 2);
  Tensor fc = random_tensor({10, 24 * 4 * 4}, 3);
  Tensor fc_b = random_tensor({10}, 4);
  ConvRef cr{{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, {kernels::FusedActivation::Kind::kRelu}};
  Tensor conv = ref_conv(x, w, nullptr, nullptr, cr);
  Tensor flat = conv.reshaped({2, 24 * 16});
  Tensor expected_fc = ref_gemm(flat, fc, &fc_b, 1.0, 1.0, false, true);

  SpecBuilder s;
  const int32_t xi = s.input("x", xs);
  const int32_t c = s.value("c", conv.shape());
  s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {c},
             attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                    {"kiln_activation", std::string("relu")}}));
  const int32_t f = s.value("f", {2, 24 * 16});
  s.dispatch("flatten", "Flatten", {c}, {f}, attrs({{"axis", int64_t{1}}}));
  const int32_t y = s.output("y", {2, 10});
  s.dispatch("fc", "Gemm", {f, s.constant("fc", fc), s.constant("fc_b", fc_b)}, {y},
             attrs({{"transB", int64_t{1}}}));
  const int32_t r = s.output("r", {2, 24, 16});
  Tensor shape = i64({3}, std::vector<int64_t>{2, 24, 16});
  s.dispatch("reshape", "Reshape", {c, s.constant("shape", shape)}, {r});
  auto out = prepare_and_run(s, {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], expected_fc));
  EXPECT_TRUE(all_close((*out)[1], conv.reshaped({2, 24, 16})));
}

TEST(CpuReshapeTest, Int64PassThrough) {
  auto t = Tensor::create(DType::kI64, {2, 3});
  ASSERT_TRUE(t.ok());
  for (int64_t i = 0; i < 6; ++i) t->mutable_values<int64_t>()[i] = 1000000000000LL * i - 7;
  SpecBuilder s;
  const int32_t x = s.input("x", {2, 3}, DType::kI64);
  const int32_t m = s.value("m", {6}, DType::kI64);
  const int32_t y = s.output("y", {3, 2}, DType::kI64);
  const Tensor shape1 = i64({1}, std::vector<int64_t>{6});
  const Tensor shape2 = i64({2}, std::vector<int64_t>{3, 2});
  s.dispatch("r1", "Reshape", {x, s.constant("s1", shape1)}, {m});
  const int32_t m2 = s.value("m2", {6}, DType::kI64);
  s.dispatch("id", "Identity", {m}, {m2});
  s.dispatch("r2", "Reshape", {m2, s.constant("s2", shape2)}, {y});
  auto out = prepare_and_run(s, {*t});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(std::memcmp((*out)[0].data(), t->data(), t->byte_size()), 0);
}

TEST(CpuIdentityTest, IdentityAndDropoutAfterConv) {
  const ConcreteShape xs{1, 8, 4, 4};
  Tensor x = random_tensor(xs, 1);
  Tensor w = random_tensor({8, 8, 1, 1}, 2);
  SpecBuilder s;
  const int32_t xi = s.input("x", xs);
  const int32_t c = s.value("c", xs);
  s.dispatch("conv", "Conv", {xi, s.constant("w", w)}, {c});
  const int32_t d = s.value("d", xs);
  const int32_t mask = s.output("mask", xs, DType::kBool);
  s.dispatch("dropout", "Dropout", {c}, {d, mask});
  const int32_t i1 = s.output("i1", xs);
  s.dispatch("identity", "Identity", {d}, {i1});
  const int32_t i2 = s.output("i2", xs);
  s.dispatch("identity_in", "Identity", {xi}, {i2});
  auto out = prepare_and_run(s, {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ConvRef pw{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  EXPECT_TRUE(all_close((*out)[1], ref_conv(x, w, nullptr, nullptr, pw)));
  EXPECT_TRUE(identical((*out)[2], x));
  for (std::byte b : std::span((*out)[0].data(), (*out)[0].byte_size())) {
    ASSERT_EQ(b, std::byte{1});
  }
}

// A constant training_mode = true: the copy path declines it and the definition's kernel runs
// it (default ratio 0.5: each element dropped or doubled, the mask saying which).
TEST(CpuIdentityTest, DropoutTrainingModeRunsThePortableKernel) {
  SpecBuilder s;
  const int32_t x = s.input("x", {64});
  auto mode = Tensor::create(DType::kBool, {});
  mode->mutable_values<uint8_t>()[0] = 1;
  const int32_t y = s.output("y", {64});
  const int32_t mask = s.output("mask", {64}, DType::kBool);
  s.dispatch("drop", "Dropout", {x, -1, s.constant("training_mode", *mode)}, {y, mask},
             attrs({{"seed", int64_t{5}}}));
  ASSERT_TRUE(default_cpu_device()->supports(s.spec().dispatches[0], s.spec().values).ok());
  const Tensor in = random_tensor({64}, 3);
  auto out = prepare_and_run(s, {in});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  int kept = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const bool keep = (*out)[1].values<uint8_t>()[i] != 0;
    kept += keep;
    EXPECT_EQ((*out)[0].values<float>()[i], keep ? 2 * in.values<float>()[i] : 0.0f) << i;
  }
  EXPECT_GT(kept, 8);
  EXPECT_LT(kept, 56);
}

}  // namespace
}  // namespace kiln::hal::cpu
