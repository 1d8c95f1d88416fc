#include "kiln/passes/passes.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>

#include "kiln/graph_eval/graph_eval.h"
#include "kiln/kernels/activation.h"
#include "kiln/kernels/op_attributes.h"
#include "tests/support/expect.h"
#include "tests/support/tensors.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::ValueId;

Tensor random_tensor(ConcreteShape shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  Tensor t = Tensor::create(DType::kF32, std::move(shape)).value();
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.mutable_values<float>()) v = dist(rng);
  return t;
}

ValueId add_intermediate(Graph& g, const std::string& name) {
  return g.add_value({name, DType::kF32, {}, {}, {}});
}

Node conv_node(const std::string& name, ValueId x, ValueId w, ValueId b, ValueId y) {
  Node node{name, "Conv", {x, w}, {y}, {}, {}};
  if (b != ir::kAbsent) node.inputs.push_back(b);
  node.attributes.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  return node;
}

// x[N,4,6,6] -> conv a (+bias) -> BN -> Relu -> conv b -> BN -> Add(residual from conv c(x)+BN) ->
// Relu
Graph residual_block(std::mt19937& rng) {
  Graph g;
  g.name = "block";
  ValueId x = g.add_input("x", DType::kF32, {DimExpr::symbol("N"), 4, 6, 6});
  auto bn_params = [&](const std::string& prefix, std::vector<ValueId>& out) {
    out.push_back(g.add_constant(prefix + "_scale", random_tensor({4}, rng, 0.5f, 1.5f)));
    out.push_back(g.add_constant(prefix + "_shift", random_tensor({4}, rng)));
    out.push_back(g.add_constant(prefix + "_mean", random_tensor({4}, rng)));
    out.push_back(g.add_constant(prefix + "_var", random_tensor({4}, rng, 0.5f, 1.5f)));
  };
  auto conv_bn = [&](const std::string& name, ValueId in, bool bias) {
    ValueId w = g.add_constant(name + "_w", random_tensor({4, 4, 3, 3}, rng));
    ValueId b = bias ? g.add_constant(name + "_b", random_tensor({4}, rng)) : ir::kAbsent;
    ValueId y = add_intermediate(g, name + "_y");
    g.add_node(conv_node(name, in, w, b, y));
    std::vector<ValueId> params;
    bn_params(name + "_bn", params);
    ValueId z = add_intermediate(g, name + "_bn_y");
    Node bn{name + "_bn", "BatchNormalization", {y}, {z}, {}, {}};
    bn.inputs.insert(bn.inputs.end(), params.begin(), params.end());
    g.add_node(std::move(bn));
    return z;
  };
  ValueId a = conv_bn("conv_a", x, true);
  ValueId a_relu = add_intermediate(g, "relu_a");
  g.add_node({"relu_a", "Relu", {a}, {a_relu}, {}, {}});
  ValueId ident = add_intermediate(g, "ident");
  g.add_node({"identity", "Identity", {a_relu}, {ident}, {}, {}});
  ValueId b = conv_bn("conv_b", ident, false);
  ValueId c = conv_bn("conv_c", x, false);
  ValueId sum = add_intermediate(g, "sum");
  g.add_node({"add", "Add", {b, c}, {sum}, {}, {}});
  ValueId out = add_intermediate(g, "out");
  g.add_node({"relu_out", "Relu", {sum}, {out}, {}, {}});
  g.add_output(out);
  EXPECT_TRUE(graph_eval::infer_graph(g).ok());
  return g;
}

void expect_close(const Tensor& a, const Tensor& b, double tol) {
  EXPECT_TRUE(::kiln::testing::all_close(a, b, {.atol = tol, .rtol = tol}));
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_type == op;
  return n;
}

TEST(Passes, FoldAndFusePreserveResults) {
  std::mt19937 rng(1);
  Graph g = residual_block(rng);
  Tensor x = random_tensor({2, 4, 6, 6}, rng);
  auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
  ASSERT_TRUE(before.ok()) << before.status().to_string();

  EXPECT_EQ(simplify(g).value(), 1);
  EXPECT_EQ(fold_batchnorm(g).value(), 3);
  EXPECT_EQ(count_op(g, "BatchNormalization"), 0);
  EXPECT_GT(fuse_conv(g).value(), 0);
  ASSERT_TRUE(ir::verify_graph(g).ok());
  // Three convs remain, nothing else: relu and the residual add live inside them.
  EXPECT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(count_op(g, "Conv"), 3);
  const Node& last = g.nodes().back();
  EXPECT_EQ(last.inputs.size(), 4u);
  EXPECT_EQ(last.attributes.get_string("kiln_activation", "").value(), "relu");
  EXPECT_NE(std::find(last.origins.begin(), last.origins.end(), "add"), last.origins.end());
  EXPECT_EQ(g.value(g.outputs()[0]).name, "out");

  auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  expect_close((*after)[0], (*before)[0], 1e-5);
}

TEST(Passes, FoldConstantsEvaluatesConstantSubgraphs) {
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {2});
  Tensor one = Tensor::create(DType::kF32, {2}).value();
  one.mutable_values<float>()[0] = 1.0f;
  one.mutable_values<float>()[1] = 2.0f;
  ValueId c = g.add_constant("c", one);
  ValueId cc = add_intermediate(g, "cc");
  g.add_node({"double", "Add", {c, c}, {cc}, {}, {}});
  ValueId y = add_intermediate(g, "y");
  g.add_node({"use", "Mul", {x, cc}, {y}, {}, {}});
  g.add_output(y);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  EXPECT_EQ(fold_constants(g).value(), 1);
  ASSERT_EQ(g.nodes().size(), 1u);
  const ir::Value& folded = g.value(g.nodes()[0].inputs[1]);
  ASSERT_TRUE(folded.constant.has_value());
  EXPECT_EQ(folded.constant->values<float>()[1], 4.0f);
}

// A Dropout is bypassed only at inference; in training mode it draws a mask, and without a seed
// a new one every run, so folding must not freeze one draw into a constant.
TEST(Passes, TrainingDropoutIsNeitherBypassedNorFolded) {
  Tensor on = Tensor::create(DType::kBool, {}).value();
  on.mutable_values<uint8_t>()[0] = 1;
  Tensor off = Tensor::create(DType::kBool, {}).value();
  off.mutable_values<uint8_t>()[0] = 0;
  for (bool training : {false, true}) {
    Graph g;
    ValueId x = g.add_input("x", DType::kF32, {4});
    ValueId mode = g.add_constant("mode", training ? on : off);
    ValueId d = add_intermediate(g, "d");
    g.add_node({"drop", "Dropout", {x, ir::kAbsent, mode}, {d}, {}, {}});
    ValueId y = add_intermediate(g, "y");
    g.add_node({"neg", "Neg", {d}, {y}, {}, {}});
    g.add_output(y);
    ASSERT_TRUE(graph_eval::infer_graph(g).ok());
    EXPECT_EQ(simplify(g).value(), training ? 0 : 1) << training;
    EXPECT_EQ(count_op(g, "Dropout"), training ? 1 : 0) << training;
  }
  Graph g;
  Tensor data = Tensor::create(DType::kF32, {4}).value();
  ValueId c = g.add_constant("c", data);
  ValueId mode = g.add_constant("mode", on);
  ValueId d = add_intermediate(g, "d");
  g.add_node({"drop", "Dropout", {c, ir::kAbsent, mode}, {d}, {}, {}});
  g.add_output(d);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  EXPECT_EQ(fold_constants(g).value(), 0);
  EXPECT_EQ(count_op(g, "Dropout"), 1);
}

TEST(Passes, ConvFeedingTwoConsumersIsNotFolded) {
  std::mt19937 rng(2);
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {1, 4, 6, 6});
  ValueId w = g.add_constant("w", random_tensor({4, 4, 3, 3}, rng));
  ValueId y = add_intermediate(g, "y");
  g.add_node(conv_node("conv", x, w, ir::kAbsent, y));
  std::vector<ValueId> bn_inputs{y};
  for (const char* p : {"s", "b", "m", "v"})
    bn_inputs.push_back(g.add_constant(p, random_tensor({4}, rng, 0.5f, 1.0f)));
  ValueId z = add_intermediate(g, "z");
  g.add_node({"bn", "BatchNormalization", bn_inputs, {z}, {}, {}});
  g.add_output(z);
  g.add_output(y);  // the conv output is also a model output: folding would change it
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  EXPECT_EQ(fold_batchnorm(g).value(), 0);
  EXPECT_EQ(fuse_conv(g).value(), 0);
  EXPECT_EQ(g.nodes().size(), 2u);
}

TEST(Passes, ReluBeforeAddIsNotFusedAsResidual) {
  // Conv -> Relu -> Add: the relu must stay before the add, so the add cannot be a conv post-op.
  std::mt19937 rng(3);
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {1, 4, 6, 6});
  ValueId w = g.add_constant("w", random_tensor({4, 4, 3, 3}, rng));
  ValueId y = add_intermediate(g, "y");
  g.add_node(conv_node("conv", x, w, ir::kAbsent, y));
  ValueId r = add_intermediate(g, "r");
  g.add_node({"relu", "Relu", {y}, {r}, {}, {}});
  ValueId s = add_intermediate(g, "s");
  g.add_node({"add", "Add", {r, x}, {s}, {}, {}});
  g.add_output(s);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  Tensor input = random_tensor({1, 4, 6, 6}, rng);
  auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&input, 1)).value();
  fuse_conv(g).value();
  EXPECT_EQ(count_op(g, "Add"), 1);
  auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&input, 1)).value();
  expect_close(after[0], before[0], 1e-6);
}

Tensor f32_scalar(float v) {
  Tensor t = Tensor::create(DType::kF32, {}).value();
  t.mutable_values<float>()[0] = v;
  return t;
}

// y -> Transpose (to NHWC) "to_nhwc" -> Clip(0, 6) "relu6" -> Transpose (back to NCHW) "to_nchw",
// as tf2onnx leaves a Relu6 after a conv: the NHWC value before the Clip, and the result (named
// `out_name`).
struct NhwcRelu6 {
  ValueId nhwc, out;
};
NhwcRelu6 add_nhwc_relu6(Graph& g, ValueId y, const std::string& out_name) {
  ValueId t = add_intermediate(g, "t");
  Node to_nhwc{"to_nhwc", "Transpose", {y}, {t}, {}, {}};
  to_nhwc.attributes.set("perm", std::vector<int64_t>{0, 2, 3, 1});
  g.add_node(std::move(to_nhwc));
  ValueId c = add_intermediate(g, "c");
  g.add_node({"relu6",
              "Clip",
              {t, g.add_constant("lo", f32_scalar(0.0f)), g.add_constant("hi", f32_scalar(6.0f))},
              {c},
              {},
              {}});
  ValueId out = add_intermediate(g, out_name);
  Node to_nchw{"to_nchw", "Transpose", {c}, {out}, {}, {}};
  to_nchw.attributes.set("perm", std::vector<int64_t>{0, 3, 1, 2});
  g.add_node(std::move(to_nchw));
  return {t, out};
}

