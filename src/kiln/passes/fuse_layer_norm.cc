// Layer normalization written out as elementwise ops and reductions, as PyTorch exports
// nn.LayerNorm (and HF-style models their own LayerNorm) for opsets before 17, becomes one
// LayerNormalization node (ONNX opset 17 semantics):
//
//   m = ReduceMean(x, axes);  d = Sub(x, m);  p = Pow(d, 2) or Mul(d, d)
//   v = ReduceMean(p, axes);  s = Sqrt(Add(v, eps));  n = Div(d, s)
//   [g = Mul(n, gamma)]  [y = Add(g or n, beta)]
//
// `axes` (attribute, or a constant input 1 as at opset 18) are the last k axes of x, the same on
// both ReduceMeans, keepdims 1; they become axis = rank - k. eps, gamma and beta are constants
// (eps one element; operand order of Add and Mul free). gamma and beta must keep y's shape that of
// x: their rank at most x's, their dims before the normalized ones 1 (dropped, so that they
// broadcast within the block as LayerNormalization asks); without gamma, Scale is a constant 1.
// Every intermediate has no other reader and is not a graph output (d is read by the square and
// the Div only); x and y are float of one dtype and shape.
//
// The fused node computes what the written-out graph computes, with the statistics rounded once
// instead of at every step (kernels/normalize.cc): results agree to rounding, not bitwise.
#include <algorithm>
#include <cmath>
#include <optional>

#include "kiln/base/half.h"
#include "kiln/passes/passes.h"
#include "kiln/passes/pattern_util.h"

namespace kiln::passes {
namespace {

using Consumers = std::vector<std::vector<ir::NodeId>>;

// The single reader of `v`, when it has op type `op`.
std::optional<ir::NodeId> reader_of(const ir::Graph& graph, const Consumers& consumers,
                                    ir::ValueId v, const char* op) {
  auto reader = sole_consumer(graph, consumers, v);
  if (!reader || graph.node(*reader).op_type != op) return std::nullopt;
  return reader;
}

// The operand of binary node `n` other than `v`.
std::optional<ir::ValueId> other_than(const ir::Node& n, ir::ValueId v) {
  if (n.inputs.size() != 2) return std::nullopt;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return std::nullopt;
}

// The first normalized axis of a ReduceMean over the last axes of a rank-`rank` input with
// keepdims 1; nullopt otherwise.
std::optional<int64_t> reduced_tail(const ir::Graph& graph, const ir::Node& n, int64_t rank) {
  if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs.size() > 2) return std::nullopt;
  auto keepdims = n.attributes.get_int("keepdims", 1);
  auto noop = n.attributes.get_int("noop_with_empty_axes", 0);
  if (!keepdims.ok() || *keepdims != 1 || !noop.ok() || *noop != 0) return std::nullopt;
  std::vector<int64_t> axes;
  if (n.inputs.size() == 2) {
    if (n.attributes.has("axes") || !graph.is_constant(n.inputs[1])) return std::nullopt;
    const Tensor& t = *graph.value(n.inputs[1]).constant;
    if (t.dtype() != DType::kI64) return std::nullopt;
    for (int64_t i = 0; i < t.element_count(); ++i) axes.push_back(element_as_int64(t, i));
  } else {
    auto attr = n.attributes.get_ints("axes", {});
    if (!attr.ok()) return std::nullopt;
    axes = *attr;
  }
  if (axes.empty()) return std::nullopt;
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  const int64_t first = rank - static_cast<int64_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != first + static_cast<int64_t>(i)) return std::nullopt;
  }
  return first;
}

bool is_scalar_constant(const ir::Graph& graph, ir::ValueId v) {
  return graph.is_constant(v) && graph.value(v).constant->element_count() == 1 &&
         is_float(graph.value(v).constant->dtype());
}

// One match: the absorbed nodes in computation order, and the operands of the fused node.
struct LayerNormMatch {
  std::vector<ir::NodeId> nodes;
  ir::ValueId x = ir::kAbsent, y = ir::kAbsent;
  ir::ValueId gamma = ir::kAbsent, beta = ir::kAbsent;  // kAbsent: not in the pattern
  int64_t axis = 0;
  double epsilon = 0;
};

