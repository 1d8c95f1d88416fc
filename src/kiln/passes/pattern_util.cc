#include "kiln/passes/pattern_util.h"

#include <algorithm>

namespace kiln::passes {

std::optional<ir::NodeId> sole_consumer(const ir::Graph& graph,
                                        const std::vector<std::vector<ir::NodeId>>& consumers,
                                        ir::ValueId value) {
  const auto& outputs = graph.outputs();
  if (std::find(outputs.begin(), outputs.end(), value) != outputs.end()) return std::nullopt;
  const auto& readers = consumers.at(value);
  if (readers.size() != 1) return std::nullopt;
  const ir::Node& reader = graph.node(readers[0]);
  if (std::count(reader.inputs.begin(), reader.inputs.end(), value) != 1) return std::nullopt;
  return readers[0];
}

std::optional<ir::NodeId> sole_consumer_of_type(
    const ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers, ir::NodeId id,
    const char* op) {
  const ir::Node& n = graph.node(id);
  if (n.outputs.size() != 1) return std::nullopt;
  auto reader = sole_consumer(graph, consumers, n.outputs[0]);
  if (!reader || graph.node(*reader).op_type != op) return std::nullopt;
  return reader;
}

void absorb_successor(ir::Graph& graph, ir::NodeId into, ir::NodeId absorbed) {
  ir::ValueId new_output = graph.node(absorbed).outputs.at(0);
  std::vector<std::string> origins = graph.node(absorbed).origins;
  graph.erase_node(absorbed);
  ir::Node& node = graph.node(into);
  graph.value(node.outputs[0]).producer.reset();
  node.outputs[0] = new_output;
  graph.value(new_output).producer = into;
  node.origins.insert(node.origins.end(), origins.begin(), origins.end());
}

std::optional<AddAfter> sole_add_after(const ir::Graph& graph,
                                       const std::vector<std::vector<ir::NodeId>>& consumers,
                                       ir::ValueId y) {
  auto add_id = sole_consumer(graph, consumers, y);
  if (!add_id) return std::nullopt;
  const ir::Node& add = graph.node(*add_id);
  if (add.op_type != "Add" || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) {
    return std::nullopt;
  }
  return AddAfter{*add_id, add.inputs[0] == y ? add.inputs[1] : add.inputs[0]};
}

void take_residual(ir::Graph& graph, ir::NodeId id, const AddAfter& after) {
  ir::Node& node = graph.node(id);
  node.inputs.resize(3, ir::kAbsent);
  node.inputs.push_back(after.other);
  absorb_successor(graph, id, after.add);
}

void replace_with_fused(ir::Graph& graph, const std::vector<ir::NodeId>& nodes, ir::Node fused) {
  const ir::NodeId last = nodes.back();
  for (ir::NodeId n : nodes) {
    const auto& origins = graph.node(n).origins;
    fused.origins.insert(fused.origins.end(), origins.begin(), origins.end());
    if (n != last) graph.erase_node(n);
  }
  graph.node(last) = std::move(fused);
}

bool same_or_assumed_shape(const ir::Graph& graph, const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    const Assumption wanted{Assumption::Kind::kEqual, a[i], b[i], {}};
    const Assumption swapped{Assumption::Kind::kEqual, b[i], a[i], {}};
    if (std::find(graph.assumptions.begin(), graph.assumptions.end(), wanted) ==
            graph.assumptions.end() &&
        std::find(graph.assumptions.begin(), graph.assumptions.end(), swapped) ==
            graph.assumptions.end()) {
      return false;
    }
  }
  return true;
}

}  // namespace kiln::passes