// Conv -> Transpose (to NHWC) -> Clip -> Transpose (back), as tf2onnx leaves a Relu6 between the
// transposes around a conv: the Clip moves into the conv, the Transpose writes its output, the
// values are the same bits. A Transpose whose output another node reads keeps its Clip.
TEST(Passes, ActivationAfterATransposeOfAConvBecomesTheConvActivation) {
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "transposed value read twice" : "chain");
    std::mt19937 rng(4);
    Graph g;
    ValueId x = g.add_input("x", DType::kF32, {2, 4, 6, 6});
    ValueId w = g.add_constant("w", random_tensor({4, 4, 3, 3}, rng, -2.0f, 2.0f));
    ValueId y = add_intermediate(g, "y");
    g.add_node(conv_node("conv", x, w, ir::kAbsent, y));
    const NhwcRelu6 relu6 = add_nhwc_relu6(g, y, "out");
    g.add_output(relu6.out);
    if (shared) g.add_output(relu6.nhwc);
    ASSERT_TRUE(graph_eval::infer_graph(g).ok());
    Tensor input = random_tensor({2, 4, 6, 6}, rng, -3.0f, 3.0f);
    auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&input, 1)).value();
    EXPECT_EQ(fuse_conv(g).value(), shared ? 0 : 1);
    ASSERT_TRUE(ir::verify_graph(g).ok());
    EXPECT_EQ(count_op(g, "Clip"), shared ? 1 : 0);
    EXPECT_EQ(count_op(g, "Transpose"), 2);
    if (!shared) {
      const Node& conv = g.node(0);
      ASSERT_EQ(conv.op_type, "Conv");
      auto activation = kernels::read_fused_activation(conv.attributes);
      ASSERT_TRUE(activation.ok()) << activation.status().to_string();
      EXPECT_EQ(kernels::describe(*activation), "clip(0, 6)");
      EXPECT_NE(std::find(conv.origins.begin(), conv.origins.end(), "relu6"), conv.origins.end());
      EXPECT_EQ(g.value(g.outputs()[0]).name, "out");
    }
    auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&input, 1)).value();
    ASSERT_EQ(after[0].byte_size(), before[0].byte_size());
    EXPECT_EQ(std::memcmp(after[0].data(), before[0].data(), before[0].byte_size()), 0);
  }
}

// Two branches that each end in an activation, then meet in an Add (tf2onnx's Relu6 blocks, YOLO's
// bottlenecks): the later conv takes the Add as its residual after its activation
// (kiln_residual_after_activation), in either operand order, the same values. A conv without an
// activation takes such an Add before its own (fuse_residual), and a graph input is no residual.
TEST(Passes, AddAfterAnActivatedConvBecomesItsResidualAfterTheActivation) {
  enum class Other { kActivatedConv, kPlainConv, kGraphInput };
  for (Other other : {Other::kActivatedConv, Other::kPlainConv, Other::kGraphInput}) {
    for (bool swapped : {false, true}) {
      SCOPED_TRACE(fmt::format("other {} swapped {}", static_cast<int>(other), swapped));
      std::mt19937 rng(5);
      Graph g;
      ValueId x = g.add_input("x", DType::kF32, {2, 4, 6, 6});
      ValueId a = ir::kAbsent;
      if (other == Other::kGraphInput) {
        a = g.add_input("skip", DType::kF32, {2, 4, 6, 6});
      } else {
        ValueId ya = add_intermediate(g, "ya");
        g.add_node(conv_node("conv_a", x, g.add_constant("wa", random_tensor({4, 4, 3, 3}, rng)),
                             g.add_constant("ba", random_tensor({4}, rng)), ya));
        a = ya;
        if (other == Other::kActivatedConv) {
          a = add_intermediate(g, "a");
          g.add_node(
              {"relu6",
               "Clip",
               {ya, g.add_constant("lo", f32_scalar(0.0f)), g.add_constant("hi", f32_scalar(6.0f))},
               {a},
               {},
               {}});
        }
      }
      ValueId yb = add_intermediate(g, "yb");
      g.add_node(conv_node("conv_b", x, g.add_constant("wb", random_tensor({4, 4, 3, 3}, rng)),
                           g.add_constant("bb", random_tensor({4}, rng)), yb));
      ValueId b = add_intermediate(g, "b");
      Node leaky{"leaky", "LeakyRelu", {yb}, {b}, {}, {}};
      leaky.attributes.set("alpha", 0.1);
      g.add_node(std::move(leaky));
      ValueId sum = add_intermediate(g, "sum");
      g.add_node({"add",
                  "Add",
                  swapped ? std::vector<ValueId>{b, a} : std::vector<ValueId>{a, b},
                  {sum},
                  {},
                  {}});
      g.add_output(sum);
      ASSERT_TRUE(graph_eval::infer_graph(g).ok());
      std::vector<Tensor> inputs;
      inputs.reserve(2);
      inputs.push_back(random_tensor({2, 4, 6, 6}, rng, -2.0f, 2.0f));
      if (other == Other::kGraphInput) inputs.push_back(random_tensor({2, 4, 6, 6}, rng));
      auto before = graph_eval::evaluate_graph(g, inputs).value();
      ASSERT_TRUE(fuse_conv(g).ok());
      ASSERT_TRUE(ir::verify_graph(g).ok());
      EXPECT_EQ(count_op(g, "Add"), other == Other::kGraphInput ? 1 : 0);
      EXPECT_EQ(count_op(g, "Clip") + count_op(g, "LeakyRelu"), 0);
      for (const Node& node : g.nodes()) {
        if (node.op_type != "Conv") continue;
        const bool after =
            node.attributes.get_int(kernels::kResidualAfterActivationAttribute, 0).value() == 1;
        if (node.name == "conv_b") {
          EXPECT_EQ(node.inputs.size(), other == Other::kActivatedConv ? 4u : 3u);
          EXPECT_EQ(after, other == Other::kActivatedConv);
        } else {
          // conv_a: a residual before its (absent) activation where it has none.
          EXPECT_EQ(node.inputs.size(), other == Other::kPlainConv ? 4u : 3u);
          EXPECT_FALSE(after);
        }
      }
      // The reference evaluator computes a fused node in f64 and rounds once (as for every
      // fusion); the CPU backend's f32 kernels give the unfused bits (conv_op_test.cc).
      auto after = graph_eval::evaluate_graph(g, inputs).value();
      expect_close(after[0], before[0], 1e-6);
    }
  }
}

// Conv -> Transpose (NHWC) -> Clip -> Transpose (NCHW) -> Add(skip): once the Clip moves into the
// conv, the two Transposes undo each other and go, and the Add fuses after the activation.
TEST(Passes, TransposePairAroundAConvActivationGoesAndTheAddFuses) {
  std::mt19937 rng(6);
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {2, 4, 6, 6});
  ValueId skip = add_intermediate(g, "skip");
  g.add_node({"skip", "Abs", {x}, {skip}, {}, {}});
  ValueId y = add_intermediate(g, "y");
  g.add_node(conv_node("conv", x,
                       g.add_constant("w", random_tensor({4, 4, 3, 3}, rng, -2.0f, 2.0f)),
                       g.add_constant("b", random_tensor({4}, rng)), y));
  const NhwcRelu6 relu6 = add_nhwc_relu6(g, y, "back");
  ValueId out = add_intermediate(g, "out");
  g.add_node({"add", "Add", {skip, relu6.out}, {out}, {}, {}});
  g.add_output(out);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  Tensor input = random_tensor({2, 4, 6, 6}, rng, -3.0f, 3.0f);
  auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&input, 1)).value();
  EXPECT_EQ(fuse_conv(g).value(), 3);  // the Clip, the Transpose pair, the Add
  ASSERT_TRUE(ir::verify_graph(g).ok());
  EXPECT_EQ(count_op(g, "Transpose") + count_op(g, "Clip") + count_op(g, "Add"), 0);
  EXPECT_EQ(count_op(g, "Conv"), 1);
  for (const Node& node : g.nodes()) {
    if (node.op_type != "Conv") continue;
    for (const char* origin : {"conv", "to_nhwc", "relu6", "to_nchw", "add"}) {
      EXPECT_NE(std::find(node.origins.begin(), node.origins.end(), origin), node.origins.end())
          << origin;
    }
  }
  auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&input, 1)).value();
  expect_close(after[0], before[0], 1e-6);
}

// x -> conv -> Add(x) -> Clip(min, max) -> out, with the bounds given as constants or inputs.
struct ClipGraph {
  Graph g;
  Tensor input;
};
ClipGraph conv_add_clip_graph(std::optional<float> lo, std::optional<float> hi,
                              bool bounds_are_inputs = false) {
  std::mt19937 rng(5);
  ClipGraph c;
  Graph& g = c.g;
  ValueId x = g.add_input("x", DType::kF32, {1, 4, 6, 6});
  ValueId w = g.add_constant("w", random_tensor({4, 4, 3, 3}, rng));
  // The residual is computed by a node, as a skip connection is (fuse_residual leaves graph
  // inputs and constants to a broadcast Add).
  ValueId skip = add_intermediate(g, "skip");
  g.add_node({"skip", "Abs", {x}, {skip}, {}, {}});
  ValueId y = add_intermediate(g, "y");
  g.add_node(conv_node("conv", x, w, ir::kAbsent, y));
  ValueId s = add_intermediate(g, "s");
  g.add_node({"add", "Add", {y, skip}, {s}, {}, {}});
  auto bound = [&](std::optional<float> v, const char* name) -> ValueId {
    if (!v) return ir::kAbsent;
    if (bounds_are_inputs) return g.add_input(name, DType::kF32, {});
    return g.add_constant(name, f32_scalar(*v));
  };
  ValueId lo_id = bound(lo, "lo"), hi_id = bound(hi, "hi");
  ValueId out = add_intermediate(g, "out");
  std::vector<ValueId> clip_inputs{s, lo_id};
  if (hi_id != ir::kAbsent) clip_inputs.push_back(hi_id);
  g.add_node({"clip", "Clip", clip_inputs, {out}, {}, {}});
  g.add_output(out);
  EXPECT_TRUE(graph_eval::infer_graph(g).ok());
  c.input = random_tensor({1, 4, 6, 6}, rng, -3.0f, 3.0f);
  return c;
}

TEST(Passes, ClipWithConstantBoundsBecomesTheConvActivation) {
  struct Case {
    std::optional<float> lo, hi;
    const char* described;
  } cases[] = {{0.0f, 6.0f, "clip(0, 6)"},
               {-0.5f, std::nullopt, "clip(-0.5, inf)"},
               {std::nullopt, 0.25f, "clip(-inf, 0.25)"}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.described);
    ClipGraph c = conv_add_clip_graph(k.lo, k.hi);
    auto before = graph_eval::evaluate_graph(c.g, std::span<const Tensor>(&c.input, 1)).value();
    EXPECT_EQ(fuse_conv(c.g).value(), 2);  // the residual Add, then the Clip
    ASSERT_EQ(c.g.nodes().size(), 2u);
    const Node& conv = c.g.node(1);
    EXPECT_EQ(conv.op_type, "Conv");
    EXPECT_EQ(conv.inputs.size(), 4u);
    auto activation = kernels::read_fused_activation(conv.attributes);
    ASSERT_TRUE(activation.ok()) << activation.status().to_string();
    EXPECT_EQ(kernels::describe(*activation), k.described);
    EXPECT_EQ(conv.origins, (std::vector<std::string>{"conv", "add", "clip"}));
    auto after = graph_eval::evaluate_graph(c.g, std::span<const Tensor>(&c.input, 1)).value();
    expect_close(after[0], before[0], 1e-6);
    // The bounds really clip: some outputs sit on them.
    const auto values = after[0].values<float>();
    if (k.hi) {
      EXPECT_EQ(*std::max_element(values.begin(), values.end()), *k.hi);
    }
    if (k.lo) {
      EXPECT_EQ(*std::min_element(values.begin(), values.end()), *k.lo);
    }
  }
}

