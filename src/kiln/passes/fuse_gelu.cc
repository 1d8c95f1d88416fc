// GELU written out as elementwise ops, as PyTorch and most exporters emit it for opsets before 20,
// becomes one Gelu node (ONNX opset 20 semantics, approximate = "none"):
//
//   d = Div(x, sqrt 2) or Mul(x, 1 / sqrt 2);  e = Erf(d);  a = Add(e, 1)
//   y = Mul(Mul(x, a), 0.5)  or  y = Mul(Mul(x, 0.5), a)
//
// Operand order of Add and Mul is free. Constants are scalars (any shape of one element) whose
// value matches within 1e-6 relative (sqrt 2 stored as f32 is 1.41421354); every intermediate has
// no other reader and is not a graph output; y has x's dtype and shape.
#include <cmath>
#include <optional>

#include "kiln/passes/passes.h"
#include "kiln/passes/pattern_util.h"

namespace kiln::passes {
namespace {

using Consumers = std::vector<std::vector<ir::NodeId>>;

bool is_scalar_constant(const ir::Graph& graph, ir::ValueId v, double expected) {
  if (v == ir::kAbsent || !graph.is_constant(v)) return false;
  const Tensor& t = *graph.value(v).constant;
  if (t.element_count() != 1 || !is_float(t.dtype())) return false;
  const double got = element_as_double(t, 0);
  return std::abs(got - expected) <= 1e-6 * std::abs(expected);
}

// The other operand of binary node `n` when one operand is the scalar constant `expected`.
std::optional<ir::ValueId> other_than_constant(const ir::Graph& graph, const ir::Node& n,
                                               double expected) {
  if (n.inputs.size() != 2) return std::nullopt;
  if (is_scalar_constant(graph, n.inputs[1], expected)) return n.inputs[0];
  if (is_scalar_constant(graph, n.inputs[0], expected)) return n.inputs[1];
  return std::nullopt;
}

// The other operand of binary node `n` when one operand is `v`.
std::optional<ir::ValueId> other_than(const ir::Node& n, ir::ValueId v) {
  if (n.inputs.size() != 2) return std::nullopt;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return std::nullopt;
}

// The single reader of node `id`'s only output, when it has op type `op`.
std::optional<ir::NodeId> next(const ir::Graph& graph, const Consumers& consumers, ir::NodeId id,
                               const char* op) {
  const ir::Node& n = graph.node(id);
  if (n.outputs.size() != 1) return std::nullopt;
  auto reader = sole_consumer(graph, consumers, n.outputs[0]);
  if (!reader || graph.node(*reader).op_type != op) return std::nullopt;
  return reader;
}

// The nodes of one match, in graph order of the computation, and its input and output.
struct GeluMatch {
  std::vector<ir::NodeId> nodes;
  ir::ValueId x = ir::kAbsent, y = ir::kAbsent;
};

std::optional<GeluMatch> match_at_erf(const ir::Graph& graph, const Consumers& consumers,
                                      ir::NodeId erf_id) {
  const ir::Node& erf = graph.node(erf_id);
  if (erf.op_type != "Erf" || erf.inputs.size() != 1 || !graph.value(erf.inputs[0]).producer) {
    return std::nullopt;
  }
  const ir::NodeId scale_id = *graph.value(erf.inputs[0]).producer;
  const ir::Node& scale = graph.node(scale_id);
  std::optional<ir::ValueId> x;
  if (scale.op_type == "Div" && scale.inputs.size() == 2 &&
      is_scalar_constant(graph, scale.inputs[1], std::sqrt(2.0))) {
    x = scale.inputs[0];
  } else if (scale.op_type == "Mul") {
    x = other_than_constant(graph, scale, std::sqrt(0.5));
  }
  if (!x || sole_consumer(graph, consumers, erf.inputs[0]) != erf_id) return std::nullopt;
  auto add_id = next(graph, consumers, erf_id, "Add");
  if (!add_id || !other_than_constant(graph, graph.node(*add_id), 1.0)) return std::nullopt;
  auto mul_id = next(graph, consumers, *add_id, "Mul");
  if (!mul_id) return std::nullopt;
  const ir::ValueId a = graph.node(*add_id).outputs[0];
  auto partner = other_than(graph.node(*mul_id), a);
  if (!partner) return std::nullopt;
  GeluMatch m;
  m.x = *x;
  if (*partner == *x) {
    // y = Mul(Mul(x, a), 0.5)
    auto half_id = next(graph, consumers, *mul_id, "Mul");
    if (!half_id || !other_than_constant(graph, graph.node(*half_id), 0.5)) return std::nullopt;
    m.nodes = {scale_id, erf_id, *add_id, *mul_id, *half_id};
    m.y = graph.node(*half_id).outputs[0];
  } else {
    // y = Mul(Mul(x, 0.5), a)
    const auto& producer = graph.value(*partner).producer;
    if (!producer) return std::nullopt;
    const ir::Node& half = graph.node(*producer);
    if (half.op_type != "Mul" || other_than_constant(graph, half, 0.5) != *x ||
        sole_consumer(graph, consumers, *partner) != *mul_id) {
      return std::nullopt;
    }
    m.nodes = {*producer, scale_id, erf_id, *add_id, *mul_id};
    m.y = graph.node(*mul_id).outputs[0];
  }
  const ir::Value& xv = graph.value(m.x);
  const ir::Value& yv = graph.value(m.y);
  if (xv.dtype != yv.dtype || xv.shape != yv.shape || !is_float(xv.dtype)) return std::nullopt;
  return m;
}

}  // namespace

StatusOr<int> fuse_gelu(ir::Graph& graph) {
  int rewrites = 0;
  Consumers consumers = graph.consumers();
  const auto count = static_cast<ir::NodeId>(graph.nodes().size());
  for (ir::NodeId id = 0; id < count; ++id) {
    if (graph.node(id).op_type != "Erf" || graph.node(id).outputs.empty()) continue;
    std::optional<GeluMatch> m = match_at_erf(graph, consumers, id);
    if (!m) continue;
    // The Gelu node takes the place of the node that produced y, which follows every node that
    // x depends on, so the graph stays in topological order.
    const ir::NodeId last = m->nodes.back();
    ir::Node gelu{graph.node(last).name, "Gelu", {m->x}, {m->y}, {}, {}};
    gelu.attributes.set("approximate", std::string("none"));
    for (ir::NodeId n : m->nodes) {
      const auto& origins = graph.node(n).origins;
      gelu.origins.insert(gelu.origins.end(), origins.begin(), origins.end());
      if (n != last) graph.erase_node(n);
    }
    graph.node(last) = std::move(gelu);
    consumers = graph.consumers();
    ++rewrites;
  }
  if (rewrites > 0) graph.remove_dead();
  return rewrites;
}

}  // namespace kiln::passes
