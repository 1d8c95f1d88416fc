// split_sliced_matmul: a product read only by Slices or a Split of its last axis becomes one
// product per piece, whose results are the pieces' bits (float64 reference evaluation of the graph
// before and after); the look-alikes stay one product.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kiln/graph_eval/graph_eval.h"
#include "kiln/kernels/op_attributes.h"
#include "kiln/passes/passes.h"
#include "tests/support/expect.h"
#include "tests/support/tensors.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::ValueId;
using testing::i64;
using testing::random_tensor;

constexpr int64_t kK = 8;

// One Slice of the product: [start, end) along `axis` with `step`.
struct SliceRead {
  int64_t start, end, axis = -1, step = 1;
};

// x [B, 3, 8] -> MatMul(W [8, n]) -> Add(bias [n]) -> readers -> outputs, fused by fuse_matmul
// (the bias folds into the product, as the compiler's pipeline runs it first). The readers are
// the Slices given, or a Split into `split` when that is not empty; `also_relu` adds a Relu of
// the product as another reader.
struct ProductGraph {
  Graph g;
  std::vector<std::string> reader_names;
};
ProductGraph product_graph(int64_t n, const std::vector<SliceRead>& slices,
                           const std::vector<int64_t>& split = {}, bool also_relu = false) {
  ProductGraph pg;
  Graph& g = pg.g;
  g.name = "packed_projection";
  const DimExpr batch = DimExpr::symbol("B");
  ValueId x = g.add_input("x", DType::kF32, {batch, 3, kK});
  ValueId w = g.add_constant("w", random_tensor({kK, n}, 31));
  ValueId bias = g.add_constant("bias", random_tensor({n}, 32));
  ValueId p = g.add_value({"p", DType::kF32, {batch, 3, n}, {}, {}});
  ValueId q = g.add_value({"q", DType::kF32, {batch, 3, n}, {}, {}});
  g.add_node({"mm", "MatMul", {x, w}, {p}, {}, {}});
  g.add_node({"bias_add", "Add", {p, bias}, {q}, {}, {}});
  auto add_output = [&](const std::string& name, Shape s) {
    ValueId v = g.add_value({name, DType::kF32, std::move(s), {}, {}});
    g.add_output(v);
    return v;
  };
  for (size_t i = 0; i < slices.size(); ++i) {
    const SliceRead& r = slices[i];
    const std::string name = "slice" + std::to_string(i);
    Shape s{batch, 3, n};
    const int64_t axis = r.axis < 0 ? r.axis + 3 : r.axis;
    const int64_t dim = axis == 2 ? n : 3;
    const int64_t begin = std::clamp<int64_t>(r.start < 0 ? r.start + dim : r.start, 0, dim);
    const int64_t end = std::clamp<int64_t>(r.end < 0 ? r.end + dim : r.end, 0, dim);
    s[static_cast<size_t>(axis)] = DimExpr((end - begin + r.step - 1) / r.step);
    ValueId out = add_output(name + "_out", s);
    std::vector<ValueId> in{q, g.add_constant(name + "_starts", i64({1}, {r.start})),
                            g.add_constant(name + "_ends", i64({1}, {r.end})),
                            g.add_constant(name + "_axes", i64({1}, {r.axis}))};
    if (r.step != 1) in.push_back(g.add_constant(name + "_steps", i64({1}, {r.step})));
    g.add_node({name, "Slice", in, {out}, {}, {}});
    pg.reader_names.push_back(name);
  }
  if (!split.empty()) {
    std::vector<ValueId> outs;
    for (size_t i = 0; i < split.size(); ++i) {
      outs.push_back(add_output("split_out" + std::to_string(i), {batch, 3, DimExpr(split[i])}));
    }
    const auto sizes = static_cast<int64_t>(split.size());
    Node node{"split", "Split", {q, g.add_constant("split_sizes", i64({sizes}, split))},
              outs,    {},      {}};
    node.attributes.set("axis", int64_t{2});
    g.add_node(std::move(node));
    pg.reader_names.push_back("split");
  }
  if (also_relu) {
    ValueId out = add_output("relu_out", {batch, 3, n});
    g.add_node({"relu", "Relu", {q}, {out}, {}, {}});
  }
  EXPECT_EQ(fuse_matmul(g).value(), 1);
  return pg;
}

