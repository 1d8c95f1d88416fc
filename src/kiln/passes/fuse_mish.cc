// Mish written out, as exporters before ONNX opset 18 emit it (YOLOv4's and torch's
// nn.Mish before opset 18):
//
//   s = Softplus(x);  t = Tanh(s);  y = Mul(x, t) or Mul(t, x)
//
// becomes one Mish node (ONNX opset 18 semantics): one pass over memory instead of three, on the
// CPU kiln's vector kernel (hal/cpu/vector_map_kernels.h); fuse_conv, which runs next, then
// makes a Mish after a conv the conv's activation. s and t must have no other reader and
// not be graph outputs (y has x's shape and dtype: Mul(x, t) cannot broadcast). The values differ
// from the three rounded steps by float rounding only; a module with bound dims fuses the same way
// as the dynamic one, so the two still give the same bits.
#include "kiln/passes/passes.h"
#include "kiln/passes/pattern_util.h"

namespace kiln::passes {
namespace {

using Consumers = std::vector<std::vector<ir::NodeId>>;

// The nodes Softplus, Tanh, Mul of a match at Softplus node `id`.
std::optional<std::vector<ir::NodeId>> match_at_softplus(const ir::Graph& graph,
                                                         const Consumers& consumers,
                                                         ir::NodeId id) {
  const ir::Node& softplus = graph.node(id);
  if (softplus.inputs.size() != 1) return std::nullopt;
  const ir::ValueId x = softplus.inputs[0];
  auto tanh = sole_consumer_of_type(graph, consumers, id, "Tanh");
  if (!tanh) return std::nullopt;
  auto mul = sole_consumer_of_type(graph, consumers, *tanh, "Mul");
  if (!mul) return std::nullopt;
  const ir::Node& m = graph.node(*mul);
  const ir::ValueId t = graph.node(*tanh).outputs[0];
  const bool x_times_t = m.inputs.size() == 2 && ((m.inputs[0] == x && m.inputs[1] == t) ||
                                                  (m.inputs[0] == t && m.inputs[1] == x));
  if (!x_times_t || m.outputs.size() != 1) return std::nullopt;
  return std::vector<ir::NodeId>{id, *tanh, *mul};
}

}  // namespace

StatusOr<int> fuse_mish(ir::Graph& graph) {
  int rewrites = 0;
  Consumers consumers = graph.consumers();
  const auto count = static_cast<ir::NodeId>(graph.nodes().size());
  for (ir::NodeId id = 0; id < count; ++id) {
    if (graph.node(id).op_type != "Softplus" || graph.node(id).outputs.empty()) continue;
    std::optional<std::vector<ir::NodeId>> nodes = match_at_softplus(graph, consumers, id);
    if (!nodes) continue;
    const ir::Node& mul = graph.node(nodes->back());
    // The Mish node takes the Mul's place (replace_with_fused).
    ir::Node mish{mul.name, "Mish", {graph.node(id).inputs[0]}, {mul.outputs[0]}, {}, {}};
    replace_with_fused(graph, *nodes, std::move(mish));
    consumers = graph.consumers();
    ++rewrites;
  }
  if (rewrites > 0) graph.remove_dead();
  return rewrites;
}

}  // namespace kiln::passes