TEST(Passes, ClipIsNotFusedUnlessItsBoundsAreFixed) {
  ClipGraph runtime_bounds = conv_add_clip_graph(0.0f, 6.0f, /*bounds_are_inputs=*/true);
  fuse_conv(runtime_bounds.g).value();
  EXPECT_EQ(count_op(runtime_bounds.g, "Clip"), 1);
  ClipGraph crossed = conv_add_clip_graph(2.0f, 1.0f);  // min > max: ONNX gives max everywhere
  fuse_conv(crossed.g).value();
  EXPECT_EQ(count_op(crossed.g, "Clip"), 1);
}

// f16 and bf16 convs take a Clip with constant bounds of their type as their activation, as f32
// ones do.
TEST(Passes, HalfPrecisionClipBecomesTheConvActivation) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::mt19937 rng(5);
    auto typed = [&](ConcreteShape shape, std::vector<double> values) {
      return kiln::testing::make_tensor(dtype, std::move(shape), values);
    };
    Graph g;
    ValueId x = g.add_input("x", dtype, {1, 4, 6, 6});
    ValueId w = g.add_constant(
        "w", typed({4, 4, 3, 3}, kiln::testing::values_of(random_tensor({4, 4, 3, 3}, rng))));
    ValueId y = g.add_value({"y", dtype, {}, {}, {}});
    g.add_node(conv_node("conv", x, w, ir::kAbsent, y));
    ValueId out = g.add_value({"out", dtype, {}, {}, {}});
    g.add_node({"clip",
                "Clip",
                {y, g.add_constant("lo", typed({}, {0.0})), g.add_constant("hi", typed({}, {6.0}))},
                {out},
                {},
                {}});
    g.add_output(out);
    ASSERT_TRUE(graph_eval::infer_graph(g).ok());
    EXPECT_EQ(fuse_conv(g).value(), 1);
    ASSERT_EQ(g.nodes().size(), 1u);
    auto activation = kernels::read_fused_activation(g.node(0).attributes);
    ASSERT_TRUE(activation.ok()) << activation.status().to_string();
    EXPECT_EQ(kernels::describe(*activation), "clip(0, 6)");
  }
}

TEST(FusedActivation, AttributesAreCheckedAndRoundTrip) {
  using kernels::FusedActivation;
  for (FusedActivation a :
       {FusedActivation{}, FusedActivation{FusedActivation::Kind::kRelu},
        FusedActivation{FusedActivation::Kind::kClip, 0.0, 6.0},
        FusedActivation{FusedActivation::Kind::kClip, -1.5},
        FusedActivation{.kind = FusedActivation::Kind::kLeakyRelu, .alpha = 0.125},
        FusedActivation{FusedActivation::Kind::kSilu},
        FusedActivation{FusedActivation::Kind::kMish},
        FusedActivation{FusedActivation::Kind::kGelu},
        FusedActivation{FusedActivation::Kind::kGeluTanh}}) {
    Attributes attributes;
    kernels::set_fused_activation(attributes, a);
    auto back = kernels::read_fused_activation(attributes);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, a) << kernels::describe(a);
  }
  auto error_of = [](Attributes a) { return kernels::read_fused_activation(a).status().message(); };
  Attributes unknown;
  unknown.set("kiln_activation", std::string("swiglu"));
  EXPECT_NE(error_of(unknown).find("got \"swiglu\""), std::string::npos);
  Attributes crossed;
  crossed.set("kiln_activation", std::string("clip"));
  crossed.set("kiln_activation_min", 3.0);
  crossed.set("kiln_activation_max", 1.0);
  EXPECT_NE(error_of(crossed).find("exceeds the maximum"), std::string::npos);
  Attributes nan_bound;
  nan_bound.set("kiln_activation", std::string("clip"));
  nan_bound.set("kiln_activation_max", std::nan(""));
  EXPECT_NE(error_of(nan_bound).find("'kiln_activation_max' must be finite"), std::string::npos);
  Attributes stray_bound;
  stray_bound.set("kiln_activation", std::string("relu"));
  stray_bound.set("kiln_activation_min", 0.0);
  EXPECT_NE(error_of(stray_bound).find("not \"clip\""), std::string::npos);
  EXPECT_EQ(kernels::read_fused_relu(crossed).status().code(), StatusCode::kInvalidArgument);
  Attributes clip;
  kernels::set_fused_activation(clip, FusedActivation{FusedActivation::Kind::kClip, 0.0, 6.0});
  EXPECT_EQ(kernels::read_fused_relu(clip).status().code(), StatusCode::kUnimplemented);
  Attributes silu;
  kernels::set_fused_activation(silu, FusedActivation{FusedActivation::Kind::kSilu});
  EXPECT_NE(kernels::read_fused_relu(silu).status().message().find("\"silu\" is not supported"),
            std::string::npos);
  Attributes stray_alpha;
  stray_alpha.set("kiln_activation", std::string("relu"));
  stray_alpha.set("kiln_activation_alpha", 0.1);
  EXPECT_NE(error_of(stray_alpha).find("not \"leaky_relu\""), std::string::npos);
  Attributes inf_alpha;
  inf_alpha.set("kiln_activation", std::string("leaky_relu"));
  inf_alpha.set("kiln_activation_alpha", std::numeric_limits<double>::infinity());
  EXPECT_NE(error_of(inf_alpha).find("'kiln_activation_alpha' must be finite"), std::string::npos);
}

// LeakyRelu after a Conv becomes its activation, with its alpha (default 0.01).
TEST(Passes, LeakyReluBecomesTheConvActivation) {
  for (bool default_alpha : {false, true}) {
    SCOPED_TRACE(default_alpha ? "default alpha" : "alpha 0.2");
    std::mt19937 rng(6);
    Graph g;
    ValueId x = g.add_input("x", DType::kF32, {1, 4, 6, 6});
    ValueId w = g.add_constant("w", random_tensor({4, 4, 3, 3}, rng));
    ValueId y = g.add_value({"y", DType::kF32, {}, {}, {}});
    g.add_node(conv_node("conv", x, w, ir::kAbsent, y));
    ValueId out = g.add_value({"out", DType::kF32, {}, {}, {}});
    Attributes a;
    if (!default_alpha) a.set("alpha", 0.2);
    g.add_node({"leaky", "LeakyRelu", {y}, {out}, a, {}});
    g.add_output(out);
    ASSERT_TRUE(graph_eval::infer_graph(g).ok());
    EXPECT_EQ(fuse_conv(g).value(), 1);
    ASSERT_EQ(g.nodes().size(), 1u);
    auto activation = kernels::read_fused_activation(g.node(0).attributes);
    ASSERT_TRUE(activation.ok()) << activation.status().to_string();
    EXPECT_EQ(activation->kind, kernels::FusedActivation::Kind::kLeakyRelu);
    EXPECT_EQ(activation->alpha, default_alpha ? 0.01 : 0.2);
  }
}

// Conv -> Sigmoid -> Mul(y, sigmoid) (SiLU). `variant` 0: Mul(y, s); 1: Mul(s, y); 2: the
// sigmoid is also a graph output (not fusable); 3: Mul(x, s) with x not the conv's output (not
// SiLU); 4: the conv's output is read by a third node too (not fusable).
Graph conv_silu_graph(int variant, DType dtype, std::mt19937& rng) {
  Graph g;
  ValueId x = g.add_input("x", dtype, {2, 4, 6, 6});
  ValueId w = g.add_constant(
      "w", kiln::testing::make_tensor(dtype, {4, 4, 3, 3},
                                      kiln::testing::values_of(random_tensor({4, 4, 3, 3}, rng))));
  ValueId y = g.add_value({"y", dtype, {}, {}, {}});
  g.add_node(conv_node("conv", x, w, ir::kAbsent, y));
  ValueId s = g.add_value({"s", dtype, {}, {}, {}});
  g.add_node({"sigmoid", "Sigmoid", {y}, {s}, {}, {}});
  ValueId out = g.add_value({"out", dtype, {}, {}, {}});
  const ValueId factor = variant == 3 ? x : y;
  g.add_node({"mul",
              "Mul",
              variant == 1 ? std::vector{s, factor} : std::vector{factor, s},
              {out},
              {},
              {}});
  g.add_output(out);
  if (variant == 2) g.add_output(s);
  if (variant == 4) {
    ValueId other = g.add_value({"other", dtype, {}, {}, {}});
    g.add_node({"relu", "Relu", {y}, {other}, {}, {}});
    g.add_output(other);
  }
  EXPECT_TRUE(graph_eval::infer_graph(g).ok());
  return g;
}

// An input [2, 4, 6, 6] of `dtype` for the conv graphs above: random, with NaN, +-inf, 60 and
// -60 planted.
Tensor conv_input_with_specials(DType dtype, std::mt19937& rng) {
  std::vector<double> values = kiln::testing::values_of(random_tensor({2, 4, 6, 6}, rng));
  const double specials[] = {std::nan(""), std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), 60.0, -60.0};
  for (size_t i = 0; i < std::size(specials); ++i) values[i * 37] = specials[i];
  return kiln::testing::make_tensor(dtype, {2, 4, 6, 6}, values);
}

TEST(Passes, SiluBecomesTheConvActivation) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int variant : {0, 1}) {
      SCOPED_TRACE(fmt::format("{} variant {}", dtype_name(dtype), variant));
      std::mt19937 rng(7);
      Graph g = conv_silu_graph(variant, dtype, rng);
      // Inputs with NaN, +-inf and large magnitudes: the fused rule must give the unfused values
      // there too (-inf -> NaN, as -inf * sigmoid(-inf) = -inf * 0).
      Tensor input = conv_input_with_specials(dtype, rng);
      auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&input, 1)).value();
      EXPECT_EQ(fuse_conv(g).value(), 1);
      ASSERT_TRUE(ir::verify_graph(g).ok());
      ASSERT_EQ(g.nodes().size(), 1u);
      const Node& conv = g.nodes().front();
      EXPECT_EQ(conv.attributes.get_string("kiln_activation", "").value(), "silu");
      for (const char* origin : {"conv", "sigmoid", "mul"}) {
        EXPECT_NE(std::find(conv.origins.begin(), conv.origins.end(), origin), conv.origins.end())
            << origin;
      }
      auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&input, 1)).value();
      // The fused activation rounds to f16/bf16 once, the unfused graph after Sigmoid and Mul.
      const double tol = dtype == DType::kF32 ? 1e-6 : (dtype == DType::kF16 ? 2e-3 : 1.6e-2);
      EXPECT_TRUE(::kiln::testing::all_close(after[0], before[0], {.atol = tol, .rtol = tol}));
    }
  }
  for (int variant : {2, 3, 4}) {
    SCOPED_TRACE(fmt::format("variant {}", variant));
    std::mt19937 rng(7);
    Graph g = conv_silu_graph(variant, DType::kF32, rng);
    EXPECT_EQ(fuse_conv(g).value(), 0);
    EXPECT_EQ(count_op(g, "Sigmoid"), 1);
    EXPECT_EQ(count_op(g, "Mul"), 1);
  }
}

using GraphPass = StatusOr<int> (*)(Graph&);

