// QDQ patterns, as ONNX Runtime's quantizer writes a quantized model, become kiln's int8 ops so
// that the model runs the integer kernels (the CPU backend's oneDNN int8 paths):
//
//   y = QuantizeLinear(Conv(DequantizeLinear(x, xs, xz), DequantizeLinear(w, ws, wz)
//                           [, DequantizeLinear(b, bs)]), ys, yz)
//     -> y = QLinearConv(x, xs, xz, w, ws, wz, ys, yz [, b])
//   y = QuantizeLinear(MatMul(DequantizeLinear(a, as, az), DequantizeLinear(b, bs, bz)), ys, yz)
//     -> y = QLinearMatMul(a, as, az, b, bs, bz, ys, yz)
//
// Conditions (anything else stays as it is): scales and zero points constant; the activation's
// and the output's per tensor; the weights constant u8/i8 with parameters per tensor or per
// output channel (Conv: DequantizeLinear axis 0 of W; MatMul: the last axis of a 2-D B); the bias,
// when there is one, the DequantizeLinear of constant int32 data with a zero zero point and a
// scale equal in f32, channel by channel, to xs * ws (what the quantizer writes); the Conv or
// MatMul output read by the QuantizeLinear alone; a Conv without kiln's fused attributes (this
// pass runs before fold_constants, which would fold the weights' DequantizeLinear, and before
// fuse_conv). An absent activation or weight zero point becomes a constant 0.
//
// The fused op sums in int32 and requantizes once (as ONNX Runtime runs a QDQ model); the
// unfused graph computes in f32 and then quantizes, so outputs may differ by one quantization
// step.
#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "kiln/kernels/activation.h"
#include "kiln/passes/passes.h"
#include "kiln/passes/pattern_util.h"