int count_op(const Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(),
                                        [&](const Node& node) { return node.op_type == op; }));
}

std::vector<Tensor> evaluate(const Graph& g, const Tensor& x) {
  auto out = graph_eval::evaluate_graph(g, std::span<const Tensor>(&x, 1));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<Tensor>{};
}

// PyTorch's packed q, k, v (three Slices of 64 columns, one with negative bounds), a Split into
// unequal pieces, and two Slices that leave columns unread: one product per piece, each with its
// columns of W and of the bias, the readers' origins, and the unsplit graph's bits (NaN kept).
TEST(SplitSlicedMatmul, GivesEachPieceItsOwnProductWithTheSameBits) {
  struct Case {
    const char* name;
    int64_t n;
    std::vector<SliceRead> slices;
    std::vector<int64_t> split;
  };
  for (const Case& c :
       {Case{"q, k, v", 192, {{0, 64}, {64, 128}, {-64, 1 << 30}}, {}},
        Case{"split", 192, {}, {64, 128}}, Case{"gaps", 256, {{16, 80}, {128, 192}}, {}}}) {
    ProductGraph pg = product_graph(c.n, c.slices, c.split);
    Graph& g = pg.g;
    Tensor x = random_tensor({2, 3, kK}, 33);
    x.mutable_values<float>()[kK] = std::numeric_limits<float>::quiet_NaN();  // row 1 of sample 0
    const std::vector<Tensor> before = evaluate(g, x);
    const size_t pieces = c.split.empty() ? c.slices.size() : c.split.size();
    EXPECT_EQ(split_sliced_matmul(g).value(), 1) << c.name;
    ASSERT_TRUE(ir::verify_graph(g).ok()) << c.name;
    EXPECT_EQ(count_op(g, "Slice") + count_op(g, "Split"), 0) << c.name;
    ASSERT_EQ(count_op(g, "MatMul"), static_cast<int>(pieces)) << c.name;
    for (const Node& mm : g.nodes()) {
      ASSERT_EQ(mm.inputs.size(), 3u) << c.name;
      const int64_t width = g.value(mm.outputs[0]).shape.back().constant_value().value();
      EXPECT_EQ(g.value(mm.inputs[1]).constant->shape(), (ConcreteShape{kK, width})) << c.name;
      EXPECT_EQ(g.value(mm.inputs[2]).constant->shape(), (ConcreteShape{width})) << c.name;
      EXPECT_NE(std::find(mm.origins.begin(), mm.origins.end(), "bias_add"), mm.origins.end());
      EXPECT_TRUE(std::any_of(pg.reader_names.begin(), pg.reader_names.end(), [&](auto& r) {
        return std::find(mm.origins.begin(), mm.origins.end(), r) != mm.origins.end();
      })) << c.name;
    }
    const std::vector<Tensor> after = evaluate(g, x);
    testing::expect_same_bits(after, before, c.name);
    ASSERT_FALSE(after.empty());
    EXPECT_TRUE(std::isnan(after[0].values<float>()[static_cast<size_t>(after[0].shape()[2])]));
  }
}

// The product stays one where a reader is not a Slice or Split of the last axis, a piece is
// narrower than 64 columns, the pieces read more columns than the product has, a Slice steps by 2,
// or the product is a graph output.
TEST(SplitSlicedMatmul, LeavesTheLookAlikes) {
  struct Case {
    const char* name;
    std::vector<SliceRead> slices;
    bool also_relu = false;
    bool product_is_output = false;
  };
  for (const Case& c : {Case{"another reader", {{0, 64}, {64, 128}}, true},
                        Case{"a narrow piece", {{0, 64}, {64, 96}}},
                        Case{"overlapping pieces", {{0, 128}, {64, 192}, {128, 192}}},
                        Case{"another axis", {{0, 2, 1}}}, Case{"a step", {{0, 192, -1, 2}}},
                        Case{"a graph output", {{0, 64}, {64, 128}}, false, true}}) {
    ProductGraph pg = product_graph(192, c.slices, {}, c.also_relu);
    if (c.product_is_output) pg.g.add_output(pg.g.nodes()[0].outputs[0]);
    EXPECT_EQ(split_sliced_matmul(pg.g).value(), 0) << c.name;
    EXPECT_EQ(count_op(pg.g, "MatMul"), 1) << c.name;
  }
}

}  // namespace
}  // namespace kiln::passes
