// fuse_layer_norm: the written-out forms PyTorch exports become one LayerNormalization node that
// computes the same values (float64 reference evaluation of the graph before and after); look-
// alikes stay as they are.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kiln/graph_eval/graph_eval.h"
#include "kiln/passes/passes.h"
#include "tests/support/expect.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::ValueId;

Tensor random_tensor(ConcreteShape shape, std::mt19937& rng, float lo, float hi) {
  Tensor t = Tensor::create(DType::kF32, std::move(shape)).value();
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.mutable_values<float>()) v = dist(rng);
  return t;
}

Tensor f32_scalar(float v) {
  Tensor t = Tensor::create(DType::kF32, {}).value();
  t.mutable_values<float>()[0] = v;
  return t;
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_type == op;
  return n;
}

// How the written-out layer norm is spelled.
struct Form {
  bool square_by_mul = false;  // Mul(d, d) instead of Pow(d, 2)
  bool axes_as_input = false;  // ReduceMean's axes as input 1 (opset 18)
  bool gamma = true;           // Mul(n, gamma)
  bool beta = true;            // Add(g, beta)
  bool params_first = false;   // Add(eps, v), Mul(gamma, n), Add(beta, g)
  bool params_rank3 = false;   // gamma and beta of shape [1, 1, 8]
  std::vector<int64_t> axes{-1};
  bool extra_reader = false;  // the Sqrt's output is also a graph output (not fusable)
  bool eps_input = false;     // eps is a graph input (not fusable)
};

// x [N, 3, 8] (N symbolic) -> layer norm over `form.axes` -> y.
Graph layer_norm_graph(const Form& form, std::mt19937& rng) {
  Graph g;
  g.opset = form.axes_as_input ? 18 : 14;
  ValueId x = g.add_input("x", DType::kF32, {DimExpr::symbol("N"), 3, 8});
  auto value = [&](const std::string& name) {
    return g.add_value({name, DType::kF32, {}, {}, {}});
  };
  auto mean = [&](const std::string& name, ValueId in, ValueId out) {
    Node n{name, "ReduceMean", {in}, {out}, {}, {}};
    if (form.axes_as_input) {
      Tensor axes = Tensor::create(DType::kI64, {static_cast<int64_t>(form.axes.size())}).value();
      for (size_t i = 0; i < form.axes.size(); ++i)
        axes.mutable_values<int64_t>()[i] = form.axes[i];
      n.inputs.push_back(g.add_constant(name + "_axes", axes));
    } else {
      n.attributes.set("axes", form.axes);
    }
    g.add_node(std::move(n));
  };
  auto binary = [&](const std::string& name, const char* op, ValueId a, ValueId b, ValueId out,
                    bool swap) {
    g.add_node(
        {name, op, swap ? std::vector<ValueId>{b, a} : std::vector<ValueId>{a, b}, {out}, {}, {}});
  };
  ValueId m = value("m"), d = value("d"), p = value("p"), v = value("v"), ve = value("ve");
  ValueId s = value("s"), n = value("n");
  mean("mean", x, m);
  g.add_node({"sub", "Sub", {x, m}, {d}, {}, {}});
  if (form.square_by_mul) {
    g.add_node({"square", "Mul", {d, d}, {p}, {}, {}});
  } else {
    g.add_node({"square", "Pow", {d, g.add_constant("two", f32_scalar(2.0f))}, {p}, {}, {}});
  }
  mean("var", p, v);
  ValueId eps = form.eps_input ? g.add_input("eps", DType::kF32, {})
                               : g.add_constant("eps", f32_scalar(1e-5f));
  binary("add_eps", "Add", v, eps, ve, form.params_first);
  g.add_node({"sqrt", "Sqrt", {ve}, {s}, {}, {}});
  g.add_node({"div", "Div", {d, s}, {n}, {}, {}});
  ValueId y = n;
  const ConcreteShape param_shape = form.params_rank3 ? ConcreteShape{1, 1, 8} : ConcreteShape{8};
  if (form.gamma) {
    ValueId gy = value("gy");
    binary("gamma", "Mul", y, g.add_constant("w", random_tensor(param_shape, rng, 0.5f, 1.5f)), gy,
           form.params_first);
    y = gy;
  }
  if (form.beta) {
    ValueId by = value("by");
    binary("beta", "Add", y, g.add_constant("b", random_tensor(param_shape, rng, -1.0f, 1.0f)), by,
           form.params_first);
    y = by;
  }
  g.add_output(y);
  if (form.extra_reader) g.add_output(s);
  EXPECT_TRUE(graph_eval::infer_graph(g).ok());
  return g;
}