// Whether constant parameter `p` (gamma or beta) of an op that keeps x's shape broadcasts within
// the normalized block once its leading dims are dropped.
bool fits_block(const ir::Graph& graph, ir::ValueId p, int64_t rank, int64_t axis) {
  if (!graph.is_constant(p)) return false;
  const Shape& shape = graph.value(p).shape;
  const auto prank = static_cast<int64_t>(shape.size());
  if (prank > rank) return false;
  for (int64_t d = 0; d + (rank - axis) < prank; ++d) {
    if (shape[d] != DimExpr(1)) return false;
  }
  return true;
}

std::optional<LayerNormMatch> match_at_mean(const ir::Graph& graph, const Consumers& consumers,
                                            ir::NodeId mean_id) {
  const ir::Node& mean = graph.node(mean_id);
  LayerNormMatch m;
  m.x = mean.inputs.at(0);
  const ir::Value& xv = graph.value(m.x);
  const auto rank = static_cast<int64_t>(xv.shape.size());
  if (!is_float(xv.dtype) || rank == 0) return std::nullopt;
  auto axis = reduced_tail(graph, mean, rank);
  if (!axis) return std::nullopt;
  m.axis = *axis;
  // d = Sub(x, m)
  auto sub_id = reader_of(graph, consumers, mean.outputs[0], "Sub");
  if (!sub_id) return std::nullopt;
  const ir::Node& sub = graph.node(*sub_id);
  if (sub.inputs[0] != m.x || sub.inputs[1] != mean.outputs[0]) return std::nullopt;
  const ir::ValueId d = sub.outputs[0];
  // The square and the Div are d's only readers.
  const auto& outputs = graph.outputs();
  if (std::find(outputs.begin(), outputs.end(), d) != outputs.end()) return std::nullopt;
  std::vector<ir::NodeId> readers = consumers.at(d);
  readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
  std::optional<ir::NodeId> square_id, div_id;
  for (ir::NodeId r : readers) {
    const ir::Node& n = graph.node(r);
    if (n.inputs.size() != 2 || n.inputs[0] != d) return std::nullopt;
    if (n.op_type == "Div" && n.inputs[1] != d && !div_id) {
      div_id = r;
    } else if (n.op_type == "Pow" && is_scalar_constant(graph, n.inputs[1]) &&
               element_as_double(*graph.value(n.inputs[1]).constant, 0) == 2.0 && !square_id) {
      square_id = r;
    } else if (n.op_type == "Mul" && n.inputs[1] == d && !square_id) {
      square_id = r;
    } else {
      return std::nullopt;
    }
  }
  if (!square_id || !div_id) return std::nullopt;
  // v = ReduceMean(p) over the same axes; s = Sqrt(Add(v, eps)); n = Div(d, s)
  auto var_id = reader_of(graph, consumers, graph.node(*square_id).outputs[0], "ReduceMean");
  if (!var_id || graph.node(*var_id).inputs.at(0) != graph.node(*square_id).outputs[0] ||
      reduced_tail(graph, graph.node(*var_id), rank) != m.axis) {
    return std::nullopt;
  }
  const ir::ValueId v = graph.node(*var_id).outputs[0];
  auto eps_id = reader_of(graph, consumers, v, "Add");
  if (!eps_id) return std::nullopt;
  auto eps = other_than(graph.node(*eps_id), v);
  if (!eps || !is_scalar_constant(graph, *eps)) return std::nullopt;
  m.epsilon = element_as_double(*graph.value(*eps).constant, 0);
  if (!(m.epsilon >= 0)) return std::nullopt;
  auto sqrt_id = reader_of(graph, consumers, graph.node(*eps_id).outputs[0], "Sqrt");
  if (!sqrt_id) return std::nullopt;
  const ir::ValueId s = graph.node(*sqrt_id).outputs[0];
  if (reader_of(graph, consumers, s, "Div") != div_id || graph.node(*div_id).inputs[1] != s) {
    return std::nullopt;
  }
  m.nodes = {mean_id, *sub_id, *square_id, *var_id, *eps_id, *sqrt_id, *div_id};
  m.y = graph.node(*div_id).outputs[0];
  // Optional Mul(gamma), then optional Add(beta).
  if (auto mul_id = reader_of(graph, consumers, m.y, "Mul")) {
    auto gamma = other_than(graph.node(*mul_id), m.y);
    if (gamma && *gamma != m.y && fits_block(graph, *gamma, rank, m.axis)) {
      m.gamma = *gamma;
      m.nodes.push_back(*mul_id);
      m.y = graph.node(*mul_id).outputs[0];
    }
  }
  if (auto add_id = reader_of(graph, consumers, m.y, "Add")) {
    auto beta = other_than(graph.node(*add_id), m.y);
    if (beta && *beta != m.y && fits_block(graph, *beta, rank, m.axis)) {
      m.beta = *beta;
      m.nodes.push_back(*add_id);
      m.y = graph.node(*add_id).outputs[0];
    }
  }
  const ir::Value& yv = graph.value(m.y);
  if (yv.dtype != xv.dtype || yv.shape != xv.shape) return std::nullopt;
  for (ir::ValueId p : {m.gamma, m.beta}) {
    if (p != ir::kAbsent && graph.value(p).dtype != xv.dtype) return std::nullopt;
  }
  return m;
}

