// The dynamic-shape idioms exporters emit (PyTorch, tf2onnx, paddle2onnx), each compiled once with
// its dims symbolic and run at several sizes (1, odd, larger) through the CPU backend:
//   - every output matches the float64 reference evaluator (the strict comparator);
//   - the dynamic module at each size equals, bit for bit, the module compiled with the symbols
//     bound to that size (invariant 1);
//   - sizes that break an assumption the compiler made are refused when the inputs are bound,
//     with an error naming the node, the assumption and the values.
#include <gtest/gtest.h>

#include <random>

#include "kiln/compiler/pipeline.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/runtime/session.h"
#include "kiln/tooling/comparator.h"

namespace kiln {
namespace {

// Builds small IR graphs: one line per node.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name) { graph_.name = std::move(name); }

  ir::ValueId input(const std::string& name, Shape shape, DType dtype = DType::kF32) {
    return graph_.add_input(name, dtype, std::move(shape));
  }
  ir::ValueId ints(std::vector<int64_t> values, bool scalar = false) {
    ConcreteShape dims =
        scalar ? ConcreteShape{} : ConcreteShape{static_cast<int64_t>(values.size())};
    Tensor t = Tensor::create(DType::kI64, dims).value();
    std::copy(values.begin(), values.end(), t.mutable_values<int64_t>().begin());
    return graph_.add_constant(fmt::format("c{}", counter_++), std::move(t));
  }
  ir::ValueId floats(std::vector<float> values, ConcreteShape dims) {
    Tensor t = Tensor::create(DType::kF32, std::move(dims)).value();
    std::copy(values.begin(), values.end(), t.mutable_values<float>().begin());
    return graph_.add_constant(fmt::format("c{}", counter_++), std::move(t));
  }
  ir::ValueId op(const std::string& type, std::vector<ir::ValueId> inputs, Attributes attrs = {}) {
    return ops(type, std::move(inputs), 1, std::move(attrs))[0];
  }
  std::vector<ir::ValueId> ops(const std::string& type, std::vector<ir::ValueId> inputs,
                               size_t outputs, Attributes attrs = {}) {
    const std::string name = fmt::format("{}_{}", type, counter_++);
    std::vector<ir::ValueId> out;
    for (size_t i = 0; i < outputs; ++i) {
      out.push_back(graph_.add_value(ir::Value{
          fmt::format("{}_out{}", name, i), DType::kF32, {}, std::nullopt, std::nullopt, {}}));
    }
    ir::Node node{name, type, std::move(inputs), out, std::move(attrs), {}, {}};
    graph_.add_node(std::move(node));
    return out;
  }
  // dim `axis` of x's shape as a 1-element i64 tensor.
  ir::ValueId dim_of(ir::ValueId x, int64_t axis) {
    Attributes a;
    a.set("axis", int64_t{0});
    return op("Gather", {op("Shape", {x}), ints({axis})}, a);
  }
  ir::Graph finish(std::vector<ir::ValueId> outputs) {
    ir::Graph g = without_inference(std::move(outputs));
    Status inferred = graph_eval::infer_graph(g);
    EXPECT_TRUE(inferred.ok()) << inferred.to_string();
    return g;
  }
  ir::Graph without_inference(std::vector<ir::ValueId> outputs) {
    for (ir::ValueId o : outputs) graph_.add_output(o);
    return std::move(graph_);
  }