std::vector<Tensor> evaluate(const Graph& g, const Tensor& x) {
  std::vector<Tensor> inputs{x};
  if (g.inputs().size() == 2) inputs.push_back(f32_scalar(1e-5f));
  auto out = graph_eval::evaluate_graph(g, inputs);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<Tensor>{};
}

TEST(FuseLayerNorm, WrittenOutFormsBecomeOneNode) {
  std::mt19937 rng(7);
  std::vector<std::pair<std::string, Form>> forms = {
      {"torch opset 14", {}},
      {"mul square, params first", {.square_by_mul = true, .params_first = true}},
      {"axes as input", {.axes_as_input = true}},
      {"no beta", {.beta = false}},
      {"no gamma", {.gamma = false}},
      {"neither", {.gamma = false, .beta = false}},
      {"rank-3 params", {.params_rank3 = true}},
      {"last two axes", {.axes = {2, -2}}},
  };
  for (const auto& [label, form] : forms) {
    SCOPED_TRACE(label);
    Graph g = layer_norm_graph(form, rng);
    Tensor x = random_tensor({2, 3, 8}, rng, -3.0f, 3.0f);
    std::vector<Tensor> before = evaluate(g, x);
    ASSERT_EQ(fuse_layer_norm(g).value(), 1);
    ASSERT_EQ(g.nodes().size(), 1u);
    const Node& ln = g.node(0);
    EXPECT_EQ(ln.op_type, "LayerNormalization");
    EXPECT_EQ(ln.attributes.get_int("axis", 0).value(), form.axes.size() == 2 ? 1 : 2);
    EXPECT_NEAR(ln.attributes.get_float("epsilon", 0).value(), 1e-5, 1e-12);
    EXPECT_EQ(ln.inputs.size(), form.beta ? 3u : 2u);
    EXPECT_EQ(ln.origins.size(), 7u + form.gamma + form.beta);
    ASSERT_TRUE(graph_eval::infer_graph(g).ok());
    std::vector<Tensor> after = evaluate(g, x);
    ASSERT_EQ(after.size(), 1u);
    EXPECT_TRUE(::kiln::testing::all_close(after[0], before[0], {.atol = 1e-5, .rtol = 1e-5}));
  }
}

// A NaN in a row gives NaN in that row only, as in the written-out graph.
TEST(FuseLayerNorm, NanStaysInItsRow) {
  std::mt19937 rng(8);
  Graph g = layer_norm_graph({}, rng);
  Tensor x = random_tensor({2, 3, 8}, rng, -3.0f, 3.0f);
  x.mutable_values<float>()[8 + 5] = std::numeric_limits<float>::quiet_NaN();  // row 1
  std::vector<Tensor> before = evaluate(g, x);
  ASSERT_EQ(fuse_layer_norm(g).value(), 1);
  std::vector<Tensor> after = evaluate(g, x);
  ASSERT_EQ(after.size(), 1u);
  auto y = after[0].values<float>();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(std::isnan(y[i]), i / 8 == 1) << i;
  EXPECT_TRUE(::kiln::testing::all_close(after[0], before[0], {.atol = 1e-5, .rtol = 1e-5}));
}

TEST(FuseLayerNorm, LookalikesStayAsTheyAre) {
  std::mt19937 rng(9);
  std::vector<std::pair<std::string, Form>> forms = {
      {"not the last axis", {.axes = {1}}},
      {"Sqrt also a graph output", {.extra_reader = true}},
      {"eps not a constant", {.eps_input = true}},
  };
  for (const auto& [label, form] : forms) {
    SCOPED_TRACE(label);
    Graph g = layer_norm_graph(form, rng);
    const size_t nodes = g.nodes().size();
    EXPECT_EQ(fuse_layer_norm(g).value(), 0);
    EXPECT_EQ(count_op(g, "LayerNormalization"), 0);
    EXPECT_EQ(g.nodes().size(), nodes);
  }
}

}  // namespace
}  // namespace kiln::passes
