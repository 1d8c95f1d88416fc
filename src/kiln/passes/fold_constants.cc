#include <optional>

#include "kiln/ops/registry.h"
#include "kiln/passes/passes.h"

namespace kiln::passes {
namespace {

// The value's data when shape inference knows every element as an integer (e.g. Shape of a
// static tensor); nullopt otherwise.
std::optional<Tensor> known_integer_data(const ir::Value& value) {
  if (value.dim_values.empty() || !is_integer(value.dtype) || !is_static(value.shape)) {
    return std::nullopt;
  }
  ConcreteShape dims;
  for (const DimExpr& d : value.shape) dims.push_back(*d.constant_value());
  auto tensor = Tensor::create(value.dtype, dims);
  if (!tensor.ok() || tensor->element_count() != static_cast<int64_t>(value.dim_values.size())) {
    return std::nullopt;
  }
  for (size_t i = 0; i < value.dim_values.size(); ++i) {
    auto v = value.dim_values[i].constant_value();
    if (!v) return std::nullopt;
    set_element_from_int64(*tensor, static_cast<int64_t>(i), *v);
  }
  return std::move(tensor).value();
}

// Makes every output of `id` a constant when shape inference knows all of their elements.
bool fold_known_values(ir::Graph& graph, ir::NodeId id) {
  const ir::Node& node = graph.node(id);
  std::vector<Tensor> data;
  for (ir::ValueId out : node.outputs) {
    if (out == ir::kAbsent) return false;
    auto known = known_integer_data(graph.value(out));
    if (!known) return false;
    data.push_back(std::move(*known));
  }
  if (data.empty()) return false;
  const std::vector<ir::ValueId> outputs = node.outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    ir::Value& out = graph.value(outputs[i]);
    out.constant = std::move(data[i]);
    out.dim_values.clear();
  }
  graph.erase_node(id);
  return true;
}

}  // namespace

StatusOr<int> fold_constants(ir::Graph& graph) {
  int rewrites = 0;
  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(graph.nodes().size()); ++id) {
    if (fold_known_values(graph, id)) {
      ++rewrites;
      continue;
    }
    const ir::Node& node = graph.node(id);
    bool all_constant = !node.inputs.empty();
    std::vector<Tensor> inputs;
    for (ir::ValueId in : node.inputs) {
      if (in == ir::kAbsent) {
        inputs.emplace_back();
        continue;
      }
      if (!graph.is_constant(in)) {
        all_constant = false;
        break;
      }
      inputs.push_back(*graph.value(in).constant);
    }
    if (!all_constant) continue;
    auto outputs = ops::evaluate_node(graph, id, inputs);
    if (!outputs.ok()) return std::move(outputs).status().with_note("while folding " + node.describe());
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      ir::Value& out = graph.value(node.outputs[i]);
      out.constant = std::move((*outputs)[i]);
    }
    graph.erase_node(id);
    ++rewrites;
  }
  if (rewrites) graph.remove_dead();
  return rewrites;
}

}  // namespace kiln::passes