// Parameter `p` with its dims before the normalized block dropped (a new constant when any are),
// or a constant 1 of `dtype` when `p` is absent.
ir::ValueId block_parameter(ir::Graph& graph, ir::ValueId p, int64_t block_rank, DType dtype,
                            const std::string& base) {
  if (p == ir::kAbsent) {
    Tensor one = Tensor::create(dtype, {1}).value();
    switch (dtype) {
      case DType::kF64: one.mutable_values<double>()[0] = 1.0; break;
      case DType::kF16: one.mutable_values<uint16_t>()[0] = float_to_half_bits(1.0f); break;
      case DType::kBF16: one.mutable_values<uint16_t>()[0] = float_to_bfloat16_bits(1.0f); break;
      default: one.mutable_values<float>()[0] = 1.0f; break;
    }
    return graph.add_constant(graph.unique_value_name(base), std::move(one));
  }
  const Tensor& t = *graph.value(p).constant;
  const auto prank = static_cast<int64_t>(t.shape().size());
  if (prank <= block_rank) return p;
  ConcreteShape shape(t.shape().end() - block_rank, t.shape().end());
  return graph.add_constant(graph.unique_value_name(graph.value(p).name),
                            t.reshaped(std::move(shape)));
}

}  // namespace

StatusOr<int> fuse_layer_norm(ir::Graph& graph) {
  int rewrites = 0;
  Consumers consumers = graph.consumers();
  const auto count = static_cast<ir::NodeId>(graph.nodes().size());
  for (ir::NodeId id = 0; id < count; ++id) {
    if (graph.node(id).op_type != "ReduceMean" || graph.node(id).outputs.empty()) continue;
    std::optional<LayerNormMatch> m = match_at_mean(graph, consumers, id);
    if (!m) continue;
    const DType dtype = graph.value(m->x).dtype;
    const auto block_rank = static_cast<int64_t>(graph.value(m->x).shape.size()) - m->axis;
    const std::string name = graph.node(m->nodes.back()).name;
    ir::ValueId scale = block_parameter(graph, m->gamma, block_rank, dtype, name + "_scale");
    ir::ValueId bias = m->beta == ir::kAbsent
                           ? ir::kAbsent
                           : block_parameter(graph, m->beta, block_rank, dtype, name + "_bias");
    // The node takes the place of the node that produced y, which follows everything x depends on.
    ir::Node fused{name, "LayerNormalization", {m->x, scale}, {m->y}, {}, {}};
    if (bias != ir::kAbsent) fused.inputs.push_back(bias);
    fused.attributes.set("axis", m->axis);
    fused.attributes.set("epsilon", m->epsilon);
    replace_with_fused(graph, m->nodes, std::move(fused));
    consumers = graph.consumers();
    ++rewrites;
  }
  if (rewrites > 0) graph.remove_dead();
  return rewrites;
}

}  // namespace kiln::passes
