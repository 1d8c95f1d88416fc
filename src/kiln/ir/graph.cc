#include "kiln/ir/graph.h"

#include <algorithm>
#include <set>

namespace kiln::ir {

std::string Node::describe() const { return fmt::format("node '{}' ({})", name, op_type); }

ValueId Graph::add_value(Value value) {
  values_.push_back(std::move(value));
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::add_input(std::string name, DType dtype, Shape shape) {
  ValueId id =
      add_value(Value{std::move(name), dtype, std::move(shape), std::nullopt, std::nullopt});
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_constant(std::string name, Tensor data) {
  Value value{std::move(name), data.dtype(), shape_from_concrete(data.shape()), std::move(data),
              std::nullopt};
  return add_value(std::move(value));
}

NodeId Graph::add_node(Node node) {
  auto id = static_cast<NodeId>(nodes_.size());
  for (ValueId out : node.outputs) values_.at(out).producer = id;
  if (node.origins.empty()) node.origins.push_back(node.name);
  nodes_.push_back(std::move(node));
  erased_.push_back(false);
  return id;
}

std::optional<ValueId> Graph::find_value(const std::string& name) const {
  for (size_t i = 0; i < values_.size(); ++i) {
    if (values_[i].name == name) return static_cast<ValueId>(i);
  }
  return std::nullopt;
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
  std::vector<std::vector<NodeId>> out(values_.size());
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (erased_[n]) continue;
    for (ValueId in : nodes_[n].inputs) {
      if (in != kAbsent) out[in].push_back(static_cast<NodeId>(n));
    }
  }
  return out;
}

std::string Graph::unique_value_name(const std::string& base) const {
  std::set<std::string> used;
  for (const Value& v : values_) used.insert(v.name);
  if (!used.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string candidate = fmt::format("{}__{}", base, i);
    if (!used.count(candidate)) return candidate;
  }
}

void Graph::replace_uses(ValueId from, ValueId to) {
  for (Node& node : nodes_) {
    for (ValueId& in : node.inputs) {
      if (in == from) in = to;
    }
  }
  for (ValueId& out : outputs_) {
    if (out == from) out = to;
  }
}

void Graph::erase_node(NodeId id) {
  erased_.at(id) = true;
  for (ValueId out : nodes_[id].outputs) values_[out].producer.reset();
}

void Graph::remove_dead() {
  std::vector<bool> value_live(values_.size(), false);
  std::vector<bool> node_live(nodes_.size(), false);
  for (ValueId out : outputs_) value_live[out] = true;
  for (size_t n = nodes_.size(); n-- > 0;) {
    if (erased_[n]) continue;
    bool used = std::any_of(nodes_[n].outputs.begin(), nodes_[n].outputs.end(),
                            [&](ValueId v) { return value_live[v]; });
    if (!used) continue;
    node_live[n] = true;
    for (ValueId in : nodes_[n].inputs) {
      if (in != kAbsent) value_live[in] = true;
    }
    for (ValueId out : nodes_[n].outputs) value_live[out] = true;
  }
  for (ValueId in : inputs_) value_live[in] = true;

  std::vector<ValueId> remap(values_.size(), kAbsent);
  std::vector<Value> kept_values;
  for (size_t v = 0; v < values_.size(); ++v) {
    if (!value_live[v]) continue;
    remap[v] = static_cast<ValueId>(kept_values.size());
    kept_values.push_back(std::move(values_[v]));
    kept_values.back().producer.reset();
  }
  std::vector<Node> kept_nodes;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (!node_live[n]) continue;
    Node node = std::move(nodes_[n]);
    for (ValueId& in : node.inputs) {
      if (in != kAbsent) in = remap[in];
    }
    for (ValueId& out : node.outputs) out = remap[out];
    for (ValueId out : node.outputs)
      kept_values[out].producer = static_cast<NodeId>(kept_nodes.size());
    kept_nodes.push_back(std::move(node));
  }
  for (ValueId& in : inputs_) in = remap[in];
  for (ValueId& out : outputs_) out = remap[out];
  values_ = std::move(kept_values);
  nodes_ = std::move(kept_nodes);
  erased_.assign(nodes_.size(), false);
}

Status Graph::topological_sort() {
  std::vector<bool> ready(values_.size(), false);
  for (size_t v = 0; v < values_.size(); ++v) {
    ready[v] = !values_[v].producer.has_value() || values_[v].constant.has_value();
  }
  std::vector<bool> placed(nodes_.size(), false);
  std::vector<size_t> order;
  bool progress = true;
  while (order.size() < nodes_.size() && progress) {
    progress = false;
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (placed[n]) continue;
      if (erased_[n]) {  // still lists outputs that a fusion gave to another node: none defined
                         // here
        placed[n] = true;
        order.push_back(n);
        progress = true;
        continue;
      }
      bool inputs_ready = std::all_of(nodes_[n].inputs.begin(), nodes_[n].inputs.end(),
                                      [&](ValueId v) { return v == kAbsent || ready[v]; });
      if (!inputs_ready) continue;
      placed[n] = true;
      order.push_back(n);
      for (ValueId out : nodes_[n].outputs) ready[out] = true;
      progress = true;
    }
  }
  if (order.size() < nodes_.size()) return invalid_argument("graph '{}' has a cycle", name);
  std::vector<Node> sorted;
  std::vector<bool> sorted_erased;
  for (size_t n : order) {
    sorted.push_back(std::move(nodes_[n]));
    sorted_erased.push_back(erased_[n]);
  }
  nodes_ = std::move(sorted);
  erased_ = std::move(sorted_erased);
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (erased_[n]) continue;
    for (ValueId out : nodes_[n].outputs) values_[out].producer = static_cast<NodeId>(n);
  }
  return ok_status();
}

