// fuse_qdq: QDQ Conv and MatMul patterns become QLinearConv / QLinearMatMul, and the fused graph
// gives the unfused graph's outputs within one quantization step (the unfused graph computes in
// f32, the fused one in int32 with one requantization). Patterns that miss a condition stay.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include <fmt/format.h>

#include "kiln/graph_eval/graph_eval.h"
#include "kiln/passes/passes.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::ValueId;

template <typename T>
Tensor tensor_of(DType dtype, ConcreteShape shape, const std::vector<T>& values) {
  Tensor t = Tensor::create(dtype, std::move(shape)).value();
  std::copy(values.begin(), values.end(), t.mutable_values<T>().begin());
  return t;
}

template <typename T>
Tensor random_ints(DType dtype, ConcreteShape shape, int lo, int hi, std::mt19937& rng) {
  Tensor t = Tensor::create(dtype, std::move(shape)).value();
  std::uniform_int_distribution<int> d(lo, hi);
  for (T& v : t.mutable_values<T>()) v = static_cast<T>(d(rng));
  return t;
}

ValueId intermediate(Graph& g, const std::string& name) {
  return g.add_value({name, DType::kF32, {}, {}, {}});
}

ValueId dequantize(Graph& g, const std::string& name, ValueId q, ValueId scale, ValueId zero,
                   int64_t axis = 1) {
  ValueId y = intermediate(g, name + "_y");
  Node n{name, "DequantizeLinear", {q, scale}, {y}, {}, {}};
  if (zero != ir::kAbsent) n.inputs.push_back(zero);
  n.attributes.set("axis", axis);
  g.add_node(n);
  return y;
}

enum class Bias { kQuantized, kNone, kFloat, kWrongScale };

// x_q [N,4,H,W] u8 -> DQ -> Conv(W = DQ(w_q i8 [4,4,3,3], per channel), bias, pads 1) -> Q (u8)
// -> returns the Q output.
ValueId add_qdq_conv(Graph& g, ValueId xq, const std::string& p, std::mt19937& rng, Bias bias) {
  const float xs = 0.02f;
  std::vector<float> ws;
  for (int c = 0; c < 4; ++c) ws.push_back(0.004f + 0.001f * static_cast<float>(c));
  ValueId x =
      dequantize(g, p + "dq_x", xq,
                 g.add_constant(p + "xs", tensor_of(DType::kF32, {}, std::vector<float>{xs})),
                 g.add_constant(p + "xz", tensor_of(DType::kU8, {}, std::vector<uint8_t>{128})));
  ValueId w = dequantize(
      g, p + "dq_w",
      g.add_constant(p + "w_q", random_ints<int8_t>(DType::kI8, {4, 4, 3, 3}, -127, 127, rng)),
      g.add_constant(p + "ws", tensor_of(DType::kF32, {4}, ws)),
      g.add_constant(p + "wz", tensor_of(DType::kI8, {4}, std::vector<int8_t>(4, 0))), 0);
  Node conv{p + "conv", "Conv", {x, w}, {}, {}, {}};
  conv.attributes.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  if (bias == Bias::kQuantized || bias == Bias::kWrongScale) {
    std::vector<float> bs;
    for (float s : ws) bs.push_back(xs * s * (bias == Bias::kWrongScale ? 1.5f : 1.0f));
    conv.inputs.push_back(dequantize(
        g, p + "dq_b",
        g.add_constant(p + "b_q", random_ints<int32_t>(DType::kI32, {4}, -3000, 3000, rng)),
        g.add_constant(p + "bs", tensor_of(DType::kF32, {4}, bs)), ir::kAbsent, 0));
  } else if (bias == Bias::kFloat) {
    conv.inputs.push_back(
        g.add_constant(p + "b", tensor_of(DType::kF32, {4}, std::vector<float>(4, 0.1f))));
  }
  ValueId c = intermediate(g, p + "conv_y");
  conv.outputs = {c};
  g.add_node(conv);
  ValueId y = g.add_value({p + "y", DType::kU8, {}, {}, {}});
  g.add_node(
      Node{p + "q_y",
           "QuantizeLinear",
           {c, g.add_constant(p + "ys", tensor_of(DType::kF32, {}, std::vector<float>{0.05f})),
            g.add_constant(p + "yz", tensor_of(DType::kU8, {}, std::vector<uint8_t>{120}))},
           {y},
           {},
           {}});
  return y;
}