 private:
  ir::Graph graph_;
  int counter_ = 0;
};

Attributes attrs(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes a;
  for (const auto& [name, value] : list) a.set(name, value);
  return a;
}

Tensor random_input(DType dtype, const ConcreteShape& dims, std::mt19937& rng) {
  Tensor t = Tensor::create(dtype, dims).value();
  std::uniform_real_distribution<float> uniform(-2.f, 2.f);
  for (float& v : t.mutable_values<float>()) v = uniform(rng);
  return t;
}

StatusOr<std::vector<Tensor>> run_module(const module::ModuleContents& contents,
                                         const std::vector<Tensor>& inputs) {
  KILN_ASSIGN_OR_RETURN(auto session,
                        runtime::Session::create(
                            std::make_shared<const module::ModuleContents>(contents), {"cpu", 1}));
  return session->run(inputs);
}

// Compiles `graph` once, then for each binding: runs it, compares with the reference evaluator,
// and with the module compiled with the binding fixed.
void expect_runs_at_every_size(const ir::Graph& graph, const std::vector<Bindings>& sizes) {
  auto dynamic = compiler::compile(graph, {});
  ASSERT_TRUE(dynamic.ok()) << dynamic.status().to_string();
  std::mt19937 rng(11);
  for (const Bindings& binding : sizes) {
    std::string label;
    for (const auto& [name, value] : binding) label += fmt::format("{}={} ", name, value);
    std::vector<Tensor> inputs;
    for (ir::ValueId in : graph.inputs()) {
      auto dims = evaluate_shape(graph.value(in).shape, binding);
      ASSERT_TRUE(dims.ok()) << dims.status().to_string();
      inputs.push_back(random_input(graph.value(in).dtype, *dims, rng));
    }
    auto expected = graph_eval::evaluate_graph(graph, inputs);
    ASSERT_TRUE(expected.ok()) << label << expected.status().to_string();
    auto actual = run_module(*dynamic, inputs);
    ASSERT_TRUE(actual.ok()) << label << actual.status().to_string();
    compiler::CompileOptions bound_options;
    for (const auto& [name, value] : binding) bound_options.bind[name] = value;
    auto bound = compiler::compile(graph, bound_options);
    ASSERT_TRUE(bound.ok()) << label << bound.status().to_string();
    auto bound_out = run_module(*bound, inputs);
    ASSERT_TRUE(bound_out.ok()) << label << bound_out.status().to_string();
    ASSERT_EQ(actual->size(), expected->size());
    for (size_t o = 0; o < actual->size(); ++o) {
      ASSERT_EQ((*actual)[o].shape(), (*expected)[o].shape()) << label << "output " << o;
      auto compared = compare_tensors((*actual)[o], (*expected)[o], {1e-5, 1e-5, false});
      ASSERT_TRUE(compared.ok()) << compared.status().to_string();
      EXPECT_EQ(compared->mismatches, 0) << label << "output " << o << ": "
                                         << format_compare_result(*compared, {1e-5, 1e-5, false});
      EXPECT_TRUE(bitwise_equal((*actual)[o], (*bound_out)[o]))
          << label << "output " << o << ": dynamic and bound modules differ";
    }
  }
}

// Compiles `graph` and expects the run at `binding` to be refused naming every piece of `needles`.
void expect_refused_at(const ir::Graph& graph, const Bindings& binding,
                       const std::vector<std::string>& needles) {
  auto dynamic = compiler::compile(graph, {});
  ASSERT_TRUE(dynamic.ok()) << dynamic.status().to_string();
  std::mt19937 rng(3);
  std::vector<Tensor> inputs;
  for (ir::ValueId in : graph.inputs()) {
    inputs.push_back(random_input(graph.value(in).dtype,
                                  evaluate_shape(graph.value(in).shape, binding).value(), rng));
  }
  auto out = run_module(*dynamic, inputs);
  ASSERT_FALSE(out.ok());
  const std::string message = out.status().to_string();
  for (const std::string& needle : needles) {
    EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' in: " << message;
  }
}

const DimExpr N = DimExpr::symbol("N");
const DimExpr S = DimExpr::symbol("S");
const DimExpr T = DimExpr::symbol("T");
const DimExpr H = DimExpr::symbol("H");
const DimExpr W = DimExpr::symbol("W");

std::vector<Bindings> sizes_of(const std::string& name, std::vector<int64_t> values) {
  std::vector<Bindings> out;
  for (int64_t v : values) out.push_back({{"N", 2}, {name, v}});
  return out;
}

// x[:,1:], x[:,-3:], x[:,:-1], x[:,:4], x[:, S//2:], x[:, ::-2] of a [N, S] input.
TEST(DynamicIdioms, SlicesOfASymbolicDim) {
  GraphBuilder b("slices");
  const ir::ValueId x = b.input("x", {N, S});
  auto slice = [&](ir::ValueId starts, ir::ValueId ends, std::vector<int64_t> steps = {1}) {
    return b.op("Slice", {x, starts, ends, b.ints({1}), b.ints(std::move(steps))});
  };
  const int64_t open = INT64_MAX;
  const ir::ValueId half = b.op("Div", {b.dim_of(x, 1), b.ints({2})});
  ir::Graph g = b.finish({slice(b.ints({1}), b.ints({open})), slice(b.ints({-3}), b.ints({open})),
                          slice(b.ints({0}), b.ints({-1})), slice(b.ints({0}), b.ints({4})),
                          slice(half, b.ints({open})), slice(b.ints({-1}), b.ints({-open}), {-2})});
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[0]).shape), "[N,max(0, S - 1)]");
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[1]).shape), "[N,min(3, S)]");
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[4]).shape), "[N,S - floor(S/2)]");
  EXPECT_TRUE(g.assumptions.empty());
  expect_runs_at_every_size(g, sizes_of("S", {0, 1, 2, 3, 5, 8}));
}