// Runs `pass` on `g`, which holds one match: one node is left, an `op` named `name` that records
// `origins` ONNX nodes, and the graph's outputs on `inputs` stay within 1e-6 of the unfused
// graph's. Returns that node, or nullptr (after a failed expectation) where there is not one.
const Node* expect_fused_into_one(Graph& g, GraphPass pass, const std::string& op,
                                  const std::string& name, size_t origins,
                                  std::span<const Tensor> inputs) {
  auto before = graph_eval::evaluate_graph(g, inputs).value();
  EXPECT_EQ(pass(g).value(), 1);
  EXPECT_EQ(g.nodes().size(), 1u);
  if (g.nodes().size() != 1) return nullptr;
  const Node& fused = g.node(0);
  EXPECT_EQ(fused.op_type, op);
  EXPECT_EQ(fused.name, name);
  EXPECT_EQ(fused.origins.size(), origins);
  auto after = graph_eval::evaluate_graph(g, inputs).value();
  expect_close(after[0], before[0], 1e-6);
  return &fused;
}

// `pass` leaves `g` (a lookalike of its pattern) as it is: no rewrite, its nodes and the one
// `kept` node the pattern would have absorbed.
void expect_left_alone(Graph g, GraphPass pass, const std::string& kept) {
  const size_t nodes = g.nodes().size();
  EXPECT_EQ(pass(g).value(), 0);
  EXPECT_EQ(count_op(g, kept), 1);
  EXPECT_EQ(g.nodes().size(), nodes);
}

// x [2, 3, 8] -> GELU written out; `variant` 0: Div(x, sqrt 2) ... Mul(Mul(x, a), 0.5);
// 1: Mul(1/sqrt 2, x) ... Mul(Mul(0.5, x), a) with operands swapped; 2: Div by 2 (not GELU);
// 3: like 0, with Erf's output also a graph output (not fusable).
Graph gelu_graph(int variant) {
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {2, 3, 8});
  ValueId d = add_intermediate(g, "d");
  if (variant == 1) {
    g.add_node(
        {"scale", "Mul", {g.add_constant("inv_sqrt2", f32_scalar(0.70710677f)), x}, {d}, {}, {}});
  } else {
    const float divisor = variant == 2 ? 2.0f : 1.41421354f;
    g.add_node({"scale", "Div", {x, g.add_constant("sqrt2", f32_scalar(divisor))}, {d}, {}, {}});
  }
  ValueId e = add_intermediate(g, "e");
  g.add_node({"erf", "Erf", {d}, {e}, {}, {}});
  ValueId a = add_intermediate(g, "a");
  g.add_node({"plus_one", "Add", {g.add_constant("one", f32_scalar(1.0f)), e}, {a}, {}, {}});
  ValueId half = g.add_constant("half", f32_scalar(0.5f));
  ValueId y = add_intermediate(g, "y");
  if (variant == 1) {
    ValueId h = add_intermediate(g, "h");
    g.add_node({"halve", "Mul", {half, x}, {h}, {}, {}});
    g.add_node({"gelu", "Mul", {a, h}, {y}, {}, {}});
  } else {
    ValueId m = add_intermediate(g, "m");
    g.add_node({"times_x", "Mul", {x, a}, {m}, {}, {}});
    g.add_node({"gelu", "Mul", {m, half}, {y}, {}, {}});
  }
  g.add_output(y);
  if (variant == 3) g.add_output(e);
  EXPECT_TRUE(graph_eval::infer_graph(g).ok());
  return g;
}

TEST(Passes, GeluWrittenOutBecomesOneGeluNode) {
  std::mt19937 rng(6);
  Tensor input = random_tensor({2, 3, 8}, rng, -4.0f, 4.0f);
  for (int variant : {0, 1}) {
    SCOPED_TRACE(variant);
    Graph g = gelu_graph(variant);
    const Node* gelu = expect_fused_into_one(g, fuse_gelu, "Gelu", "gelu", 5, {&input, 1});
    if (gelu) {
      EXPECT_EQ(gelu->attributes.get_string("approximate", "").value(), "none");
    }
  }
}

TEST(Passes, GeluLookalikesStayAsTheyAre) {
  for (int variant : {2, 3}) {
    SCOPED_TRACE(variant);
    expect_left_alone(gelu_graph(variant), fuse_gelu, "Erf");
  }
}

// x [2, 3, 8] -> GELU in its tanh form; `variant` 0: GPT-2's x * x * x, constants first,
// Mul(Mul(x, a), 0.5) with the Add and Muls written (1, t), (0.5, .); 1: torch's Pow(x, 3),
// constants last, Mul(Mul(0.5, x), a); 2: coefficient 0.05 (not GELU); 3: Pow(x, 2) (not GELU);
// 4: like 0 with the Tanh's output also a graph output (not fusable).
Graph gelu_tanh_graph(int variant) {
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {2, 3, 8});
  auto c = [&](const std::string& name, float v) { return g.add_constant(name, f32_scalar(v)); };
  auto mul = [&](const std::string& name, ValueId a, ValueId b) {
    ValueId out = add_intermediate(g, name);
    g.add_node({name, "Mul", {a, b}, {out}, {}, {}});
    return out;
  };
  ValueId cube;
  if (variant == 1 || variant == 3) {
    cube = add_intermediate(g, "cube");
    g.add_node({"cube", "Pow", {x, c("three", variant == 3 ? 2.0f : 3.0f)}, {cube}, {}, {}});
  } else {
    cube = mul("cube", x, mul("square", x, x));
  }
  const float coefficient = variant == 2 ? 0.05f : 0.044715f;
  ValueId term = variant == 1 ? mul("term", cube, c("k", coefficient))
                              : mul("term", c("k", coefficient), cube);
  ValueId inner = add_intermediate(g, "inner");
  g.add_node({"inner",
              "Add",
              variant == 1 ? std::vector<ValueId>{term, x} : std::vector<ValueId>{x, term},
              {inner},
              {},
              {}});
  const ValueId sqrt_2_pi = c("sqrt_2_pi", 0.7978845834732056f);
  ValueId d = variant == 1 ? mul("d", inner, sqrt_2_pi) : mul("d", sqrt_2_pi, inner);
  ValueId t = add_intermediate(g, "t");
  g.add_node({"tanh", "Tanh", {d}, {t}, {}, {}});
  ValueId a = add_intermediate(g, "a");
  g.add_node({"plus_one", "Add", {c("one", 1.0f), t}, {a}, {}, {}});
  ValueId y;
  if (variant == 1) {
    y = mul("gelu", mul("halve", c("half", 0.5f), x), a);
  } else {
    y = mul("gelu", c("half", 0.5f), mul("times_x", x, a));
  }
  g.add_output(y);
  if (variant == 4) g.add_output(t);
  EXPECT_TRUE(graph_eval::infer_graph(g).ok());
  return g;
}

TEST(Passes, GeluTanhFormBecomesOneGeluNode) {
  std::mt19937 rng(16);
  Tensor input = random_tensor({2, 3, 8}, rng, -5.0f, 5.0f);
  input.mutable_values<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  for (int variant : {0, 1}) {
    SCOPED_TRACE(variant);
    Graph g = gelu_tanh_graph(variant);
    const Node* gelu =
        expect_fused_into_one(g, fuse_gelu, "Gelu", "gelu", variant == 1 ? 8 : 9, {&input, 1});
    if (gelu) {
      EXPECT_EQ(gelu->attributes.get_string("approximate", "").value(), "tanh");
    }
    auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&input, 1)).value();
    EXPECT_TRUE(std::isnan(after[0].values<float>()[3]));
  }
}

TEST(Passes, GeluTanhLookalikesStayAsTheyAre) {
  for (int variant : {2, 3, 4}) {
    SCOPED_TRACE(variant);
    expect_left_alone(gelu_tanh_graph(variant), fuse_gelu, "Tanh");
  }
}

// x [2, 3, 8] -> Softplus -> Tanh -> Mul with x (Mish written out); `variant` 0: Mul(x, t);
// 1: Mul(t, x); 2: Mul(t, z) with another input z (not Mish); 3: like 0 with the Tanh's output
// also a graph output (not fusable); 4: like 0 with the Softplus's output also read by a Relu.
Graph mish_graph(int variant) {
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {2, 3, 8});
  ValueId z = g.add_input("z", DType::kF32, {2, 3, 8});
  ValueId s = add_intermediate(g, "s"), t = add_intermediate(g, "t");
  g.add_node({"softplus", "Softplus", {x}, {s}, {}, {}});
  g.add_node({"tanh", "Tanh", {s}, {t}, {}, {}});
  if (variant == 4) {
    ValueId r = add_intermediate(g, "r");
    g.add_node({"relu", "Relu", {s}, {r}, {}, {}});
    g.add_output(r);
  }
  ValueId y = add_intermediate(g, "y");
  const ValueId other = variant == 2 ? z : x;
  g.add_node(
      {"mish", "Mul", variant == 1 ? std::vector{t, other} : std::vector{other, t}, {y}, {}, {}});
  g.add_output(y);
  if (variant == 3) g.add_output(t);
  EXPECT_TRUE(graph_eval::infer_graph(g).ok());
  return g;
}

TEST(Passes, MishWrittenOutBecomesOneMishNode) {
  std::mt19937 rng(9);
  const std::vector<Tensor> inputs{random_tensor({2, 3, 8}, rng, -6.0f, 6.0f),
                                   random_tensor({2, 3, 8}, rng, -6.0f, 6.0f)};
  for (int variant : {0, 1}) {
    SCOPED_TRACE(variant);
    Graph g = mish_graph(variant);
    const Node* mish = expect_fused_into_one(g, fuse_mish, "Mish", "mish", 3, inputs);
    if (mish) {
      EXPECT_EQ(mish->inputs, std::vector<ValueId>{g.inputs()[0]});
    }
  }
}

// Conv -> Softplus -> Tanh -> Mul(y, t), in f32, f16 and bf16: fuse_mish, then fuse_conv, leave
// one conv whose activation is "mish", with the unfused values, NaN and +-inf inputs included
// (-inf -> NaN, as -inf * tanh(softplus(-inf)) = -inf * 0).
TEST(Passes, WrittenOutMishAfterAConvBecomesItsActivation) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::mt19937 rng(8);
    Graph g;
    ValueId x = g.add_input("x", dtype, {2, 4, 6, 6});
    ValueId w = g.add_constant(
        "w", kiln::testing::make_tensor(
                 dtype, {4, 4, 3, 3}, kiln::testing::values_of(random_tensor({4, 4, 3, 3}, rng))));
    ValueId y = add_intermediate(g, "y"), s = add_intermediate(g, "s"),
            t = add_intermediate(g, "t"), out = add_intermediate(g, "out");
    g.add_node(conv_node("conv", x, w, ir::kAbsent, y));
    g.add_node({"softplus", "Softplus", {y}, {s}, {}, {}});
    g.add_node({"tanh", "Tanh", {s}, {t}, {}, {}});
    g.add_node({"mul", "Mul", {t, y}, {out}, {}, {}});
    g.add_output(out);
    ASSERT_TRUE(graph_eval::infer_graph(g).ok());
    Tensor input = conv_input_with_specials(dtype, rng);
    auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&input, 1)).value();
    EXPECT_EQ(fuse_mish(g).value(), 1);
    EXPECT_EQ(fuse_conv(g).value(), 1);
    ASSERT_TRUE(ir::verify_graph(g).ok());
    ASSERT_EQ(g.nodes().size(), 1u);
    const Node& conv = g.nodes().front();
    EXPECT_EQ(conv.attributes.get_string("kiln_activation", "").value(), "mish");
    for (const char* origin : {"conv", "softplus", "tanh", "mul"}) {
      EXPECT_NE(std::find(conv.origins.begin(), conv.origins.end(), origin), conv.origins.end())
          << origin;
    }
    auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&input, 1)).value();
    // The fused activation rounds to f16/bf16 once, the unfused graph after each of three nodes.
    const double tol = dtype == DType::kF32 ? 1e-6 : (dtype == DType::kF16 ? 4e-3 : 3e-2);
    EXPECT_TRUE(::kiln::testing::all_close(after[0], before[0], {.atol = tol, .rtol = tol}));
  }
}

