// GELU written out as elementwise ops, as PyTorch and most exporters emit it for opsets before 20,
// becomes one Gelu node (ONNX opset 20 semantics), approximate = "none":
//
//   d = Div(x, sqrt 2) or Mul(x, 1 / sqrt 2);  e = Erf(d);  a = Add(e, 1)
//   y = Mul(Mul(x, a), 0.5)  or  y = Mul(Mul(x, 0.5), a)
//
// or approximate = "tanh" (GPT-2's GELU, torch's gelu(approximate="tanh")):
//
//   c = Pow(x, 3) or Mul(x, Mul(x, x)) or Mul(Mul(x, x), x)
//   d = Mul(sqrt(2 / pi), Add(x, Mul(0.044715, c)));  e = Tanh(d);  a = Add(e, 1)
//   y as above
//
// Operand order of Add and Mul is free. Constants are scalars (any shape of one element) whose
// value matches within 1e-6 relative (sqrt 2 stored as f32 is 1.41421354); every intermediate has
// no other reader and is not a graph output; y has x's dtype and shape.
#include <cmath>
#include <numbers>
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

// The nodes of one match, in graph order of the computation, and its input and output.
struct GeluMatch {
  std::vector<ir::NodeId> nodes;
  ir::ValueId x = ir::kAbsent, y = ir::kAbsent;
};

// y = x * a * 0.5 from a = Add(e, 1) (node `add_id`): the rest of a match whose first nodes
// (computing e from x) are `head`.
std::optional<GeluMatch> match_tail(const ir::Graph& graph, const Consumers& consumers,
                                    ir::ValueId x, std::vector<ir::NodeId> head,
                                    ir::NodeId add_id) {
  if (!other_than_constant(graph, graph.node(add_id), 1.0)) return std::nullopt;
  auto mul_id = sole_consumer_of_type(graph, consumers, add_id, "Mul");
  if (!mul_id) return std::nullopt;
  const ir::ValueId a = graph.node(add_id).outputs[0];
  auto partner = other_than(graph.node(*mul_id), a);
  if (!partner) return std::nullopt;
  GeluMatch m;
  m.x = x;
  m.nodes = std::move(head);
  m.nodes.push_back(add_id);
  if (*partner == x) {
    // y = Mul(Mul(x, a), 0.5)
    auto half_id = sole_consumer_of_type(graph, consumers, *mul_id, "Mul");
    if (!half_id || !other_than_constant(graph, graph.node(*half_id), 0.5)) return std::nullopt;
    m.nodes.push_back(*mul_id);
    m.nodes.push_back(*half_id);
    m.y = graph.node(*half_id).outputs[0];
  } else {
    // y = Mul(Mul(x, 0.5), a)
    const auto& producer = graph.value(*partner).producer;
    if (!producer) return std::nullopt;
    const ir::Node& half = graph.node(*producer);
    if (half.op_type != "Mul" || other_than_constant(graph, half, 0.5) != x ||
        sole_consumer(graph, consumers, *partner) != *mul_id) {
      return std::nullopt;
    }
    m.nodes.insert(m.nodes.begin(), *producer);
    m.nodes.push_back(*mul_id);
    m.y = graph.node(*mul_id).outputs[0];
  }
  const ir::Value& xv = graph.value(m.x);
  const ir::Value& yv = graph.value(m.y);
  if (xv.dtype != yv.dtype || xv.shape != yv.shape || !is_float(xv.dtype)) return std::nullopt;
  return m;
}

// The producer of `v` when it is a node of type `op` whose output only `reader` reads.
std::optional<ir::NodeId> feeding(const ir::Graph& graph, const Consumers& consumers, ir::ValueId v,
                                  const char* op, ir::NodeId reader) {
  if (v == ir::kAbsent) return std::nullopt;
  const auto& producer = graph.value(v).producer;
  if (!producer || graph.node(*producer).op_type != op ||
      sole_consumer(graph, consumers, v) != reader) {
    return std::nullopt;
  }
  return producer;
}

std::optional<GeluMatch> match_at_erf(const ir::Graph& graph, const Consumers& consumers,
                                      ir::NodeId erf_id) {
  const ir::Node& erf = graph.node(erf_id);
  if (erf.inputs.size() != 1 || !graph.value(erf.inputs[0]).producer) return std::nullopt;
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
  auto add_id = sole_consumer_of_type(graph, consumers, erf_id, "Add");
  if (!add_id) return std::nullopt;
  return match_tail(graph, consumers, *x, {scale_id, erf_id}, *add_id);
}

