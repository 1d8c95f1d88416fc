#include "tests/support/runtime/test_modules.h"

#include <gtest/gtest.h>

#include <string>

#include "kiln/compiler/pipeline.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/ir/graph.h"
#include "tests/support/tensors.h"

namespace kiln::testing {
namespace {

ir::ValueId add_value(ir::Graph& g, const std::string& name, DType dtype = DType::kF32) {
  return g.add_value(ir::Value{name, dtype, {}, std::nullopt, std::nullopt, {}});
}

std::shared_ptr<const module::ModuleContents> compile(ir::Graph g) {
  Status inferred = graph_eval::infer_graph(g);
  KILN_CHECK(inferred.ok());
  auto contents = compiler::compile(std::move(g), {});
  KILN_CHECK(contents.ok());
  return std::make_shared<const module::ModuleContents>(std::move(contents).value());
}

}  // namespace

std::shared_ptr<const module::ModuleContents> compile_batch_conv_module() {
  ir::Graph g;
  g.name = "batch_conv";
  const ir::ValueId x =
      g.add_input("x", DType::kF32, {DimExpr::symbol("N"), DimExpr(3), DimExpr(32), DimExpr(32)});
  const ir::ValueId w1 = g.add_constant("w1", random_tensor({8, 3, 3, 3}, 11));
  const ir::ValueId b1 = g.add_constant("b1", random_tensor({8}, 12));
  const ir::ValueId w2 = g.add_constant("w2", random_tensor({8, 8, 3, 3}, 13));
  const ir::ValueId conv1 = add_value(g, "conv1"), relu = add_value(g, "relu"),
                    conv2 = add_value(g, "conv2"), features = add_value(g, "features"),
                    pooled = add_value(g, "pooled");
  Attributes pads;
  pads.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  g.add_node(ir::Node{"conv1", "Conv", {x, w1, b1}, {conv1}, pads, {}, {}});
  g.add_node(ir::Node{"relu", "Relu", {conv1}, {relu}, {}, {}, {}});
  g.add_node(ir::Node{"conv2", "Conv", {relu, w2}, {conv2}, pads, {}, {}});
  g.add_node(ir::Node{"residual", "Add", {conv2, relu}, {features}, {}, {}, {}});
  g.add_node(ir::Node{"pool", "GlobalAveragePool", {features}, {pooled}, {}, {}, {}});
  g.add_output(pooled);
  g.add_output(features);
  return compile(std::move(g));
}

std::shared_ptr<const module::ModuleContents> compile_nonzero_module() {
  ir::Graph g;
  g.name = "nonzero";
  const ir::ValueId x = g.add_input("x", DType::kF32, {DimExpr(6)});
  const ir::ValueId zero = g.add_constant("zero", Tensor::create(DType::kF32, {}).value());
  const ir::ValueId mask = add_value(g, "mask", DType::kBool), nz = add_value(g, "nz", DType::kI64),
                    doubled = add_value(g, "doubled", DType::kI64);
  g.add_node(ir::Node{"greater", "Greater", {x, zero}, {mask}, {}, {}, {}});
  g.add_node(ir::Node{"nonzero", "NonZero", {mask}, {nz}, {}, {}, {}});
  g.add_node(ir::Node{"double", "Add", {nz, nz}, {doubled}, {}, {}, {}});
  g.add_output(doubled);
  g.add_output(mask);
  return compile(std::move(g));
}

}  // namespace kiln::testing