TEST(Passes, MishLookalikesStayAsTheyAre) {
  for (int variant : {2, 3, 4}) {
    SCOPED_TRACE(variant);
    expect_left_alone(mish_graph(variant), fuse_mish, "Softplus");
  }
}

}  // namespace
}  // namespace kiln::passes

namespace kiln::passes {
namespace {

Graph softmax_graph(int64_t opset, int64_t axis, ConcreteShape shape) {
  Graph g;
  g.opset = opset;
  ValueId x = g.add_input("x", DType::kF32, shape_from_concrete(shape));
  ValueId y = g.add_value({"y", DType::kF32, {}, {}, {}});
  Node node{"sm", "Softmax", {x}, {y}, {}, {}};
  node.attributes.set("axis", axis);
  g.add_node(std::move(node));
  g.add_output(y);
  EXPECT_TRUE(graph_eval::infer_graph(g).ok());
  return g;
}

TEST(Canonicalize, LegacySoftmaxOnLastAxisBecomesOpset13Form) {
  std::mt19937 rng(4);
  Graph g = softmax_graph(11, 1, {2, 5});
  Tensor x = random_tensor({2, 5}, rng);
  auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1)).value();
  ASSERT_TRUE(canonicalize(g).ok());
  EXPECT_EQ(g.node(0).attributes.get_int("axis", 0).value(), -1);
  g.opset = 17;  // the rewritten node must mean the same under opset-13 semantics
  auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1)).value();
  expect_close(after[0], before[0], 1e-7);
}

TEST(Canonicalize, LegacySoftmaxOverSeveralDimsIsRefusedByName) {
  Graph g = softmax_graph(11, 1, {2, 3, 4});
  auto result = canonicalize(g);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(result.status().to_string().find("node 'sm' (Softmax)"), std::string::npos);
}

}  // namespace

TEST(Passes, FoldConstantsMakesValuesKnownFromShapesConstant) {
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {2, 3});
  ValueId s = add_intermediate(g, "s");
  g.add_node({"shape0", "Shape", {x}, {s}, {}, {}});
  ValueId y = add_intermediate(g, "y");
  g.add_node({"use", "Reshape", {x, s}, {y}, {}, {}});
  g.add_output(y);
  // What shape inference records for Shape(x) of a static x.
  g.value(s).dtype = DType::kI64;
  g.value(s).shape = {2};
  g.value(s).dim_values = {DimExpr(2), DimExpr(3)};
  EXPECT_EQ(fold_constants(g).value(), 1);
  ASSERT_EQ(count_op(g, "Shape"), 0);
  const ir::Value& folded = g.value(s);
  ASSERT_TRUE(folded.constant.has_value());
  EXPECT_EQ(folded.constant->dtype(), DType::kI64);
  EXPECT_EQ(folded.constant->values<int64_t>()[0], 2);
  EXPECT_EQ(folded.constant->values<int64_t>()[1], 3);
  EXPECT_TRUE(folded.dim_values.empty());
}

TEST(Passes, FoldConstantsKeepsSymbolicKnownValues) {
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {DimExpr::symbol("N"), 3});
  ValueId s = add_intermediate(g, "s");
  g.add_node({"shape0", "Shape", {x}, {s}, {}, {}});
  g.add_output(s);
  g.value(s).dtype = DType::kI64;
  g.value(s).shape = {2};
  g.value(s).dim_values = {DimExpr::symbol("N"), DimExpr(3)};
  EXPECT_EQ(fold_constants(g).value(), 0);
  EXPECT_EQ(count_op(g, "Shape"), 1);
}
}  // namespace kiln::passes

namespace kiln::passes {
namespace {

Tensor f32_tensor(ConcreteShape dims, std::vector<float> values) {
  Tensor t = Tensor::create(DType::kF32, std::move(dims)).value();
  std::copy(values.begin(), values.end(), t.mutable_values<float>().begin());
  return t;
}

int ops_of(const Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(),
                                        [&](const Node& n) { return n.op_type == op; }));
}

// NonZero of constants folds; its count, a symbol until then, becomes a number in every shape
// that used it (the bug: "constant data does not match its declared type").
TEST(Passes, FoldConstantsFoldsNonZeroAndCarriesItsCount) {
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {1});
  ValueId c = g.add_constant("c", f32_tensor({2, 3}, {1, -1, 2, 0, 3, -4}));
  ValueId zero = g.add_constant("zero", f32_tensor({}, {0}));
  ValueId gt = add_intermediate(g, "gt"), nz = add_intermediate(g, "nz"),
          t = add_intermediate(g, "t"), tf = add_intermediate(g, "tf"),
          y = add_intermediate(g, "y");
  g.add_node({"greater", "Greater", {c, zero}, {gt}, {}, {}});
  g.add_node({"nonzero", "NonZero", {gt}, {nz}, {}, {}});
  Node transpose{"transpose", "Transpose", {nz}, {t}, {}, {}};
  transpose.attributes.set("perm", std::vector<int64_t>{1, 0});
  g.add_node(std::move(transpose));
  Node cast{"cast", "Cast", {t}, {tf}, {}, {}};
  cast.attributes.set("to", int64_t{1});  // ONNX FLOAT
  g.add_node(std::move(cast));
  g.add_node({"add", "Add", {tf, x}, {y}, {}, {}});
  g.add_output(y);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  EXPECT_EQ(shape_to_string(g.value(y).shape), R"(["nonzero.size0",2])");
  auto folded = fold_constants(g);
  ASSERT_TRUE(folded.ok()) << folded.status().to_string();
  EXPECT_EQ(ops_of(g, "NonZero"), 0);
  // Ids change when the pass compacts the graph: look values up by name.
  EXPECT_EQ(shape_to_string(g.value(*g.find_value("y")).shape), "[3,2]");
  EXPECT_TRUE(ir::verify_graph(g).ok()) << ir::verify_graph(g).to_string();
}

// Values computed from input sizes: integer work folds (exact), floating-point work stays for the
// runtime's kernels, as in a module where the size is not known.
TEST(Passes, FoldConstantsLeavesFloatWorkOnSizesToTheRuntime) {
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {2, 3});
  Tensor zero_index = Tensor::create(DType::kI64, {}).value();
  zero_index.mutable_values<int64_t>()[0] = 0;
  ValueId idx = g.add_constant("idx", std::move(zero_index));
  ValueId w = g.add_constant("w", f32_tensor({3}, {1, 2, 3}));
  ValueId s = add_intermediate(g, "s"), n = add_intermediate(g, "n"),
          sum = add_intermediate(g, "sum"), filled = add_intermediate(g, "filled"),
          scaled = add_intermediate(g, "scaled"), y = add_intermediate(g, "y"),
          w2 = add_intermediate(g, "w2");
  g.add_node({"shape", "Shape", {x}, {s}, {}, {}});
  g.add_node({"gather", "Gather", {s, idx}, {n}, {}, {}});
  g.add_node({"sum", "Add", {n, n}, {sum}, {}, {}});
  Node fill{"fill", "ConstantOfShape", {s}, {filled}, {}, {}};
  fill.attributes.set("value", 0.25);
  g.add_node(std::move(fill));
  g.add_node({"scale", "Mul", {filled, w}, {scaled}, {}, {}});
  g.add_node({"add", "Add", {scaled, x}, {y}, {}, {}});
  g.add_node({"w2", "Mul", {w, w}, {w2}, {}, {}});  // initializers only: folds
  g.add_output(y);
  g.add_output(sum);
  g.add_output(w2);
  ASSERT_TRUE(graph_eval::infer_graph(g).ok());
  ASSERT_TRUE(fold_constants(g).ok());
  auto constant = [&](const char* name) { return g.is_constant(*g.find_value(name)); };
  EXPECT_TRUE(constant("s"));
  EXPECT_TRUE(constant("sum"));
  EXPECT_EQ(g.value(*g.find_value("sum")).constant->values<int64_t>()[0], 4);
  EXPECT_TRUE(constant("w2"));
  EXPECT_EQ(ops_of(g, "ConstantOfShape"), 1);
  EXPECT_EQ(ops_of(g, "Mul"), 1);
  EXPECT_FALSE(constant("scaled"));
}

}  // namespace
}  // namespace kiln::passes

