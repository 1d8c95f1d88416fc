#include <algorithm>
#include <cmath>
#include <optional>

#include "kiln/kernels/activation.h"
#include "kiln/kernels/op_attributes.h"
#include "kiln/passes/passes.h"
#include "kiln/passes/pattern_util.h"

namespace kiln::passes {
namespace {

using kernels::FusedActivation;

bool has_activation(const ir::Node& node) {
  return node.attributes.has(kernels::kActivationAttribute);
}

// The dtypes whose Clip the CPU backend applies as a conv's activation: f32, and f16/bf16, whose
// convs sum in f32 and clip before rounding once (the same values as clipping the rounded
// result: the bounds are of the data's type, so representable, and rounding is monotonic).
bool clip_fusable_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

// A Clip bound: absent (unbounded) or a finite scalar constant of a fusable dtype.
std::optional<double> clip_bound(const ir::Graph& graph, const ir::Node& clip, size_t index,
                                 double unbounded) {
  if (index >= clip.inputs.size() || clip.inputs[index] == ir::kAbsent) return unbounded;
  const ir::Value& v = graph.value(clip.inputs[index]);
  if (!v.constant || !clip_fusable_dtype(v.dtype) || v.constant->element_count() != 1) {
    return std::nullopt;
  }
  const double bound = element_as_double(*v.constant, 0);
  if (!std::isfinite(bound)) return std::nullopt;
  return bound;
}

// The activation an elementwise node computes, when the fused form computes the same: Relu,
// f32/f16/bf16 Mish (passes::fuse_mish writes it), f32/f16/bf16 LeakyRelu with a finite alpha,
// and f32/f16/bf16 Clip with constant finite bounds min <= max.
std::optional<FusedActivation> as_activation(const ir::Graph& graph, const ir::Node& node) {
  if (node.op_type == "Relu") return FusedActivation{FusedActivation::Kind::kRelu};
  if (node.op_type == "Mish" && !node.inputs.empty() &&
      clip_fusable_dtype(graph.value(node.inputs[0]).dtype)) {
    return FusedActivation{FusedActivation::Kind::kMish};
  }
  if (node.op_type == "LeakyRelu" && !node.inputs.empty() &&
      clip_fusable_dtype(graph.value(node.inputs[0]).dtype)) {
    auto alpha = kernels::read_leaky_relu_alpha(node.attributes);
    if (!alpha.ok() || !std::isfinite(*alpha)) return std::nullopt;
    FusedActivation a{FusedActivation::Kind::kLeakyRelu};
    a.alpha = *alpha;
    return a;
  }
  if (node.op_type != "Clip" || node.inputs.empty() ||
      !clip_fusable_dtype(graph.value(node.inputs[0]).dtype)) {
    return std::nullopt;
  }
  FusedActivation a{FusedActivation::Kind::kClip};
  auto lo = clip_bound(graph, node, 1, a.min);
  auto hi = clip_bound(graph, node, 2, a.max);
  if (!lo || !hi || *lo > *hi) return std::nullopt;
  a.min = *lo;
  a.max = *hi;
  return a;
}

// Conv -> Transpose -> Relu, LeakyRelu, Clip or Mish, each read only by the next: the activation
// becomes the conv's and the Transpose produces the activation's output. An element-wise function
// commutes with a transpose (the same values, in the transposed places), so the bits are the
// same. tf2onnx's NHWC graphs can leave a Relu6 between the transposes around a conv (the
// benchmark corpus's NHWC CNN: a portable Clip of 0.024 ms at batch 1).
bool fuse_activation_across_transpose(ir::Graph& graph,
                                      const std::vector<std::vector<ir::NodeId>>& consumers,
                                      ir::NodeId conv_id, ir::NodeId transpose_id) {
  const ir::Node& transpose = graph.node(transpose_id);
  if (transpose.outputs.size() != 1) return false;
  auto act_id = sole_consumer(graph, consumers, transpose.outputs[0]);
  if (!act_id) return false;
  const std::optional<FusedActivation> activation = as_activation(graph, graph.node(*act_id));
  if (!activation || graph.node(*act_id).outputs.size() != 1) return false;
  ir::Node& conv = graph.node(conv_id);
  kernels::set_fused_activation(conv.attributes, *activation);
  // The conv computes the activation, so it takes the activation's origins; the Transpose then
  // takes over its output.
  std::vector<std::string>& origins = graph.node(*act_id).origins;
  conv.origins.insert(conv.origins.end(), origins.begin(), origins.end());
  origins.clear();
  absorb_successor(graph, transpose_id, *act_id);
  return true;
}

// Conv -> Transpose -> Transpose, each read only by the next, where the second undoes the first:
// both go, and the second's readers read the conv's output. (tf2onnx's NHWC graphs leave such a
// pair around a conv once its activation between them moves into the conv above; the pair is a
// view at run time, but it hides the conv from an Add after it, fuse_residual_after_activation.)
bool cancel_transposes_after_conv(ir::Graph& graph,
                                  const std::vector<std::vector<ir::NodeId>>& consumers,
                                  ir::NodeId conv_id) {
  const ir::Node& conv = graph.node(conv_id);
  if (conv.op_type != "Conv" || conv.outputs.size() != 1) return false;
  const ir::ValueId y = conv.outputs[0];
  const size_t rank = graph.value(y).shape.size();
  // The Transpose of one output that alone reads `value`.
  auto sole_transpose = [&](ir::ValueId value) -> std::optional<ir::NodeId> {
    auto id = sole_consumer(graph, consumers, value);
    if (!id || graph.node(*id).op_type != "Transpose" || graph.node(*id).outputs.size() != 1) {
      return std::nullopt;
    }
    return id;
  };
  auto first_id = sole_transpose(y);
  if (!first_id) return false;
  auto second_id = sole_transpose(graph.node(*first_id).outputs[0]);
  if (!second_id) return false;
  auto first = kernels::read_transpose_perm(graph.node(*first_id).attributes, rank);
  auto second = kernels::read_transpose_perm(graph.node(*second_id).attributes, rank);
  if (!first.ok() || !second.ok()) return false;
  // Output dim j of the pair is dim first[second[j]] of y.
  for (size_t j = 0; j < rank; ++j) {
    if ((*first)[static_cast<size_t>((*second)[j])] != static_cast<int64_t>(j)) return false;
  }
  const ir::ValueId out = graph.node(*second_id).outputs[0];
  const auto& outputs = graph.outputs();
  if (std::find(outputs.begin(), outputs.end(), out) != outputs.end()) return false;
  std::vector<std::string>& origins = graph.node(conv_id).origins;
  for (ir::NodeId t : {*first_id, *second_id}) {
    const std::vector<std::string>& moved = graph.node(t).origins;
    origins.insert(origins.end(), moved.begin(), moved.end());
  }
  graph.replace_uses(out, y);
  graph.erase_node(*second_id);
  graph.erase_node(*first_id);
  return true;
}

// Relu, LeakyRelu, Clip or Mish after a Conv, or Relu after a standalone BatchNormalization,
// becomes the producer's activation.
bool fuse_activation(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
                     ir::NodeId id) {
  const ir::Node& node = graph.node(id);
  if ((node.op_type != "Conv" && node.op_type != "BatchNormalization") || has_activation(node) ||
      node.outputs.size() != 1) {
    return false;
  }
  auto next = sole_consumer(graph, consumers, node.outputs[0]);
  if (!next) return false;
  if (node.op_type == "Conv" && graph.node(*next).op_type == "Transpose") {
    return fuse_activation_across_transpose(graph, consumers, id, *next);
  }
  std::optional<FusedActivation> activation = as_activation(graph, graph.node(*next));
  if (!activation) return false;
  if (node.op_type == "BatchNormalization" && activation->kind != FusedActivation::Kind::kRelu) {
    return false;
  }
  kernels::set_fused_activation(graph.node(id).attributes, *activation);
  absorb_successor(graph, id, *next);
  return true;
}

// Mul(y, Sigmoid(y)) (SiLU, as PyTorch exports nn.SiLU and EfficientNet's swish) on a Conv's
// output y, read by nothing else, becomes the conv's "silu" activation: f32, f16 or bf16, the
// dtypes whose convs apply an activation before rounding once.
bool fuse_silu(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
               ir::NodeId id) {
  const ir::Node& conv = graph.node(id);
  if (conv.op_type != "Conv" || has_activation(conv) || conv.outputs.size() != 1) return false;
  const ir::ValueId y = conv.outputs[0];
  const auto& outputs = graph.outputs();
  if (std::find(outputs.begin(), outputs.end(), y) != outputs.end() ||
      consumers.at(y).size() != 2 || !clip_fusable_dtype(graph.value(y).dtype)) {
    return false;
  }
  for (ir::NodeId sigmoid_id : consumers.at(y)) {
    const ir::Node& sigmoid = graph.node(sigmoid_id);
    if (sigmoid.op_type != "Sigmoid" || sigmoid.inputs != std::vector<ir::ValueId>{y} ||
        sigmoid.outputs.size() != 1) {
      continue;
    }
    auto mul_id = sole_consumer(graph, consumers, sigmoid.outputs[0]);
    if (!mul_id) return false;
    const ir::Node& mul = graph.node(*mul_id);
    const ir::ValueId gate = sigmoid.outputs[0];
    const bool y_times_gate =
        mul.inputs.size() == 2 && ((mul.inputs[0] == y && mul.inputs[1] == gate) ||
                                   (mul.inputs[0] == gate && mul.inputs[1] == y));
    if (mul.op_type != "Mul" || !y_times_gate || mul.outputs.size() != 1) return false;
    kernels::set_fused_activation(graph.node(id).attributes,
                                  FusedActivation{FusedActivation::Kind::kSilu});
    const std::vector<std::string> origins = sigmoid.origins;
    graph.node(id).origins.insert(graph.node(id).origins.end(), origins.begin(), origins.end());
    graph.erase_node(sigmoid_id);
    absorb_successor(graph, id, *mul_id);
    return true;
  }
  return false;
}

// The Add that alone reads conv `id`'s only output (sole_add_after) and adds to it a value some
// node computes (not a constant or graph input), of the output's shape and dtype: what
// fuse_residual and fuse_residual_after_activation fold into a conv that has no residual yet.
std::optional<AddAfter> residual_add(const ir::Graph& graph,
                                     const std::vector<std::vector<ir::NodeId>>& consumers,
                                     ir::NodeId id) {
  const ir::Node& conv = graph.node(id);
  if (conv.op_type != "Conv" || conv.inputs.size() > 3 || conv.outputs.size() != 1) {
    return std::nullopt;
  }
  const ir::ValueId y = conv.outputs[0];
  const std::optional<AddAfter> after = sole_add_after(graph, consumers, y);
  if (!after) return std::nullopt;
  const ir::Value& r = graph.value(after->other);
  if (!r.producer || r.constant || r.dtype != graph.value(y).dtype ||
      !same_or_assumed_shape(graph, r.shape, graph.value(y).shape)) {
    return std::nullopt;
  }
  return after;
}

// Add(conv_out, r) with matching shapes becomes conv's residual input, so the sum happens in the
// conv's post-ops. The later of two candidate convs absorbs the Add, so the residual already
// exists. Only a residual that a node computes is fused: a constant or graph input of [1,C,1,1]
// matches the output's shape only when the sizes are bound to 1, and the fused sum's bits differ
// from the broadcast Add's, so fusing it would make a bound module differ from the dynamic one.
bool fuse_residual(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
                   ir::NodeId id) {
  if (has_activation(graph.node(id))) return false;
  const std::optional<AddAfter> found = residual_add(graph, consumers, id);
  if (!found) return false;
  const ir::NodeId producer = *graph.value(found->other).producer;
  if (producer > id) {
    const ir::Node& other = graph.node(producer);
    const bool other_can_absorb =
        other.op_type == "Conv" && !has_activation(other) && other.inputs.size() <= 3;
    if (other_can_absorb) return false;  // let the later conv take it
  }
  take_residual(graph, id, *found);
  return true;
}

// Add(y, r) where y is an f32 conv's activated output (Relu, Clip, LeakyRelu or SiLU fused
// above), read by nothing else, and r a computed value of y's shape and dtype becomes the conv's
// residual, added after its activation (kiln_residual_after_activation): a block whose branches
// each end in an activation and then meet (tf2onnx's Relu6 blocks, YOLO's SiLU bottlenecks). The
// activated value rounds to f32 and the sum rounds once, as the two nodes do, so the bits are the
// same; the Add's pass over memory is saved. The later of two such convs absorbs the Add, as in
// fuse_residual. f32 only: a narrower type's conv keeps its activated value in f32 up to its one
// rounding (conv_common.h), which the Add would have rounded first.
bool fuse_residual_after_activation(ir::Graph& graph,
                                    const std::vector<std::vector<ir::NodeId>>& consumers,
                                    ir::NodeId id) {
  const ir::Node& conv = graph.node(id);
  if (!has_activation(conv) || conv.outputs.empty() ||
      graph.value(conv.outputs[0]).dtype != DType::kF32) {
    return false;
  }
  const std::optional<AddAfter> found = residual_add(graph, consumers, id);
  if (!found) return false;
  const ir::NodeId producer = *graph.value(found->other).producer;
  const ir::Node& other = graph.node(producer);
  if (other.op_type == "Conv" && other.inputs.size() <= 3 &&
      sole_consumer(graph, consumers, found->other) == found->add) {
    // The other conv could take the Add too. One without activation takes it before its own
    // (fuse_residual), which lets an activation after the Add fuse as well; of two activated
    // convs, the later takes it.
    if (!has_activation(other) || producer > id) return false;
  }
  graph.node(id).attributes.set(kernels::kResidualAfterActivationAttribute, int64_t{1});
  take_residual(graph, id, *found);
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
      if (fuse_residual(graph, consumers, id) || fuse_activation(graph, consumers, id) ||
          fuse_silu(graph, consumers, id) || cancel_transposes_after_conv(graph, consumers, id) ||
          fuse_residual_after_activation(graph, consumers, id)) {
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