// `convs` such convs in a row on x_q [N,4,6,6].
Graph qdq_conv(std::mt19937& rng, Bias bias, int convs = 1) {
  Graph g;
  g.name = "qdq_conv";
  ValueId y = g.add_input("x_q", DType::kU8, {DimExpr::symbol("N"), 4, 6, 6});
  for (int i = 0; i < convs; ++i) y = add_qdq_conv(g, y, fmt::format("c{}_", i), rng, bias);
  g.add_output(y);
  return g;
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_type == op ? 1 : 0;
  return n;
}

void expect_within_one_step(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  auto x = a.values<uint8_t>();
  auto y = b.values<uint8_t>();
  int differing = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::abs(int(x[i]) - int(y[i])), 1) << "element " << i;
    differing += x[i] != y[i] ? 1 : 0;
  }
  EXPECT_LT(differing, static_cast<int>(x.size()) / 10);
}

TEST(FuseQdq, ConvWithQuantizedBiasBecomesQLinearConv) {
  std::mt19937 rng(11);
  Graph g = qdq_conv(rng, Bias::kQuantized);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  Tensor x = random_ints<uint8_t>(DType::kU8, {2, 4, 6, 6}, 0, 255, rng);
  auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  auto fused = fuse_qdq(g);
  ASSERT_TRUE(fused.ok()) << fused.status().to_string();
  EXPECT_EQ(*fused, 1);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  EXPECT_EQ(count_op(g, "QLinearConv"), 1);
  EXPECT_EQ(count_op(g, "Conv") + count_op(g, "QuantizeLinear") + count_op(g, "DequantizeLinear"),
            0);
  EXPECT_EQ(g.nodes()[0].origins.size(), 3u);  // conv, q_y, dq_w
  auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  expect_within_one_step((*before)[0], (*after)[0]);
}

TEST(FuseQdq, ChainedConvsAllFuseInOrder) {
  std::mt19937 rng(17);
  Graph g = qdq_conv(rng, Bias::kQuantized, 3);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  Tensor x = random_ints<uint8_t>(DType::kU8, {1, 4, 6, 6}, 0, 255, rng);
  auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  auto fused = fuse_qdq(g);
  ASSERT_TRUE(fused.ok()) << fused.status().to_string();
  EXPECT_EQ(*fused, 3);
  ASSERT_TRUE(ir::verify_graph(g).ok()) << ir::verify_graph(g).to_string();
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  EXPECT_EQ(count_op(g, "QLinearConv"), 3);
  auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  ASSERT_EQ((*after)[0].shape(), (ConcreteShape{1, 4, 6, 6}));
}

TEST(FuseQdq, ConvWithoutBiasFusesOthersStay) {
  for (Bias bias : {Bias::kNone, Bias::kFloat, Bias::kWrongScale}) {
    std::mt19937 rng(5);
    Graph g = qdq_conv(rng, bias);
    ASSERT_TRUE(graph_eval::infer_graph(g).ok());
    auto fused = fuse_qdq(g);
    ASSERT_TRUE(fused.ok());
    EXPECT_EQ(*fused, bias == Bias::kNone ? 1 : 0) << static_cast<int>(bias);
    EXPECT_TRUE(graph_eval::infer_graph(g).ok());
  }
}