namespace kiln::passes {
namespace {

// x [B, 3, 8] -> MatMul(W [8, 5]) -> Add(bias) -> y, the bias of shape `bias_shape` and the Add's
// operands in either order.
struct MatmulBiasGraph {
  Graph g;
  ValueId product, bias;
};

MatmulBiasGraph matmul_bias_graph(std::mt19937& rng, ConcreteShape bias_shape, bool bias_first,
                                  bool constant_w = true) {
  MatmulBiasGraph m;
  Graph& g = m.g;
  g.name = "matmul_bias";
  const DimExpr batch = DimExpr::symbol("B");
  ValueId x = g.add_input("x", DType::kF32, {batch, 3, 8});
  ValueId w = constant_w ? g.add_constant("w", random_tensor({8, 5}, rng))
                         : g.add_input("w", DType::kF32, {8, 5});
  m.bias = g.add_constant("bias", random_tensor(bias_shape, rng));
  m.product = g.add_value({"p", DType::kF32, {batch, 3, 5}, {}, {}});
  ValueId y = g.add_value({"y", DType::kF32, {batch, 3, 5}, {}, {}});
  g.add_node({"mm", "MatMul", {x, w}, {m.product}, {}, {}});
  g.add_node({"add",
              "Add",
              bias_first ? std::vector<ValueId>{m.bias, m.product}
                         : std::vector<ValueId>{m.product, m.bias},
              {y},
              {},
              {}});
  g.add_output(y);
  return m;
}

TEST(FuseMatmul, FoldsAConstantBiasIntoTheMatMul) {
  for (const ConcreteShape& bias_shape : {ConcreteShape{5}, ConcreteShape{1, 1, 5}}) {
    for (bool bias_first : {false, true}) {
      std::mt19937 rng(3);
      MatmulBiasGraph m = matmul_bias_graph(rng, bias_shape, bias_first);
      Tensor x = random_tensor({2, 3, 8}, rng);
      x.mutable_values<float>()[4] = std::numeric_limits<float>::quiet_NaN();  // row 0 of sample 0
      auto before = graph_eval::evaluate_graph(m.g, std::span<const Tensor>(&x, 1));
      ASSERT_TRUE(before.ok()) << before.status().to_string();
      EXPECT_EQ(fuse_matmul(m.g).value(), 1);
      ASSERT_TRUE(ir::verify_graph(m.g).ok());
      ASSERT_EQ(m.g.nodes().size(), 1u);
      const Node& mm = m.g.nodes()[0];
      EXPECT_EQ(mm.op_type, "MatMul");
      ASSERT_EQ(mm.inputs.size(), 3u);
      EXPECT_EQ(m.g.value(mm.inputs[2]).shape, Shape{DimExpr(5)});
      EXPECT_EQ(mm.outputs[0], m.g.outputs()[0]);
      EXPECT_NE(std::find(mm.origins.begin(), mm.origins.end(), "add"), mm.origins.end());
      auto after = graph_eval::evaluate_graph(m.g, std::span<const Tensor>(&x, 1));
      ASSERT_TRUE(after.ok()) << after.status().to_string();
      expect_close((*after)[0], (*before)[0], 1e-6);
      for (int j = 0; j < 5; ++j) EXPECT_TRUE(std::isnan((*after)[0].values<float>()[j])) << j;
    }
  }
}

// x [B, 3, 8] -> MatMul(W) -> Add(bias) -> Add(Relu(z)) with z [B, 3, 5]: both Adds fold, the
// residual as input 3; a residual that is a graph input (no producer) stays an Add.
TEST(FuseMatmul, FoldsAComputedResidualAfterTheBias) {
  for (bool computed : {true, false}) {
    std::mt19937 rng(8);
    Graph g;
    g.name = "matmul_residual";
    const DimExpr batch = DimExpr::symbol("B");
    const Shape ys{batch, 3, 5};
    ValueId x = g.add_input("x", DType::kF32, {batch, 3, 8});
    ValueId z = g.add_input("z", DType::kF32, ys);
    ValueId w = g.add_constant("w", random_tensor({8, 5}, rng));
    ValueId bias = g.add_constant("bias", random_tensor({5}, rng));
    ValueId r = z;
    if (computed) {
      r = g.add_value({"r", DType::kF32, ys, {}, {}});
      g.add_node({"relu", "Relu", {z}, {r}, {}, {}});
    }
    ValueId p = g.add_value({"p", DType::kF32, ys, {}, {}});
    ValueId q = g.add_value({"q", DType::kF32, ys, {}, {}});
    ValueId y = g.add_value({"y", DType::kF32, ys, {}, {}});
    g.add_node({"mm", "MatMul", {x, w}, {p}, {}, {}});
    g.add_node({"bias_add", "Add", {p, bias}, {q}, {}, {}});
    g.add_node({"residual_add", "Add", {r, q}, {y}, {}, {}});
    g.add_output(y);
    std::vector<Tensor> in{random_tensor({2, 3, 8}, rng), random_tensor({2, 3, 5}, rng)};
    in[1].mutable_values<float>()[7] = std::numeric_limits<float>::quiet_NaN();
    auto before = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(before.ok()) << before.status().to_string();
    EXPECT_EQ(fuse_matmul(g).value(), computed ? 2 : 1);
    ASSERT_TRUE(ir::verify_graph(g).ok());
    EXPECT_EQ(count_op(g, "Add"), computed ? 0 : 1);
    for (const Node& node : g.nodes()) {
      if (node.op_type != "MatMul") continue;
      ASSERT_EQ(node.inputs.size(), computed ? 4u : 3u);
      if (computed) {
        EXPECT_EQ(node.inputs[3], r);
      }
    }
    auto after = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(after.ok()) << after.status().to_string();
    expect_close((*after)[0], (*before)[0], 1e-6);
    EXPECT_TRUE(std::isnan((*after)[0].values<float>()[7]));
  }
}

// attention's scores: MatMul(q, k) of computed operands -> Div by 8 (or Mul by a scalar, either
// order) -> y: the scale folds as kiln_scale, with the unfused graph's values (the reference
// evaluates in f64; CpuMatMulTest checks the kernel's bits); Div by a value whose reciprocal is
// inexact, c / MatMul and a scalar that broadcasts the product up stay.
TEST(FuseMatmul, FoldsAScalarScaleWithTheUnfusedBits) {
  struct Case {
    const char* op;
    ConcreteShape scalar_shape;
    float value;
    bool product_first;
    bool folds;
  };
  for (const Case& c :
       {Case{"Div", {}, 8.0f, true, true}, Case{"Div", {1}, -0.25f, true, true},
        Case{"Mul", {1, 1, 1}, 0.3f, false, true}, Case{"Mul", {}, 0.125f, true, true},
        Case{"Div", {}, 3.0f, true, false}, Case{"Div", {}, 8.0f, false, false},
        Case{"Mul", {1, 1, 1, 1}, 0.5f, true, false}}) {
    std::mt19937 rng(21);
    Graph g;
    g.name = "scores";
    const DimExpr batch = DimExpr::symbol("B");
    const Shape ps{batch, 4, 6};
    ValueId q = g.add_input("q", DType::kF32, {batch, 4, 8});
    ValueId k = g.add_input("k", DType::kF32, {batch, 8, 6});
    Tensor scalar = Tensor::create(DType::kF32, c.scalar_shape).value();
    scalar.mutable_values<float>()[0] = c.value;
    ValueId sv = g.add_constant("s", std::move(scalar));
    ValueId p = g.add_value({"p", DType::kF32, ps, {}, {}});
    Shape ys = ps;
    if (c.scalar_shape.size() > 3) ys.insert(ys.begin(), DimExpr(1));
    ValueId y = g.add_value({"y", DType::kF32, ys, {}, {}});
    g.add_node({"mm", "MatMul", {q, k}, {p}, {}, {}});
    g.add_node({"scale",
                c.op,
                c.product_first ? std::vector<ValueId>{p, sv} : std::vector<ValueId>{sv, p},
                {y},
                {},
                {}});
    g.add_output(y);
    std::vector<Tensor> in{random_tensor({2, 4, 8}, rng), random_tensor({2, 8, 6}, rng)};
    in[0].mutable_values<float>()[3] = std::numeric_limits<float>::quiet_NaN();
    auto before = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(before.ok()) << before.status().to_string();
    const std::string name = fmt::format("{} {}", c.op, c.value);
    EXPECT_EQ(fuse_matmul(g).value(), c.folds ? 1 : 0) << name;
    ASSERT_TRUE(ir::verify_graph(g).ok());
    EXPECT_EQ(count_op(g, c.op), c.folds ? 0 : 1) << name;
    if (!c.folds) continue;
    const Node& mm = g.nodes()[0];
    const double want = std::string(c.op) == "Div" ? 1.0 / c.value : c.value;
    EXPECT_EQ(mm.attributes.get_float(kernels::kMatmulScaleAttribute, 0).value(),
              static_cast<double>(static_cast<float>(want)))
        << name;
    auto after = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(after.ok()) << after.status().to_string();
    expect_close((*after)[0], (*before)[0], 1e-6);
    for (int j = 0; j < 6; ++j) EXPECT_TRUE(std::isnan((*after)[0].values<float>()[j])) << j;
  }
}

// attention's scores with q scaled first (PyTorch's MultiheadAttention): MatMul(Div(q, 8), k) or
// MatMul(q, Mul(s, k)) -> y: a power-of-two factor folds as kiln_scale and the scaling node goes,
// with the unfused graph's values and NaN kept; a factor that is not a power of two (its rounding
// would move), a scaled operand read again elsewhere and a scalar that broadcasts the operand up
// stay.
TEST(FuseMatmul, FoldsAPowerOfTwoScaleOfAnOperand) {
  struct Case {
    const char* op;
    size_t slot;  // the MatMul operand the node scales
    ConcreteShape scalar_shape;
    float value;
    bool scaled_read_again;
    bool folds;
  };
  for (const Case& c :
       {Case{"Div", 0, {}, 8.0f, false, true}, Case{"Mul", 1, {1}, 0.25f, false, true},
        Case{"Mul", 0, {1, 1, 1}, -2.0f, false, true}, Case{"Div", 0, {}, 3.0f, false, false},
        Case{"Mul", 0, {}, 0.3f, false, false}, Case{"Div", 1, {}, 8.0f, true, false},
        Case{"Mul", 0, {1, 1, 1, 1}, 0.5f, false, false}}) {
    const std::string name = fmt::format("{} {} of operand {}", c.op, c.value, c.slot);
    std::mt19937 rng(23);
    Graph g;
    g.name = "prescaled_scores";
    const DimExpr batch = DimExpr::symbol("B");
    const Shape qs{batch, 4, 8}, ks{batch, 8, 6};
    ValueId q = g.add_input("q", DType::kF32, qs);
    ValueId k = g.add_input("k", DType::kF32, ks);
    Tensor scalar = Tensor::create(DType::kF32, c.scalar_shape).value();
    scalar.mutable_values<float>()[0] = c.value;
    ValueId sv = g.add_constant("s", std::move(scalar));
    Shape scaled_shape = c.slot == 0 ? qs : ks;
    if (c.scalar_shape.size() > 3) scaled_shape.insert(scaled_shape.begin(), DimExpr(1));
    ValueId scaled = g.add_value({"scaled", DType::kF32, scaled_shape, {}, {}});
    const ValueId operand = c.slot == 0 ? q : k;
    g.add_node({"scale",
                c.op,
                std::string(c.op) == "Mul" ? std::vector<ValueId>{sv, operand}
                                           : std::vector<ValueId>{operand, sv},
                {scaled},
                {},
                {}});
    Shape ys{batch, 4, 6};
    if (c.scalar_shape.size() > 3) ys.insert(ys.begin(), DimExpr(1));
    ValueId y = g.add_value({"y", DType::kF32, ys, {}, {}});
    g.add_node({"mm",
                "MatMul",
                c.slot == 0 ? std::vector<ValueId>{scaled, k} : std::vector<ValueId>{q, scaled},
                {y},
                {},
                {}});
    g.add_output(y);
    if (c.scaled_read_again) g.add_output(scaled);
    std::vector<Tensor> in{random_tensor({2, 4, 8}, rng), random_tensor({2, 8, 6}, rng)};
    in[0].mutable_values<float>()[3] = std::numeric_limits<float>::quiet_NaN();
    auto before = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(before.ok()) << before.status().to_string();
    EXPECT_EQ(fuse_matmul(g).value(), c.folds ? 1 : 0) << name;
    ASSERT_TRUE(ir::verify_graph(g).ok()) << name;
    EXPECT_EQ(count_op(g, c.op), c.folds ? 0 : 1) << name;
    if (!c.folds) continue;
    ASSERT_EQ(g.nodes().size(), 1u) << name;
    const Node& mm = g.nodes()[0];
    EXPECT_EQ(mm.inputs, (std::vector<ValueId>{q, k})) << name;
    const double want = std::string(c.op) == "Div" ? 1.0 / c.value : c.value;
    EXPECT_EQ(mm.attributes.get_float(kernels::kMatmulScaleAttribute, 0).value(), want) << name;
    EXPECT_NE(std::find(mm.origins.begin(), mm.origins.end(), "scale"), mm.origins.end()) << name;
    auto after = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(after.ok()) << after.status().to_string();
    expect_close((*after)[0], (*before)[0], 1e-6);
    for (int j = 0; j < 6; ++j) EXPECT_TRUE(std::isnan((*after)[0].values<float>()[j])) << j;
  }
}

// attention's probabilities: Softmax(Div(MatMul(q, k), 8)) along the last axis -> y: the scale
// and the softmax fold (kiln_softmax) with the unfused graph's values (the reference evaluates in
// f64 and rounds once instead of per node; CpuMatMulTest checks the kernel's bits), a NaN making
// its row NaN;
// a Softmax along another axis, one in a graph of opset 12, a product also read elsewhere and a B
// of rank 1 stay; nothing folds after the softmax (the bias Add after it stays).
TEST(FuseMatmul, FoldsASoftmaxAlongTheLastAxis) {
  struct Case {
    const char* name;
    int64_t axis = -1;
    int64_t opset = 17;
    bool product_read_again = false;
    bool add_after = false;
    bool folds = true;
  };
  for (const Case& c :
       {Case{"scores"}, Case{"axis 2", 2}, Case{"bias after", -1, 17, false, true},
        Case{"axis 1", 1, 17, false, false, false}, Case{"opset 12", -1, 12, false, false, false},
        Case{"read again", -1, 17, true, false, false}}) {
    std::mt19937 rng(24);
    Graph g;
    g.name = "probabilities";
    g.opset = c.opset;
    const DimExpr batch = DimExpr::symbol("B");
    const Shape ps{batch, 4, 6};
    ValueId q = g.add_input("q", DType::kF32, {batch, 4, 8});
    ValueId k = g.add_input("k", DType::kF32, {batch, 8, 6});
    ValueId p = g.add_value({"p", DType::kF32, ps, {}, {}});
    ValueId scaled = g.add_value({"scaled", DType::kF32, ps, {}, {}});
    ValueId probs = g.add_value({"probs", DType::kF32, ps, {}, {}});
    g.add_node({"mm", "MatMul", {q, k}, {p}, {}, {}});
    g.add_node({"scale", "Div", {p, g.add_constant("eight", f32_scalar(8.0f))}, {scaled}, {}, {}});
    Node softmax{"softmax", "Softmax", {scaled}, {probs}, {}, {}};
    softmax.attributes.set("axis", c.axis);
    g.add_node(std::move(softmax));
    if (c.add_after) {
      ValueId y = g.add_value({"y", DType::kF32, ps, {}, {}});
      g.add_node({"bias_add",
                  "Add",
                  {probs, g.add_constant("bias", random_tensor({6}, rng))},
                  {y},
                  {},
                  {}});
      g.add_output(y);
    } else {
      g.add_output(probs);
    }
    if (c.product_read_again) g.add_output(scaled);
    std::vector<Tensor> in{random_tensor({2, 4, 8}, rng, -3.0f, 3.0f),
                           random_tensor({2, 8, 6}, rng)};
    in[0].mutable_values<float>()[3] = std::numeric_limits<float>::quiet_NaN();
    auto before = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(before.ok()) << before.status().to_string();
    EXPECT_EQ(fuse_matmul(g).value(), c.folds ? 2 : 1) << c.name;
    ASSERT_TRUE(ir::verify_graph(g).ok()) << c.name;
    EXPECT_EQ(count_op(g, "Softmax"), c.folds ? 0 : 1) << c.name;
    EXPECT_EQ(count_op(g, "Add"), c.add_after ? 1 : 0) << c.name;
    auto after = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(after.ok()) << after.status().to_string();
    expect_close((*after)[0], (*before)[0], 1e-6);
    if (!c.folds) continue;
    const Node& mm = g.nodes()[0];
    EXPECT_EQ(mm.attributes.get_int(kernels::kMatmulSoftmaxAttribute, 0).value(), 1) << c.name;
    EXPECT_NE(std::find(mm.origins.begin(), mm.origins.end(), "softmax"), mm.origins.end());
    for (int j = 0; j < 6; ++j) EXPECT_TRUE(std::isnan((*after)[0].values<float>()[j])) << j;
  }
}

// Add(p, p) of a product with itself (p = MatMul(x, W)) is not a residual: the product cannot
// read its own output, so the Add stays, with the values of 2 p.
TEST(FuseMatmul, AProductAddedToItselfStaysAnAdd) {
  std::mt19937 rng(9);
  Graph g;
  g.name = "matmul_doubled";
  const Shape ys{3, 5};
  ValueId x = g.add_input("x", DType::kF32, {3, 8});
  ValueId w = g.add_constant("w", random_tensor({8, 5}, rng));
  ValueId p = g.add_value({"p", DType::kF32, ys, {}, {}});
  ValueId y = g.add_value({"y", DType::kF32, ys, {}, {}});
  g.add_node({"mm", "MatMul", {x, w}, {p}, {}, {}});
  g.add_node({"double", "Add", {p, p}, {y}, {}, {}});
  g.add_output(y);
  const Tensor in = random_tensor({3, 8}, rng);
  auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&in, 1));
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  EXPECT_EQ(fuse_matmul(g).value(), 0);
  ASSERT_TRUE(ir::verify_graph(g).ok());
  EXPECT_EQ(count_op(g, "Add"), 1);
  auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&in, 1));
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  expect_close((*after)[0], (*before)[0], 0.0);
}