// Whether node `cube_id` computes x^3 as Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x); the
// inner Mul (when there is one) goes to `nodes`.
bool is_cube_of(const ir::Graph& graph, const Consumers& consumers, ir::NodeId cube_id,
                ir::ValueId x, std::vector<ir::NodeId>& nodes) {
  const ir::Node& cube = graph.node(cube_id);
  if (cube.inputs.size() != 2) return false;
  if (cube.op_type == "Pow") {
    // The exponent may be of any numeric dtype (ONNX Pow allows an integer one).
    if (cube.inputs[0] != x || !graph.is_constant(cube.inputs[1])) return false;
    const Tensor& e = *graph.value(cube.inputs[1]).constant;
    return e.element_count() == 1 && element_as_double(e, 0) == 3.0;
  }
  if (cube.op_type != "Mul") return false;
  auto square = other_than(cube, x);
  if (!square) return false;
  auto square_id = feeding(graph, consumers, *square, "Mul", cube_id);
  if (!square_id) return false;
  const ir::Node& sq = graph.node(*square_id);
  if (sq.inputs[0] != x || sq.inputs[1] != x) return false;
  nodes.push_back(*square_id);
  return true;
}

std::optional<GeluMatch> match_at_tanh(const ir::Graph& graph, const Consumers& consumers,
                                       ir::NodeId tanh_id) {
  const ir::Node& tanh = graph.node(tanh_id);
  if (tanh.inputs.size() != 1) return std::nullopt;
  // d = Mul(sqrt(2 / pi), inner)
  auto scale_id = feeding(graph, consumers, tanh.inputs[0], "Mul", tanh_id);
  if (!scale_id) return std::nullopt;
  auto inner = other_than_constant(graph, graph.node(*scale_id), std::sqrt(2.0 / std::numbers::pi));
  if (!inner) return std::nullopt;
  // inner = Add(x, Mul(0.044715, cube))
  auto inner_id = feeding(graph, consumers, *inner, "Add", *scale_id);
  if (!inner_id) return std::nullopt;
  const ir::Node& add = graph.node(*inner_id);
  if (add.inputs.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const ir::ValueId x = add.inputs[side];
    auto term_id = feeding(graph, consumers, add.inputs[1 - side], "Mul", *inner_id);
    if (!term_id) continue;
    auto cube = other_than_constant(graph, graph.node(*term_id), 0.044715);
    if (!cube) continue;
    const auto& cube_producer = graph.value(*cube).producer;
    if (!cube_producer) continue;
    const char* cube_op = graph.node(*cube_producer).op_type == "Pow" ? "Pow" : "Mul";
    auto cube_id = feeding(graph, consumers, *cube, cube_op, *term_id);
    std::vector<ir::NodeId> head;
    if (!cube_id || !is_cube_of(graph, consumers, *cube_id, x, head)) continue;
    head.insert(head.end(), {*cube_id, *term_id, *inner_id, *scale_id, tanh_id});
    auto add_id = sole_consumer_of_type(graph, consumers, tanh_id, "Add");
    if (!add_id) return std::nullopt;
    return match_tail(graph, consumers, x, std::move(head), *add_id);
  }
  return std::nullopt;
}

}  // namespace

StatusOr<int> fuse_gelu(ir::Graph& graph) {
  int rewrites = 0;
  Consumers consumers = graph.consumers();
  const auto count = static_cast<ir::NodeId>(graph.nodes().size());
  for (ir::NodeId id = 0; id < count; ++id) {
    const std::string& op = graph.node(id).op_type;
    if ((op != "Erf" && op != "Tanh") || graph.node(id).outputs.empty()) continue;
    const bool tanh = op == "Tanh";
    std::optional<GeluMatch> m =
        tanh ? match_at_tanh(graph, consumers, id) : match_at_erf(graph, consumers, id);
    if (!m) continue;
    // The Gelu node takes the place of the node that produced y (replace_with_fused).
    ir::Node gelu{graph.node(m->nodes.back()).name, "Gelu", {m->x}, {m->y}, {}, {}};
    gelu.attributes.set("approximate", std::string(tanh ? "tanh" : "none"));
    replace_with_fused(graph, m->nodes, std::move(gelu));
    consumers = graph.consumers();
    ++rewrites;
  }
  if (rewrites > 0) graph.remove_dead();
  return rewrites;
}

}  // namespace kiln::passes