TEST(FuseQdq, MatMulBecomesQLinearMatMul) {
  std::mt19937 rng(3);
  Graph g;
  g.name = "qdq_matmul";
  ValueId aq = g.add_input("a_q", DType::kI8, {DimExpr::symbol("B"), 5, 16});
  ValueId a = dequantize(
      g, "dq_a", aq, g.add_constant("as", tensor_of(DType::kF32, {}, std::vector<float>{0.03f})),
      g.add_constant("az", tensor_of(DType::kI8, {}, std::vector<int8_t>{-2})));
  ValueId b = dequantize(
      g, "dq_b", g.add_constant("b_q", random_ints<int8_t>(DType::kI8, {16, 6}, -127, 127, rng)),
      g.add_constant("bs", tensor_of(DType::kF32, {6},
                                     std::vector<float>{0.01f, 0.02f, 0.01f, 0.03f, 0.01f, 0.02f})),
      ir::kAbsent, -1);
  ValueId m = intermediate(g, "mm_y");
  g.add_node(Node{"mm", "MatMul", {a, b}, {m}, {}, {}});
  ValueId y = g.add_value({"y", DType::kU8, {}, {}, {}});
  g.add_node(Node{"q_y",
                  "QuantizeLinear",
                  {m, g.add_constant("ys", tensor_of(DType::kF32, {}, std::vector<float>{0.02f})),
                   g.add_constant("yz", tensor_of(DType::kU8, {}, std::vector<uint8_t>{128}))},
                  {y},
                  {},
                  {}});
  g.add_output(y);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  Tensor x = random_ints<int8_t>(DType::kI8, {3, 5, 16}, -128, 127, rng);
  auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  auto fused = fuse_qdq(g);
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(*fused, 1);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok()) << "after fusion";
  EXPECT_EQ(count_op(g, "QLinearMatMul"), 1);
  auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  expect_within_one_step((*before)[0], (*after)[0]);
}

// A residual block as ONNX Runtime's quantizer writes it: the conv fuses; the Add between its
// inputs' DequantizeLinears and its output's QuantizeLinear (which ORT runs as QLinearAdd) stays
// in f32 with every node of its QDQ pattern, and the block's output stays within one step of
// the unfused graph's (only the conv's int32 requantization differs).
TEST(FuseQdq, ResidualAddKeepsItsQdqNodesAndOnlyTheConvFuses) {
  std::mt19937 rng(23);
  Graph g;
  g.name = "qdq_residual";
  ValueId xq = g.add_input("x_q", DType::kU8, {DimExpr::symbol("N"), 4, 6, 6});
  ValueId cq = add_qdq_conv(g, xq, "c_", rng, Bias::kQuantized);
  auto scalar = [&](const std::string& name, float v) {
    return g.add_constant(name, tensor_of(DType::kF32, {}, std::vector<float>{v}));
  };
  auto zero = [&](const std::string& name, uint8_t v) {
    return g.add_constant(name, tensor_of(DType::kU8, {}, std::vector<uint8_t>{v}));
  };
  ValueId c = dequantize(g, "dq_c", cq, scalar("cs", 0.05f), zero("cz", 120));
  ValueId x = dequantize(g, "dq_x", xq, scalar("xs2", 0.02f), zero("xz2", 128));
  ValueId sum = intermediate(g, "sum");
  g.add_node(Node{"add", "Add", {c, x}, {sum}, {}, {}});
  ValueId y = g.add_value({"y", DType::kU8, {}, {}, {}});
  g.add_node(
      Node{"q_sum", "QuantizeLinear", {sum, scalar("ys2", 0.06f), zero("yz2", 0)}, {y}, {}, {}});
  g.add_output(y);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  Tensor in = random_ints<uint8_t>(DType::kU8, {2, 4, 6, 6}, 0, 255, rng);
  auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&in, 1));
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  auto fused = fuse_qdq(g);
  ASSERT_TRUE(fused.ok()) << fused.status().to_string();
  EXPECT_EQ(*fused, 1);
  ASSERT_TRUE(ir::verify_graph(g).ok()) << ir::verify_graph(g).to_string();
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  EXPECT_EQ(count_op(g, "QLinearConv"), 1);
  EXPECT_EQ(count_op(g, "Add"), 1);
  EXPECT_EQ(count_op(g, "DequantizeLinear"), 2);
  EXPECT_EQ(count_op(g, "QuantizeLinear"), 1);
  auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&in, 1));
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  expect_within_one_step((*before)[0], (*after)[0]);
}

}  // namespace
}  // namespace kiln::passes