// [N,S] + [N,T]: equal only at run time, so assumed; a run where they differ is refused.
TEST(DynamicIdioms, DimsEqualOnlyAtRunTime) {
  GraphBuilder b("add");
  ir::Graph g = b.finish({b.op("Add", {b.input("a", {N, S}), b.input("b", {N, T})})});
  ASSERT_EQ(g.assumptions.size(), 1u);
  EXPECT_EQ(g.assumptions[0].to_string(), "S == T");
  expect_runs_at_every_size(g, {{{"N", 1}, {"S", 1}, {"T", 1}}, {{"N", 3}, {"S", 7}, {"T", 7}}});
  expect_refused_at(g, {{"N", 2}, {"S", 4}, {"T", 5}},
                    {"assumption 'S == T'", "node 'Add_0' (Add)", "S = 4", "T = 5"});
}

// A U-Net / FPN skip: MaxPool /2 -> Resize x2 -> Add with the input, so H == 2*floor(H/2).
TEST(DynamicIdioms, UNetSkipAssumesEvenSizes) {
  GraphBuilder b("skip");
  const ir::ValueId x = b.input("x", {N, DimExpr(2), H, W});
  const ir::ValueId pooled = b.op("MaxPool", {x},
                                  attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                                         {"strides", std::vector<int64_t>{2, 2}}}));
  const ir::ValueId up = b.op("Resize", {pooled, b.floats({}, {0}), b.floats({1, 1, 2, 2}, {4})},
                              attrs({{"mode", std::string("nearest")}}));
  ir::Graph g = b.finish({b.op("Add", {up, x})});
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[0]).shape), "[N,2,H,W]");
  ASSERT_EQ(g.assumptions.size(), 2u);
  expect_runs_at_every_size(g, {{{"N", 1}, {"H", 2}, {"W", 4}}, {{"N", 3}, {"H", 6}, {"W", 10}}});
  expect_refused_at(g, {{"N", 1}, {"H", 5}, {"W", 4}}, {"2*floor(H/2) == H", "(Add)", "H = 5"});
}

// Split into equal halves, SpaceToDepth: divisibility assumed.
TEST(DynamicIdioms, EqualPartsAssumeDivisibility) {
  GraphBuilder b("parts");
  const ir::ValueId x = b.input("x", {N, DimExpr(4), H, W});
  auto halves = b.ops("Split", {x}, 2, attrs({{"axis", int64_t{2}}}));
  const ir::ValueId s2d = b.op("SpaceToDepth", {x}, attrs({{"blocksize", int64_t{2}}}));
  ir::Graph g = b.finish({b.op("Sub", {halves[0], halves[1]}), s2d});
  expect_runs_at_every_size(g, {{{"N", 1}, {"H", 2}, {"W", 2}}, {{"N", 2}, {"H", 6}, {"W", 8}}});
  expect_refused_at(g, {{"N", 1}, {"H", 4}, {"W", 3}}, {"W % 2 == 0", "(SpaceToDepth)", "W = 3"});
}

// auto_pad SAME_UPPER with stride 2, and ceil_mode pooling, on symbolic spatial dims: the pads
// depend on the sizes' values, so the backend resolves them at run time.
TEST(DynamicIdioms, SamePaddingAndCeilModeWindows) {
  GraphBuilder b("windows");
  const ir::ValueId x = b.input("x", {N, DimExpr(3), H, W});
  std::vector<float> weights(4 * 3 * 3 * 3);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  const ir::ValueId conv = b.op(
      "Conv", {x, b.floats(weights, {4, 3, 3, 3})},
      attrs({{"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2, 2}}}));
  const ir::ValueId pool = b.op("MaxPool", {x},
                                attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                                       {"strides", std::vector<int64_t>{3, 3}},
                                       {"ceil_mode", int64_t{1}}}));
  const ir::ValueId avg = b.op("AveragePool", {x},
                               attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                                      {"strides", std::vector<int64_t>{2, 2}},
                                      {"auto_pad", std::string("SAME_LOWER")}}));
  ir::Graph g = b.finish({conv, pool, avg});
  EXPECT_TRUE(g.assumptions.empty());
  std::vector<Bindings> sizes;
  for (int64_t h : {2, 5, 6, 7, 12}) sizes.push_back({{"N", 1}, {"H", h}, {"W", h + 3}});
  expect_runs_at_every_size(g, sizes);
}