// BERT-style attention: Softmax(Add(Div(MatMul(q, k), 8), mask)) with a computed mask [B, 1, 1,
// S] of symbolic B and S (1 - attention_mask, Unsqueezed: here a Relu of an input) against
// scores [B, 4, S, S]: the scale, the mask (as a kiln_residual that broadcasts) and the softmax
// fold, with the unfused graph's values and the NaN of a mask element spreading over its
// batch's rows. A causal mask [1, 1, S, S] or [S, S] (GPT-2's) folds too. A mask that is a graph
// input (no producer), one that broadcasts the last dim ([B, 1, S, 1]) and an f64 product stay
// Adds.
TEST(FuseMatmul, FoldsABroadcastMaskBetweenTheScaleAndTheSoftmax) {
  struct Case {
    const char* name;
    std::vector<int> mask_dims;  // -1: B, -2: S, else the number
    bool computed = true;
    DType dtype = DType::kF32;
    bool folds = true;
  };
  for (const Case& c : {Case{"padding mask", {-1, 1, 1, -2}}, Case{"causal mask", {1, 1, -2, -2}},
                        Case{"mask input", {-1, 1, 1, -2}, false, DType::kF32, false},
                        Case{"rank 2 causal mask", {-2, -2}},
                        Case{"last dim broadcast", {-1, 1, -2, 1}, true, DType::kF32, false},
                        Case{"f64", {-1, 1, 1, -2}, true, DType::kF64, false}}) {
    std::mt19937 rng(31);
    Graph g;
    g.name = "masked_scores";
    g.opset = 17;
    const DimExpr batch = DimExpr::symbol("B"), seq = DimExpr::symbol("S");
    const Shape ps{batch, 4, seq, seq};
    Shape ms;
    ConcreteShape ms_bound;
    for (int d : c.mask_dims) {
      ms.push_back(d == -1 ? batch : d == -2 ? seq : DimExpr(d));
      ms_bound.push_back(d == -1 ? 2 : d == -2 ? 6 : d);
    }
    ValueId q = g.add_input("q", c.dtype, {batch, 4, seq, 8});
    ValueId k = g.add_input("k", c.dtype, {batch, 4, 8, seq});
    ValueId mask_in = g.add_input("mask_in", c.dtype, ms);
    ValueId mask = mask_in;
    if (c.computed) {
      mask = g.add_value({"mask", c.dtype, ms, {}, {}});
      g.add_node({"mask_relu", "Relu", {mask_in}, {mask}, {}, {}});
    }
    ValueId p = g.add_value({"p", c.dtype, ps, {}, {}});
    ValueId scaled = g.add_value({"scaled", c.dtype, ps, {}, {}});
    ValueId masked = g.add_value({"masked", c.dtype, ps, {}, {}});
    ValueId probs = g.add_value({"probs", c.dtype, ps, {}, {}});
    g.add_node({"mm", "MatMul", {q, k}, {p}, {}, {}});
    Tensor eight = Tensor::create(c.dtype, {}).value();
    if (c.dtype == DType::kF32) {
      eight.mutable_values<float>()[0] = 8.0f;
    } else {
      eight.mutable_values<double>()[0] = 8.0;
    }
    g.add_node({"scale", "Div", {p, g.add_constant("eight", std::move(eight))}, {scaled}, {}, {}});
    g.add_node({"mask_add", "Add", {scaled, mask}, {masked}, {}, {}});
    Node softmax{"softmax", "Softmax", {masked}, {probs}, {}, {}};
    softmax.attributes.set("axis", int64_t{-1});
    g.add_node(std::move(softmax));
    g.add_output(probs);
    std::vector<Tensor> in{random_tensor({2, 4, 6, 8}, rng, -3.0f, 3.0f),
                           random_tensor({2, 4, 8, 6}, rng), random_tensor(ms_bound, rng)};
    if (c.dtype == DType::kF32) {
      in[2].mutable_values<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    } else {
      for (Tensor& t : in) {
        Tensor wide = Tensor::create(DType::kF64, t.shape()).value();
        for (int64_t i = 0; i < t.element_count(); ++i) {
          wide.mutable_values<double>()[i] = t.values<float>()[i];
        }
        t = std::move(wide);
      }
    }
    auto before = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(before.ok()) << c.name << ": " << before.status().to_string();
    // The scale folds in every f32 graph (an f32 scalar only); the mask and then the softmax
    // where the mask folds.
    EXPECT_EQ(fuse_matmul(g).value(), (c.dtype == DType::kF32 ? 1 : 0) + (c.folds ? 2 : 0))
        << c.name;
    ASSERT_TRUE(ir::verify_graph(g).ok()) << c.name;
    EXPECT_EQ(count_op(g, "Add"), c.folds ? 0 : 1) << c.name;
    EXPECT_EQ(count_op(g, "Softmax"), c.folds ? 0 : 1) << c.name;
    auto after = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(after.ok()) << c.name << ": " << after.status().to_string();
    expect_close((*after)[0], (*before)[0], 1e-6);
    if (!c.folds) continue;
    const Node* mm = nullptr;
    for (const Node& node : g.nodes()) {
      if (node.op_type == "MatMul") mm = &node;
    }
    ASSERT_NE(mm, nullptr) << c.name;
    ASSERT_EQ(mm->inputs.size(), 4u) << c.name;
    EXPECT_EQ(mm->inputs[2], ir::kAbsent) << c.name;
    EXPECT_EQ(mm->inputs[3], mask) << c.name;
    EXPECT_EQ(mm->attributes.get_int(kernels::kMatmulSoftmaxAttribute, 0).value(), 1) << c.name;
    EXPECT_NE(std::find(mm->origins.begin(), mm->origins.end(), "mask_add"), mm->origins.end());
    // The padding mask's NaN is batch 0's first key: every row of batch 0 is NaN; the causal
    // mask's is row 0 of every batch and head.
    const std::span<const float> y = (*after)[0].values<float>();
    EXPECT_TRUE(std::isnan(y[0])) << c.name;
    EXPECT_TRUE(std::isnan(y[6 * 6 + 3])) << c.name;  // head 1's row 0
  }
}

