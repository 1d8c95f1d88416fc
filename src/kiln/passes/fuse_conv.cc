#include "kiln/passes/passes.h"
#include "kiln/passes/pattern_util.h"

namespace kiln::passes {
namespace {

bool has_activation(const ir::Node& node) { return node.attributes.has("kiln_activation"); }

// Relu after a Conv or standalone BatchNormalization becomes the producer's activation.
bool fuse_relu(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
               ir::NodeId id) {
  const ir::Node& node = graph.node(id);
  if ((node.op_type != "Conv" && node.op_type != "BatchNormalization") || has_activation(node) ||
      node.outputs.size() != 1) {
    return false;
  }
  auto relu = sole_consumer(graph, consumers, node.outputs[0]);
  if (!relu || graph.node(*relu).op_type != "Relu") return false;
  graph.node(id).attributes.set("kiln_activation", std::string("relu"));
  absorb_successor(graph, id, *relu);
  return true;
}

// Add(conv_out, r) with matching shapes becomes conv's residual input, so the sum happens in the
// conv's post-ops. The later of two candidate convs absorbs the Add, so the residual already exists.
bool fuse_residual(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
                   ir::NodeId id) {
  const ir::Node& conv = graph.node(id);
  if (conv.op_type != "Conv" || has_activation(conv) || conv.inputs.size() > 3) return false;
  ir::ValueId y = conv.outputs[0];
  auto add_id = sole_consumer(graph, consumers, y);
  if (!add_id) return false;
  const ir::Node& add = graph.node(*add_id);
  if (add.op_type != "Add" || add.inputs.size() != 2) return false;
  ir::ValueId residual = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  const ir::Value& r = graph.value(residual);
  if (r.shape != graph.value(y).shape || r.dtype != graph.value(y).dtype) return false;
  if (auto producer = r.producer; producer && *producer > id) {
    const ir::Node& other = graph.node(*producer);
    bool other_can_absorb = other.op_type == "Conv" && !has_activation(other) &&
                            other.inputs.size() <= 3 && !r.constant;
    if (other_can_absorb) return false;  // let the later conv take it
  }
  ir::Node& conv_mut = graph.node(id);
  conv_mut.inputs.resize(3, ir::kAbsent);
  conv_mut.inputs.push_back(residual);
  absorb_successor(graph, id, *add_id);
  return true;
}

}  // namespace

StatusOr<int> fuse_conv(ir::Graph& graph) {
  int rewrites = 0;
  bool changed = true;
  while (changed) {
    changed = false;
    auto consumers = graph.consumers();
    for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(graph.nodes().size()); ++id) {
      if (graph.node(id).outputs.empty()) continue;
      if (fuse_residual(graph, consumers, id) || fuse_relu(graph, consumers, id)) {
        ++rewrites;
        changed = true;
        consumers = graph.consumers();
      }
    }
    if (changed) {
      KILN_RETURN_IF_ERROR(graph.topological_sort());
      graph.remove_dead();
    }
  }
  return rewrites;
}

}  // namespace kiln::passes