// A ViT class token: Concat([N,1,4], [N,S,4]) -> [N,S+1,4], then a head split by Reshape with -1:
// 4*N*(S+1) over 2*N*(S+1) is 2 by polynomial division.
TEST(DynamicIdioms, ReshapeAfterAClassToken) {
  GraphBuilder b("vit");
  const ir::ValueId tokens = b.input("tokens", {N, S, DimExpr(4)});
  const ir::ValueId cls = b.input("cls", {N, DimExpr(1), DimExpr(4)});
  const ir::ValueId joined = b.op("Concat", {cls, tokens}, attrs({{"axis", int64_t{1}}}));
  const ir::ValueId heads = b.op("Reshape", {joined, b.ints({0, 0, 2, -1})});
  ir::Graph g =
      b.finish({b.op("Transpose", {heads}, attrs({{"perm", std::vector<int64_t>{0, 2, 1, 3}}}))});
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[0]).shape), "[N,2,S + 1,2]");
  expect_runs_at_every_size(g, sizes_of("S", {0, 1, 6}));
}

// torch.arange(S).float() and Range(0, 8*N), and PyTorch's expand idiom
// Expand(p, Where(Equal(shape, -1), ones, shape)) for p.expand(N, -1, -1).
TEST(DynamicIdioms, ValuesComputedFromShapes) {
  GraphBuilder b("values");
  const ir::ValueId x = b.input("x", {N, S});
  const ir::ValueId s_float =
      b.op("Cast", {b.op("Squeeze", {b.dim_of(x, 1), b.ints({0})})}, attrs({{"to", int64_t{1}}}));
  const ir::ValueId zero_f = b.floats({0}, {});
  const ir::ValueId one_f = b.floats({1}, {});
  const ir::ValueId positions = b.op("Range", {zero_f, s_float, one_f});
  const ir::ValueId shifted = b.op("Add", {x, positions});
  const ir::ValueId n = b.op("Squeeze", {b.dim_of(x, 0), b.ints({0})});
  const ir::ValueId eight_n = b.op("Mul", {n, b.ints({8}, true)});
  const ir::ValueId steps = b.op("Range", {b.ints({0}, true), eight_n, b.ints({1}, true)});
  const ir::ValueId p = b.floats({1, 2, 3, 4}, {1, 1, 4});
  const ir::ValueId shape =
      b.op("Concat", {b.dim_of(x, 0), b.ints({-1, -1})}, attrs({{"axis", int64_t{0}}}));
  const ir::ValueId ones =
      b.op("ConstantOfShape", {b.op("Shape", {shape})},
           attrs({{"value", int64_t{1}}, {"kiln_value_dtype", std::string("i64")}}));
  const ir::ValueId is_free = b.op("Equal", {shape, b.ints({-1}, true)});
  const ir::ValueId target = b.op("Where", {is_free, ones, shape});
  const ir::ValueId expanded = b.op("Expand", {p, target});
  ir::Graph g = b.finish({shifted, b.op("Cast", {steps}, attrs({{"to", int64_t{1}}})), expanded});
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[1]).shape), "[8*N]");
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[2]).shape), "[N,1,4]");
  expect_runs_at_every_size(g, {{{"N", 1}, {"S", 1}}, {{"N", 3}, {"S", 5}}, {{"N", 4}, {"S", 16}}});
}