// Attention's probabilities times V: MatMul(Softmax(Add(Div(MatMul(q, k), 8), mask)), v) folds
// into one MatMul(q, k, absent, mask, v) (input 4 'kiln_values') after the scale, the mask and the
// softmax, with the unfused graph's values (within 1e-6: the reference evaluates the unfused
// softmax in f64 and rounds once) and the mask's NaN spreading over its batch's rows; a
// V of rank 2 (one for every head) folds too. The probabilities also read elsewhere, read as the
// second product's B, or a V whose leading dims add to the scores' (a batch of 1 against B) leave
// the second MatMul as it is. A Mul by a scalar after the second product stays a Mul (nothing
// folds after a softmax), and the second MatMul, absorbed, takes no rewrite of its own (it did:
// the Mul folded into it, and the graph had a cycle).
TEST(FuseMatmul, FoldsTheValuesProductIntoTheProbabilities) {
  struct Case {
    const char* name;
    std::vector<int> v_dims;  // -1: B, -2: S, else the number
    bool probs_read_again = false;
    bool probs_as_b = false;
    bool batch_one = false;
    bool folds = true;
    bool scaled_after = false;  // Mul(y, 0.5) after the second product: it stays a Mul
  };
  for (const Case& c : {Case{"values", {-1, 4, -2, 5}}, Case{"values of rank 2", {-2, 5}},
                        Case{"scaled after", {-1, 4, -2, 5}, false, false, false, true, true},
                        Case{"probabilities read again", {-1, 4, -2, 5}, true, false, false, false},
                        Case{"probabilities as B", {-1, 4, 5, -2}, false, true, false, false},
                        Case{"values add a dim", {-1, 4, -2, 5}, false, false, true, false}}) {
    std::mt19937 rng(37);
    Graph g;
    g.name = "attention";
    g.opset = 17;
    const DimExpr batch = DimExpr::symbol("B"), seq = DimExpr::symbol("S");
    const DimExpr qb = c.batch_one ? DimExpr(1) : batch;
    const Shape ps{qb, 4, seq, seq};
    ValueId q = g.add_input("q", DType::kF32, {qb, 4, seq, 8});
    ValueId k = g.add_input("k", DType::kF32, {qb, 4, 8, seq});
    ValueId mask_in = g.add_input("mask_in", DType::kF32, {qb, 1, 1, seq});
    Shape vs;
    ConcreteShape vs_bound;
    for (int d : c.v_dims) {
      vs.push_back(d == -1 ? batch : d == -2 ? seq : DimExpr(d));
      vs_bound.push_back(d == -1 ? 2 : d == -2 ? 6 : d);
    }
    ValueId v = g.add_input("v", DType::kF32, vs);
    ValueId mask = g.add_value({"mask", DType::kF32, {qb, 1, 1, seq}, {}, {}});
    g.add_node({"mask_relu", "Relu", {mask_in}, {mask}, {}, {}});
    ValueId p = g.add_value({"p", DType::kF32, ps, {}, {}});
    ValueId scaled = g.add_value({"scaled", DType::kF32, ps, {}, {}});
    ValueId masked = g.add_value({"masked", DType::kF32, ps, {}, {}});
    ValueId probs = g.add_value({"probs", DType::kF32, ps, {}, {}});
    g.add_node({"mm", "MatMul", {q, k}, {p}, {}, {}});
    g.add_node({"scale", "Div", {p, g.add_constant("eight", f32_scalar(8.0f))}, {scaled}, {}, {}});
    g.add_node({"mask_add", "Add", {scaled, mask}, {masked}, {}, {}});
    Node softmax{"softmax", "Softmax", {masked}, {probs}, {}, {}};
    softmax.attributes.set("axis", int64_t{-1});
    g.add_node(std::move(softmax));
    const DimExpr ob = c.batch_one ? batch : qb;
    const Shape ys = c.probs_as_b ? Shape{ob, 4, 5, seq} : Shape{ob, 4, seq, 5};
    ValueId y = g.add_value({"y", DType::kF32, ys, {}, {}});
    g.add_node(
        {"attend", "MatMul", {c.probs_as_b ? v : probs, c.probs_as_b ? probs : v}, {y}, {}, {}});
    if (c.scaled_after) {
      ValueId half = g.add_value({"half", DType::kF32, ys, {}, {}});
      g.add_node(
          {"halve", "Mul", {y, g.add_constant("one_half", f32_scalar(0.5f))}, {half}, {}, {}});
      g.add_output(half);
    } else {
      g.add_output(y);
    }
    if (c.probs_read_again) g.add_output(probs);
    const int64_t qn = c.batch_one ? 1 : 2;
    std::vector<Tensor> in{random_tensor({qn, 4, 6, 8}, rng, -3.0f, 3.0f),
                           random_tensor({qn, 4, 8, 6}, rng), random_tensor({qn, 1, 1, 6}, rng),
                           random_tensor(vs_bound, rng)};
    in[2].mutable_values<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    auto before = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(before.ok()) << c.name << ": " << before.status().to_string();
    EXPECT_EQ(fuse_matmul(g).value(), c.folds ? 4 : 3) << c.name;
    ASSERT_TRUE(ir::verify_graph(g).ok()) << c.name;
    EXPECT_EQ(count_op(g, "MatMul"), c.folds ? 1 : 2) << c.name;
    EXPECT_EQ(count_op(g, "Mul"), c.scaled_after ? 1 : 0) << c.name;
    auto after = graph_eval::evaluate_graph(g, in);
    ASSERT_TRUE(after.ok()) << c.name << ": " << after.status().to_string();
    for (size_t i = 0; i < before->size(); ++i) expect_close((*after)[i], (*before)[i], 1e-6);
    if (!c.folds) continue;
    const Node* mm = nullptr;
    for (const Node& node : g.nodes()) {
      if (node.op_type == "MatMul") mm = &node;
    }
    ASSERT_NE(mm, nullptr) << c.name;
    ASSERT_EQ(mm->inputs.size(), 5u) << c.name;
    EXPECT_EQ(mm->inputs[2], ir::kAbsent) << c.name;
    EXPECT_EQ(mm->inputs[3], mask) << c.name;
    EXPECT_EQ(mm->inputs[4], v) << c.name;
    EXPECT_EQ(g.value(mm->outputs[0]).name, "y") << c.name;
    EXPECT_NE(std::find(mm->origins.begin(), mm->origins.end(), "attend"), mm->origins.end());
    // The mask's NaN is batch 0's first key: every row of batch 0 is NaN, batch 1's are not.
    const std::span<const float> out = (*after)[0].values<float>();
    EXPECT_TRUE(std::isnan(out[0])) << c.name;
    EXPECT_TRUE(std::isnan(out[3 * 6 * 5 + 4])) << c.name;  // head 3's last row
    EXPECT_FALSE(std::isnan(out[4 * 6 * 5])) << c.name;     // batch 1
  }
}

// The scale folds first, then a constant bias after it: Y = s * (x W) + bias.
TEST(FuseMatmul, FoldsTheScaleBeforeTheBias) {
  std::mt19937 rng(22);
  MatmulBiasGraph m = matmul_bias_graph(rng, {5}, false);
  Graph& g = m.g;
  // Insert Mul(product, 0.5) between the MatMul and the Add.
  Tensor half = Tensor::create(DType::kF32, {}).value();
  half.mutable_values<float>()[0] = 0.5f;
  const ValueId hv = g.add_constant("half", std::move(half));
  const ValueId scaled = g.add_value({"scaled", DType::kF32, g.value(m.product).shape, {}, {}});
  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(g.nodes().size()); ++id) {
    Node& node = g.node(id);
    if (node.op_type != "Add") continue;
    for (ValueId& v : node.inputs) {
      if (v == m.product) v = scaled;
    }
  }
  g.add_node({"half_mul", "Mul", {m.product, hv}, {scaled}, {}, {}});
  ASSERT_TRUE(g.topological_sort().ok());
  Tensor x = random_tensor({2, 3, 8}, rng);
  auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  EXPECT_EQ(fuse_matmul(g).value(), 2);
  ASSERT_TRUE(ir::verify_graph(g).ok());
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].inputs.size(), 3u);
  EXPECT_TRUE(g.nodes()[0].attributes.has(kernels::kMatmulScaleAttribute));
  auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  expect_close((*after)[0], (*before)[0], 1e-6);
}

TEST(FuseMatmul, LeavesWhatItCannotFold) {
  {
    // A bias per element (a residual, not a bias) and a bias that broadcasts the product up.
    for (const ConcreteShape& s : {ConcreteShape{3, 5}, ConcreteShape{1, 1, 1, 5}}) {
      std::mt19937 rng(4);
      MatmulBiasGraph m = matmul_bias_graph(rng, s, false);
      EXPECT_EQ(fuse_matmul(m.g).value(), 0) << shape_to_string(m.g.value(m.bias).shape);
    }
  }
  {
    // W computed at run time.
    std::mt19937 rng(5);
    MatmulBiasGraph m = matmul_bias_graph(rng, {5}, false, false);
    EXPECT_EQ(fuse_matmul(m.g).value(), 0);
  }
  {
    // The product also a graph output.
    std::mt19937 rng(6);
    MatmulBiasGraph m = matmul_bias_graph(rng, {5}, false);
    m.g.add_output(m.product);
    EXPECT_EQ(fuse_matmul(m.g).value(), 0);
  }
}

// MatMul -> Add(bias) -> Gelu (either form) -> y: the bias and then the Gelu fold, the Gelu as
// kiln_activation; the result is the unfused graph's (the reference kernels compute GELU alike)
// and NaN stays NaN.
TEST(FuseMatmul, FoldsAGeluAfterTheBias) {
  for (const char* approximate : {"none", "tanh"}) {
    std::mt19937 rng(11);
    MatmulBiasGraph m = matmul_bias_graph(rng, {5}, false);
    Graph& g = m.g;
    const ValueId q = g.outputs()[0];
    const ValueId y = g.add_value({"gelu_out", DType::kF32, g.value(q).shape, {}, {}});
    Attributes a;
    a.set("approximate", std::string(approximate));
    g.add_node({"gelu", "Gelu", {q}, {y}, a, {}});
    g.mutable_outputs() = {y};
    Tensor x = random_tensor({2, 3, 8}, rng);
    x.mutable_values<float>()[4] = std::numeric_limits<float>::quiet_NaN();
    auto before = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
    ASSERT_TRUE(before.ok()) << before.status().to_string();
    EXPECT_EQ(fuse_matmul(g).value(), 2) << approximate;
    ASSERT_TRUE(ir::verify_graph(g).ok());
    ASSERT_EQ(g.nodes().size(), 1u);
    const Node& mm = g.nodes()[0];
    EXPECT_EQ(mm.inputs.size(), 3u);
    EXPECT_EQ(mm.attributes.get_string(kernels::kActivationAttribute, "").value(),
              std::string(approximate) == "tanh" ? "gelu_tanh" : "gelu");
    EXPECT_NE(std::find(mm.origins.begin(), mm.origins.end(), "gelu"), mm.origins.end());
    auto after = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
    ASSERT_TRUE(after.ok()) << after.status().to_string();
    expect_close((*after)[0], (*before)[0], 1e-6);
    EXPECT_TRUE(std::isnan((*after)[0].values<float>()[0]));
  }
}

// After a Gelu has folded, a later Add is not folded into the MatMul (it would run before the
// activation); a Gelu whose input has another reader stays a node.
TEST(FuseMatmul, FoldsNothingAfterTheActivationAndNoSharedGelu) {
  for (bool shared : {false, true}) {
    std::mt19937 rng(12);
    Graph g;
    g.name = "matmul_gelu_add";
    const DimExpr batch = DimExpr::symbol("B");
    const Shape ys{batch, 5};
    ValueId x = g.add_input("x", DType::kF32, {batch, 8});
    ValueId w = g.add_constant("w", random_tensor({8, 5}, rng));
    ValueId bias = g.add_constant("bias", random_tensor({5}, rng));
    ValueId p = g.add_value({"p", DType::kF32, ys, {}, {}});
    ValueId q = g.add_value({"q", DType::kF32, ys, {}, {}});
    ValueId y = g.add_value({"y", DType::kF32, ys, {}, {}});
    g.add_node({"mm", "MatMul", {x, w}, {p}, {}, {}});
    g.add_node({"gelu", "Gelu", {p}, {q}, {}, {}});
    g.add_node({"bias_add", "Add", {q, bias}, {y}, {}, {}});
    g.add_output(y);
    if (shared) g.add_output(p);
    EXPECT_EQ(fuse_matmul(g).value(), shared ? 0 : 1);
    ASSERT_TRUE(ir::verify_graph(g).ok());
    EXPECT_EQ(count_op(g, "Add"), 1);
    EXPECT_EQ(count_op(g, "Gelu"), shared ? 1 : 0);
  }
}

}  // namespace
}  // namespace kiln::passes