namespace {

Status verify_graph_at(const Graph& graph, int depth);

Status verify_bodies(const Node& node, int depth) {
  for (size_t b = 0; b < node.bodies.size(); ++b) {
    if (node.bodies[b] == nullptr)
      return invalid_argument("{}: body {} is missing", node.describe(), b);
    if (depth >= kMaxBodyDepth) {
      return invalid_argument("{}: bodies nested more than {} deep", node.describe(),
                              kMaxBodyDepth);
    }
    Status status = verify_graph_at(*node.bodies[b], depth + 1);
    if (!status.ok())
      return std::move(status).with_note(fmt::format("in body {} of {}", b, node.describe()));
  }
  return ok_status();
}

Status verify_graph_at(const Graph& graph, int depth) {
  const auto& values = graph.values();
  auto in_range = [&](ValueId id) { return id >= 0 && static_cast<size_t>(id) < values.size(); };
  std::vector<bool> defined(values.size(), false);
  for (ValueId in : graph.inputs()) {
    if (!in_range(in)) return invalid_argument("graph input id {} out of range", in);
    defined[in] = true;
  }
  for (size_t v = 0; v < values.size(); ++v) {
    const Value& value = values[v];
    if (!value.constant) continue;
    defined[v] = true;
    if (value.constant->dtype() != value.dtype ||
        shape_from_concrete(value.constant->shape()) != value.shape) {
      return invalid_argument("constant '{}' data does not match its declared type {}{}",
                              value.name, dtype_name(value.dtype), shape_to_string(value.shape));
    }
  }
  for (const Node& node : graph.nodes()) {
    for (ValueId in : node.inputs) {
      if (in == kAbsent) continue;
      if (!in_range(in))
        return invalid_argument("{}: input id {} out of range", node.describe(), in);
      if (!defined[in]) {
        return invalid_argument("{}: input '{}' is used before it is defined", node.describe(),
                                values[in].name);
      }
    }
    for (ValueId out : node.outputs) {
      if (!in_range(out))
        return invalid_argument("{}: output id {} out of range", node.describe(), out);
      if (defined[out]) {
        return invalid_argument("{}: output '{}' is defined twice", node.describe(),
                                values[out].name);
      }
      defined[out] = true;
    }
    KILN_RETURN_IF_ERROR(verify_bodies(node, depth));
  }
  for (ValueId out : graph.outputs()) {
    if (!in_range(out) || !defined[out])
      return invalid_argument("graph output id {} is not defined", out);
  }
  return ok_status();
}

}  // namespace

Status verify_graph(const Graph& graph) { return verify_graph_at(graph, 0); }

}  // namespace kiln::ir