// int(S * 0.5), int(S * 0.25) and math.ceil(S / 4) through float: Cast to f32, Mul or Div by a
// constant, Floor/Ceil or a truncating Cast back to i64. The values are dyadic fractions, exact in
// f32, so the slices keep exact expressions; S / 3.0 is not exact in f32 and stays refused.
TEST(DynamicIdioms, FractionsOfADimThroughFloat) {
  GraphBuilder b("fractions");
  const ir::ValueId x = b.input("x", {N, S});
  const ir::ValueId s_float = b.op("Cast", {b.dim_of(x, 1)}, attrs({{"to", int64_t{1}}}));
  auto to_index = [&](ir::ValueId f) { return b.op("Cast", {f}, attrs({{"to", int64_t{7}}})); };
  const ir::ValueId half = to_index(b.op("Floor", {b.op("Mul", {s_float, b.floats({0.5f}, {})})}));
  const ir::ValueId quarter = to_index(b.op("Mul", {s_float, b.floats({0.25f}, {})}));
  const ir::ValueId ceil_quarter =
      to_index(b.op("Ceil", {b.op("Div", {s_float, b.floats({4.f}, {})})}));
  const int64_t open = INT64_MAX;
  auto slice = [&](ir::ValueId starts, ir::ValueId ends) {
    return b.op("Slice", {x, starts, ends, b.ints({1})});
  };
  ir::Graph g = b.finish({slice(half, b.ints({open})), slice(b.ints({0}), quarter),
                          slice(ceil_quarter, b.ints({open}))});
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[0]).shape), "[N,S - floor(S/2)]");
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[1]).shape), "[N,floor(S/4)]");
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[2]).shape), "[N,floor((3*S)/4)]");
  EXPECT_TRUE(g.assumptions.empty());
  expect_runs_at_every_size(g, sizes_of("S", {0, 1, 2, 3, 5, 8, 13}));

  GraphBuilder inexact("thirds");
  const ir::ValueId y = inexact.input("y", {N, S});
  const ir::ValueId y_float =
      inexact.op("Cast", {inexact.dim_of(y, 1)}, attrs({{"to", int64_t{1}}}));
  const ir::ValueId third = inexact.op(
      "Cast", {inexact.op("Floor", {inexact.op("Div", {y_float, inexact.floats({3.f}, {})})})},
      attrs({{"to", int64_t{7}}}));
  ir::Graph refused = inexact.without_inference(
      {inexact.op("Slice", {y, third, inexact.ints({open}), inexact.ints({1})})});
  const Status status = graph_eval::infer_graph(refused);
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented) << status.to_string();
  EXPECT_NE(status.to_string().find("must be known at compile time"), std::string::npos)
      << status.to_string();
}

// F.pad(up, [diff // 2, diff - diff // 2]) as PyTorch exports it: the pad amounts are computed
// from shapes, then Concat with zeros, Reshape to [3, 2], reversed rows (Slice with step -1),
// Transpose and Reshape to [-1]: values of a rank-2 tensor. The padded U-Net skip then matches
// the input exactly: 2*floor(H/2) + diff == H with no assumption.
TEST(DynamicIdioms, PadAmountsThroughRank2Values) {
  GraphBuilder b("unet_pad");
  const ir::ValueId x = b.input("x", {N, DimExpr(2), H});
  const ir::ValueId pooled = b.op(
      "MaxPool", {x},
      attrs({{"kernel_shape", std::vector<int64_t>{2}}, {"strides", std::vector<int64_t>{2}}}));
  const ir::ValueId up = b.op("Resize", {pooled, b.floats({}, {0}), b.floats({1, 1, 2}, {3})},
                              attrs({{"mode", std::string("nearest")}}));
  const ir::ValueId diff = b.op("Sub", {b.dim_of(x, 2), b.dim_of(up, 2)});
  const ir::ValueId low = b.op("Div", {diff, b.ints({2})});
  const ir::ValueId high = b.op("Sub", {diff, low});
  const ir::ValueId flat =
      b.op("Concat", {low, high, b.ints({0, 0, 0, 0})}, attrs({{"axis", int64_t{0}}}));
  const ir::ValueId pairs = b.op("Reshape", {flat, b.ints({-1, 2})});
  const ir::ValueId reversed =
      b.op("Slice", {pairs, b.ints({-1}), b.ints({-INT64_MAX}), b.ints({0}), b.ints({-1})});
  const ir::ValueId pads = b.op(
      "Reshape",
      {b.op("Transpose", {reversed}, attrs({{"perm", std::vector<int64_t>{1, 0}}})), b.ints({-1})});
  const ir::ValueId padded = b.op("Pad", {up, pads});
  ir::Graph g = b.finish({b.op("Add", {padded, x})});
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[0]).shape), "[N,2,H]");
  EXPECT_TRUE(g.assumptions.empty());
  expect_runs_at_every_size(
      g, {{{"N", 1}, {"H", 2}}, {{"N", 2}, {"H", 5}}, {{"N", 1}, {"H", 7}}, {{"N", 3}, {"H", 12}}});
}

}  // namespace
}  // namespace kiln