namespace kiln::passes {
namespace {

using Consumers = std::vector<std::vector<ir::NodeId>>;

// A DequantizeLinear node's operands.
struct Dequantized {
  ir::NodeId node = -1;
  ir::ValueId q = ir::kAbsent, scale = ir::kAbsent, zero = ir::kAbsent;
  int64_t axis = 1;
};

// The DequantizeLinear producing `v`, with constant scale and zero point (when present).
std::optional<Dequantized> dequantized(const ir::Graph& graph, ir::ValueId v) {
  if (v == ir::kAbsent || !graph.value(v).producer) return std::nullopt;
  const ir::NodeId id = *graph.value(v).producer;
  const ir::Node& n = graph.node(id);
  if (n.op_type != "DequantizeLinear" || n.inputs.size() < 2) return std::nullopt;
  Dequantized d;
  d.node = id;
  d.q = n.inputs[0];
  d.scale = n.inputs[1];
  d.zero = n.inputs.size() > 2 ? n.inputs[2] : ir::kAbsent;
  if (!graph.is_constant(d.scale)) return std::nullopt;
  if (d.zero != ir::kAbsent && !graph.is_constant(d.zero)) return std::nullopt;
  auto axis = n.attributes.get_int("axis", 1);
  if (!axis.ok()) return std::nullopt;
  d.axis = *axis;
  return d;
}

int64_t element_count(const ir::Graph& graph, ir::ValueId v) {
  return graph.value(v).constant->element_count();
}

bool is_int8(DType t) { return t == DType::kU8 || t == DType::kI8; }

// Parameters of one value (scale and zero point, when present): per tensor.
bool per_tensor(const ir::Graph& graph, const Dequantized& d) {
  return element_count(graph, d.scale) == 1 &&
         (d.zero == ir::kAbsent || element_count(graph, d.zero) == 1);
}

// Per tensor, or `channels` values along `axis` (normalized against `rank`).
bool per_channel_along(const ir::Graph& graph, const Dequantized& d, int64_t want_axis,
                       int64_t rank, int64_t channels) {
  if (per_tensor(graph, d)) return true;
  const int64_t axis = d.axis < 0 ? d.axis + rank : d.axis;
  if (axis != want_axis) return false;
  const int64_t zeros = d.zero == ir::kAbsent ? 1 : element_count(graph, d.zero);
  return element_count(graph, d.scale) == channels && (zeros == 1 || zeros == channels);
}

// The zero point input: the DequantizeLinear's, or a new constant 0 of the data's dtype.
ir::ValueId zero_point(ir::Graph& graph, const Dequantized& d) {
  if (d.zero != ir::kAbsent) return d.zero;
  const DType dtype = graph.value(d.q).dtype;
  Tensor zero = Tensor::create(dtype, {}).value();
  std::memset(zero.mutable_data(), 0, zero.byte_size());
  return graph.add_constant(graph.unique_value_name(graph.value(d.q).name + "_zero_point"),
                            std::move(zero));
}

// The bias's DequantizeLinear when it matches the conditions above; nullopt otherwise.
std::optional<ir::ValueId> quantized_bias(const ir::Graph& graph, ir::ValueId bias,
                                          const Dequantized& x, const Dequantized& w,
                                          int64_t channels) {
  auto b = dequantized(graph, bias);
  if (!b || !graph.is_constant(b->q) || graph.value(b->q).dtype != DType::kI32) {
    return std::nullopt;
  }
  const Tensor& data = *graph.value(b->q).constant;
  if (data.element_count() != channels) return std::nullopt;
  if (b->zero != ir::kAbsent) {
    const Tensor& z = *graph.value(b->zero).constant;
    if (z.dtype() != DType::kI32) return std::nullopt;
    for (int32_t v : z.values<int32_t>()) {
      if (v != 0) return std::nullopt;
    }
  }
  const Tensor& bs = *graph.value(b->scale).constant;
  const Tensor& xs = *graph.value(x.scale).constant;
  const Tensor& ws = *graph.value(w.scale).constant;
  if (bs.dtype() != DType::kF32 || xs.dtype() != DType::kF32 || ws.dtype() != DType::kF32 ||
      (bs.element_count() != 1 && bs.element_count() != channels)) {
    return std::nullopt;
  }
  for (int64_t c = 0; c < channels; ++c) {
    const float want = xs.values<float>()[0] * ws.values<float>()[ws.element_count() == 1 ? 0 : c];
    if (bs.values<float>()[bs.element_count() == 1 ? 0 : c] != want) return std::nullopt;
  }
  return b->q;
}

// The fused node, when node `q_id` (a QuantizeLinear) ends a pattern.
std::optional<ir::Node> match(ir::Graph& graph, const Consumers& consumers, ir::NodeId q_id) {
  const ir::Node& q = graph.node(q_id);
  if (q.op_type != "QuantizeLinear" || q.inputs.size() < 3 || q.inputs[2] == ir::kAbsent) {
    return std::nullopt;
  }
  const ir::ValueId ys = q.inputs[1], yz = q.inputs[2];
  if (!graph.is_constant(ys) || !graph.is_constant(yz) || element_count(graph, ys) != 1 ||
      element_count(graph, yz) != 1 || !is_int8(graph.value(yz).dtype)) {
    return std::nullopt;
  }
  const ir::ValueId mid = q.inputs[0];
  if (!graph.value(mid).producer) return std::nullopt;
  const ir::NodeId op_id = *graph.value(mid).producer;
  if (sole_consumer(graph, consumers, mid) != q_id) return std::nullopt;
  const ir::Node& op = graph.node(op_id);
  const bool conv = op.op_type == "Conv";
  if (!conv && op.op_type != "MatMul") return std::nullopt;
  if (conv && (op.inputs.size() > 3 || op.attributes.has(kernels::kActivationAttribute))) {
    return std::nullopt;
  }
  auto x = dequantized(graph, op.inputs[0]);
  auto w = dequantized(graph, op.inputs[1]);
  if (!x || !w || !graph.is_constant(w->q) || !is_int8(graph.value(x->q).dtype) ||
      !is_int8(graph.value(w->q).dtype) || !per_tensor(graph, *x)) {
    return std::nullopt;
  }
  const Shape& w_shape = graph.value(w->q).shape;
  const auto rank = static_cast<int64_t>(w_shape.size());
  if (!conv && rank != 2) return std::nullopt;
  const int64_t channel_axis = conv ? 0 : 1;
  const std::optional<int64_t> channels = w_shape[channel_axis].constant_value();
  if (!channels || !per_channel_along(graph, *w, channel_axis, rank, *channels)) {
    return std::nullopt;
  }
  std::optional<ir::ValueId> bias;
  if (conv && op.inputs.size() > 2 && op.inputs[2] != ir::kAbsent) {
    bias = quantized_bias(graph, op.inputs[2], *x, *w, *channels);
    if (!bias) return std::nullopt;
  }
  ir::Node fused;
  fused.op_type = conv ? "QLinearConv" : "QLinearMatMul";
  fused.name = op.name;
  if (conv) fused.attributes = op.attributes;
  fused.outputs = {q.outputs[0]};
  fused.origins = op.origins;
  fused.origins.insert(fused.origins.end(), q.origins.begin(), q.origins.end());
  // The weights' DequantizeLinear is absorbed; the activation's may feed other nodes and stays.
  const std::vector<std::string> w_origins = graph.node(w->node).origins;
  fused.inputs = {x->q, x->scale, zero_point(graph, *x), w->q, w->scale, zero_point(graph, *w),
                  ys,   yz};
  if (bias) fused.inputs.push_back(*bias);
  fused.origins.insert(fused.origins.end(), w_origins.begin(), w_origins.end());
  graph.erase_node(op_id);
  graph.erase_node(q_id);
  return fused;
}

}  // namespace

StatusOr<int> fuse_qdq(ir::Graph& graph) {
  int rewrites = 0;
  const Consumers consumers = graph.consumers();
  const auto count = static_cast<ir::NodeId>(graph.nodes().size());
  for (ir::NodeId id = 0; id < count; ++id) {
    std::optional<ir::Node> fused = match(graph, consumers, id);
    if (!fused) continue;
    graph.add_node(std::move(*fused));
    ++rewrites;
  }
  if (rewrites > 0) {
    // Sorted first: remove_dead finds live nodes walking the graph backwards in order.
    KILN_RETURN_IF_ERROR(graph.topological_sort());
    graph.remove_dead();
  }
  return rewrites;
}

}  // namespace kiln::passes
