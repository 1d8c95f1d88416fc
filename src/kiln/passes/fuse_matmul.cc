// fuse_matmul: first, Mul(MatMul(a, b), s) (either order) or Div(MatMul(a, b), c), with s or c
// a constant f32 scalar (one element, of a rank that broadcasts nothing up; attention's scaling of
// QK^T), becomes MatMul(a, b) with the attribute kiln_scale = s or 1/c (kernels/linalg.cc), which
// the CPU and Vulkan kernels apply to each sum instead of a separate pass over the scores. A Div
// only where 1/c is an exact f32 (c a power of two, as sqrt(64) for 64-wide heads): x * (1/c) is
// then x / c, bit for bit; a Mul is the same multiplication. f32 products with no bias, residual
// or activation yet (the scale applies first); a and b may be computed.
//
// A scale of an operand instead, MatMul(Div(a, c), b) or MatMul(Mul(a, s), b) (either operand,
// Mul in either order; PyTorch's MultiheadAttention divides q by sqrt(d) before q k^T), folds the
// same way when the factor (s or 1/c) is a power of two and the scaled operand is read by the
// MatMul alone: then the Div no longer materialises its copy of the operand, and a head split
// before it becomes a view the product reads in place. Scaling by a power of two commutes with
// every rounding of the sum, so (a/c) b and (a b)/c are the same floats wherever no scaled
// operand, product or partial sum leaves f32's normal range (a result below 2^-126 loses its low
// bits at another step; a sum above FLT_MAX * |factor| overflows in one order only). ONNX
// Runtime folds such scales into its own products' alpha too (its MatMulScaleFusion).
//
// Then Add(MatMul(x, W), bias) with W a constant matrix and bias a constant [N] (or [1,
// ..., 1, N]) becomes MatMul(x, W, bias): kiln's input 2 'kiln_bias' (kernels/linalg.cc), which
// the CPU backend adds in its kernel's epilogue instead of running a separate broadcast Add. Then
// Add(MatMul(x, W[, bias]), r) with r a computed value of the product's shape (a transformer's
// residual) becomes MatMul(x, W, bias or absent, r): input 3 'kiln_residual', also added in the
// epilogue. Only a residual some node computes is fused: a constant or graph input of a
// broadcastable shape matches the product's shape only when sizes are bound, which would make a
// bound module differ from the dynamic one.
//
// Attention's additive mask is such a computed addend too, but of a shape that broadcasts up to the
// scores': Add(MatMul(q, k) [* scale], mask) with mask [B, 1, 1, S] (BERT-style exports; [1, 1,
// S, S] or [S, S] for a causal one, GPT-2's Trilu) against scores [B, H, S, S], of any B (the
// computed K^T need not be a constant), becomes MatMul(q, k, absent, mask): a kiln_residual of at
// most the product's rank with its last dim, whose other dims (right-aligned) are the product's
// or 1, added to every row and matrix it broadcasts over, in
// the same operation as the Add (so the Softmax after it can fold as well, below). A dim of 1 in
// the mask against one that is not 1 in the product is a literal 1 in both the dynamic and the
// bound graph (the mask's Unsqueeze); a symbolic dim that only binding sets to 1 leaves the dynamic
// graph's Add unfused and the bound one's fused, the same bits either way.
//
// f32 and f64 only, where the fused form gives the unfused bits: the product's sum is rounded to
// the output's type, then the bias is added and rounded once, as by the Add (on the CPU kernel
// fma(bias, 1, sum), which is the same rounding of sum + bias), and the residual is added after it,
// as by the second Add. The MatMul's output must feed only the Add. Both operands are constants of
// fixed shape, so a module with bound sizes fuses exactly where the dynamic one does.
//
// A MatMul whose softmax is fused (attention's probabilities, P = softmax(Q K^T [* scale]
// [+ mask])) and read only by a second, plain f32 MatMul(P, V) becomes one MatMul(q, k, bias or
// absent, mask or absent, V): input 4 'kiln_values' (kernels/linalg.cc), whose output is the second
// MatMul's. The CPU kernel then computes P a block of rows at a time and multiplies those rows by V
// while they are in its cache, never writing the [..., S, S] probabilities to memory; each output
// element is the same sum of the same products as the second MatMul's, so the same bits. V's
// leading dims must broadcast to P's without adding any, compared symbolically, so a bound module
// fuses where the dynamic one does (and where it would not, the bits are the same either way).
//
// Last, Gelu(MatMul(x, W[, bias][, r])) (a Gelu node: passes::fuse_gelu writes exporters' GELU
// as one) becomes MatMul(x, W, ...) with the attribute kiln_activation = "gelu" or "gelu_tanh"
// (kernels/activation.h), applied after the bias and the residual, as the Gelu after the Adds;
// nothing is fused into a MatMul after its activation. f32 and f64 products with a constant 2-D
// W, as above (the transformer MLP's first product); the Gelu is the MatMul output's only reader.
// The fused GELU is not the unfused one's bits: the CPU kernel computes it in its epilogue with
// approximations of erf and tanh (hal/cpu/gemm_activation.h), as oneDNN's Gelu does with its own.
// The rewrite depends on no size, so the dynamic and the bound module fuse alike.
#include <cmath>
#include <cstring>
#include <optional>

#include "kiln/kernels/activation.h"
#include "kiln/kernels/op_attributes.h"
#include "kiln/passes/passes.h"
#include "kiln/passes/pattern_util.h"

namespace kiln::passes {
namespace {

// The bias values of `v` as a [N] tensor when it is a constant of `dtype` holding N values along
// its last dim only (leading dims 1), N the product's columns; nullopt otherwise.
std::optional<Tensor> bias_of(const ir::Value& v, DType dtype, int64_t n) {
  if (!v.constant || v.dtype != dtype || v.constant->shape().empty()) return std::nullopt;
  const ConcreteShape& s = v.constant->shape();
  if (s.back() != n) return std::nullopt;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] != 1) return std::nullopt;
  }
  auto t = Tensor::create(dtype, {n});
  if (!t.ok()) return std::nullopt;
  std::memcpy(t->mutable_data(), v.constant->data(), v.constant->byte_size());
  return std::move(t).value();
}

// A MatMul whose product ends with an activation or a softmax: nothing more is added after it.
bool ends_with_function(const ir::Node& mm) {
  return mm.attributes.has(kernels::kActivationAttribute) ||
         mm.attributes.has(kernels::kMatmulSoftmaxAttribute);
}

// Whether MatMul `mm`'s B is a constant f32 or f64 matrix (rank 2), as every fusion here asks.
bool constant_matrix_b(const ir::Graph& graph, const ir::Node& mm) {
  const ir::Value& w = graph.value(mm.inputs[1]);
  return (w.dtype == DType::kF32 || w.dtype == DType::kF64) && w.constant &&
         w.constant->shape().size() == 2;
}

// The one f32 value of constant `v` when it holds exactly one and its rank is at most `rank`.
std::optional<float> scalar_of(const ir::Value& v, size_t rank) {
  if (!v.constant || v.dtype != DType::kF32 || v.constant->element_count() != 1 ||
      v.constant->shape().size() > rank) {
    return std::nullopt;
  }
  return v.constant->values<float>()[0];
}

// 1/c when that is an exact f32 (c a power of two, negative or positive, whose reciprocal does
// not overflow), else nullopt.
std::optional<float> exact_reciprocal(float c) {
  if (!std::isfinite(c) || c == 0.0f) return std::nullopt;
  int exponent = 0;
  if (std::abs(std::frexp(c, &exponent)) != 0.5f) return std::nullopt;
  const float reciprocal = 1.0f / c;
  if (!std::isfinite(reciprocal)) return std::nullopt;
  return reciprocal;
}

// A MatMul that can take a kiln_scale: f32, its two operands only, no scale or activation yet.
bool takes_scale(const ir::Graph& graph, const ir::Node& mm) {
  return mm.op_type == "MatMul" && mm.inputs.size() == 2 && mm.outputs.size() == 1 &&
         !ends_with_function(mm) && !mm.attributes.has(kernels::kMatmulScaleAttribute) &&
         graph.value(mm.inputs[0]).dtype == DType::kF32;
}

// The factor of a Mul or Div node by a constant scalar that broadcasts nothing up (the output has
// the scaled value's shape), and the value it scales: Div(x, c) gives 1/c where that is exact,
// Mul(x, s) or Mul(s, x) gives s.
struct ScalarScale {
  ir::ValueId scaled;
  float factor;
};
std::optional<ScalarScale> scalar_scale(const ir::Graph& graph, const ir::Node& op) {
  if ((op.op_type != "Mul" && op.op_type != "Div") || op.inputs.size() != 2 ||
      op.outputs.size() != 1 || op.inputs[0] == op.inputs[1]) {
    return std::nullopt;
  }
  const size_t rank = graph.value(op.outputs[0]).shape.size();
  for (size_t slot : {size_t{1}, size_t{0}}) {
    // Div only as x over c.
    if (op.op_type == "Div" && slot == 0) break;
    const std::optional<float> value = scalar_of(graph.value(op.inputs[slot]), rank);
    if (!value) continue;
    const std::optional<float> factor = op.op_type == "Mul" ? value : exact_reciprocal(*value);
    const ir::ValueId scaled = op.inputs[1 - slot];
    if (!factor || graph.value(scaled).shape.size() != rank) return std::nullopt;
    return ScalarScale{scaled, *factor};
  }
  return std::nullopt;
}

// Whether `f` is a power of two (either sign): scaling by it rounds nothing in the normal range.
bool power_of_two(float f) {
  int exponent = 0;
  return std::isfinite(f) && f != 0.0f && std::abs(std::frexp(f, &exponent)) == 0.5f;
}

// MatMul(scale(a), b) or MatMul(a, scale(b)), by a power of two, the scaled operand read by the
// MatMul alone.
bool fuse_operand_scale(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
                        ir::NodeId id) {
  if (!takes_scale(graph, graph.node(id))) return false;
  for (size_t slot = 0; slot < 2; ++slot) {
    const ir::ValueId operand = graph.node(id).inputs[slot];
    const ir::Value& v = graph.value(operand);
    if (!v.producer || sole_consumer(graph, consumers, operand) != id) continue;
    const ir::NodeId op_id = *v.producer;
    const std::optional<ScalarScale> scale = scalar_scale(graph, graph.node(op_id));
    if (!scale || !power_of_two(scale->factor) || graph.value(scale->scaled).dtype != DType::kF32) {
      continue;
    }
    std::vector<std::string> origins = graph.node(op_id).origins;
    ir::Node& mm = graph.node(id);
    mm.inputs[slot] = scale->scaled;
    mm.attributes.set(kernels::kMatmulScaleAttribute, static_cast<double>(scale->factor));
    mm.origins.insert(mm.origins.begin(), origins.begin(), origins.end());
    graph.erase_node(op_id);
    return true;
  }
  return false;
}

bool fuse_scale(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
                ir::NodeId id) {
  const ir::Node& mm = graph.node(id);
  if (!takes_scale(graph, mm)) return false;
  const ir::ValueId y = mm.outputs[0];
  auto op_id = sole_consumer(graph, consumers, y);
  if (!op_id) return false;
  const std::optional<ScalarScale> scale = scalar_scale(graph, graph.node(*op_id));
  if (!scale || scale->scaled != y) return false;
  graph.node(id).attributes.set(kernels::kMatmulScaleAttribute, static_cast<double>(scale->factor));
  absorb_successor(graph, id, *op_id);
  return true;
}

bool fuse_bias(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
               ir::NodeId id) {
  const ir::Node& mm = graph.node(id);
  if (mm.op_type != "MatMul" || mm.inputs.size() != 2 || mm.outputs.size() != 1 ||
      ends_with_function(mm)) {
    return false;
  }
  if (!constant_matrix_b(graph, mm)) return false;
  const ir::Value& w = graph.value(mm.inputs[1]);
  const DType dtype = w.dtype;
  const ir::ValueId y = mm.outputs[0];
  // The product's rows keep their shape through the Add: A of rank >= 2 (a 1-D A drops a dim).
  if (graph.value(mm.inputs[0]).shape.size() < 2) return false;
  const std::optional<AddAfter> after = sole_add_after(graph, consumers, y);
  if (!after) return false;
  const ir::ValueId other = after->other;
  const ir::Value& bias_value = graph.value(other);
  // The Add's output must be the product's shape: a bias of higher rank would broadcast it.
  if (bias_value.shape.size() > graph.value(y).shape.size()) return false;
  std::optional<Tensor> bias = bias_of(bias_value, dtype, w.constant->shape()[1]);
  if (!bias) return false;
  // A [1, ..., N] bias becomes a [N] constant of the same values.
  const ir::ValueId bias_id = bias_value.shape.size() == 1
                                  ? other
                                  : graph.add_constant(mm.name + "/kiln_bias", std::move(*bias));
  graph.node(id).inputs.push_back(bias_id);
  absorb_successor(graph, id, after->add);
  return true;
}

// A MatMul of a constant matrix (with or without its bias) whose only consumer adds a computed
// value of its shape.
bool fuse_residual(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
                   ir::NodeId id) {
  const ir::Node& mm = graph.node(id);
  if (mm.op_type != "MatMul" || mm.inputs.size() > 3 || mm.outputs.size() != 1 ||
      ends_with_function(mm)) {
    return false;
  }
  if (!constant_matrix_b(graph, mm)) return false;
  const ir::Value& w = graph.value(mm.inputs[1]);
  const ir::ValueId y = mm.outputs[0];
  const std::optional<AddAfter> after = sole_add_after(graph, consumers, y);
  if (!after) return false;
  const ir::Value& r = graph.value(after->other);
  const ir::Value& sum = graph.value(graph.node(after->add).outputs[0]);
  if (!r.producer || r.constant || r.dtype != w.dtype ||
      !same_or_assumed_shape(graph, r.shape, graph.value(y).shape) ||
      !same_or_assumed_shape(graph, sum.shape, graph.value(y).shape)) {
    return false;
  }
  take_residual(graph, id, *after);
  return true;
}

// Whether `r` broadcasts up to `y` dim by dim without changing y's last dim: at most y's rank
// (right-aligned, the missing dims broadcast), the last dim the same, every other dim the same
// or 1.
bool broadcasts_to_rows(const ir::Graph& graph, const Shape& r, const Shape& y) {
  if (r.size() > y.size() || r.empty() || y.size() < 2) return false;
  const size_t lead = y.size() - r.size();
  for (size_t i = 0; i < r.size(); ++i) {
    const bool one = r[i] == DimExpr(1) && i + 1 < r.size();
    if (!one && !same_or_assumed_shape(graph, Shape{r[i]}, Shape{y[lead + i]})) return false;
  }
  return true;
}

// An f32 MatMul of computed or constant operands (with or without a scale, nothing else fused)
// whose only consumer adds a computed value that broadcasts up to the product's shape along
// every dim but the last (attention's mask).
bool fuse_broadcast_addend(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
                           ir::NodeId id) {
  const ir::Node& mm = graph.node(id);
  if (mm.op_type != "MatMul" || mm.inputs.size() != 2 || mm.outputs.size() != 1 ||
      ends_with_function(mm) || graph.value(mm.inputs[0]).dtype != DType::kF32 ||
      graph.value(mm.inputs[1]).shape.size() < 2) {
    return false;
  }
  const ir::ValueId y = mm.outputs[0];
  const std::optional<AddAfter> after = sole_add_after(graph, consumers, y);
  if (!after) return false;
  const ir::Value& r = graph.value(after->other);
  const ir::Value& sum = graph.value(graph.node(after->add).outputs[0]);
  const Shape& ys = graph.value(y).shape;
  if (!r.producer || r.constant || r.dtype != DType::kF32 ||
      !broadcasts_to_rows(graph, r.shape, ys) || !same_or_assumed_shape(graph, sum.shape, ys)) {
    return false;
  }
  take_residual(graph, id, *after);
  return true;
}

// A MatMul of a constant matrix whose only consumer is a Gelu of its output.
bool fuse_gelu_activation(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
                          ir::NodeId id) {
  const ir::Node& mm = graph.node(id);
  if (mm.op_type != "MatMul" || mm.outputs.size() != 1 || ends_with_function(mm) ||
      !constant_matrix_b(graph, mm)) {
    return false;
  }
  auto gelu_id = sole_consumer(graph, consumers, mm.outputs[0]);
  if (!gelu_id) return false;
  const ir::Node& gelu = graph.node(*gelu_id);
  if (gelu.op_type != "Gelu" || gelu.inputs.size() != 1 || gelu.outputs.size() != 1) return false;
  auto tanh = kernels::read_gelu_tanh_approximation(gelu.attributes);
  if (!tanh.ok()) return false;  // an approximate the Gelu node's own checks report
  using Kind = kernels::FusedActivation::Kind;
  kernels::set_fused_activation(graph.node(id).attributes,
                                kernels::FusedActivation{*tanh ? Kind::kGeluTanh : Kind::kGelu});
  absorb_successor(graph, id, *gelu_id);
  return true;
}

// An f32 MatMul with a B of rank >= 2 whose only consumer is an opset-13 Softmax along the last
// axis (attention's scores).
bool fuse_softmax(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
                  ir::NodeId id) {
  const ir::Node& mm = graph.node(id);
  if (mm.op_type != "MatMul" || mm.outputs.size() != 1 || ends_with_function(mm) ||
      graph.opset < 13 || graph.value(mm.inputs[0]).dtype != DType::kF32 ||
      graph.value(mm.inputs[1]).shape.size() < 2) {
    return false;
  }
  auto softmax_id = sole_consumer(graph, consumers, mm.outputs[0]);
  if (!softmax_id) return false;
  const ir::Node& softmax = graph.node(*softmax_id);
  if (softmax.op_type != "Softmax" || softmax.inputs.size() != 1 || softmax.outputs.size() != 1) {
    return false;
  }
  const auto rank = static_cast<int64_t>(graph.value(mm.outputs[0]).shape.size());
  auto axis = kernels::read_softmax_axis(softmax.attributes, rank);
  if (!axis.ok() || *axis != rank - 1) return false;
  graph.node(id).attributes.set(kernels::kMatmulSoftmaxAttribute, int64_t{1});
  absorb_successor(graph, id, *softmax_id);
  return true;
}

// A MatMul with a fused softmax (attention's probabilities) read only by a plain f32 MatMul as
// its A (the probabilities times V), V of rank 2 or more whose leading dims broadcast to the
// scores' without adding any.
bool fuse_values(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
                 ir::NodeId id) {
  const ir::Node& mm = graph.node(id);
  if (mm.op_type != "MatMul" || mm.inputs.size() > 4 || mm.outputs.size() != 1 ||
      !mm.attributes.has(kernels::kMatmulSoftmaxAttribute)) {
    return false;
  }
  const ir::ValueId scores = mm.outputs[0];
  auto next_id = sole_consumer(graph, consumers, scores);
  if (!next_id) return false;
  const ir::Node& next = graph.node(*next_id);
  if (next.op_type != "MatMul" || next.inputs.size() != 2 || next.outputs.size() != 1 ||
      next.inputs[0] != scores || next.inputs[1] == scores || !next.attributes.all().empty()) {
    return false;
  }
  const Shape& ss = graph.value(scores).shape;
  const ir::Value& v = graph.value(next.inputs[1]);
  const Shape& out = graph.value(next.outputs[0]).shape;
  if (graph.value(scores).dtype != DType::kF32 || v.dtype != DType::kF32 ||
      graph.value(mm.inputs[0]).shape.size() < 2 || v.shape.size() < 2 ||
      v.shape.size() > ss.size() || out.size() != ss.size() ||
      !same_or_assumed_shape(graph, Shape(out.begin(), out.end() - 1),
                             Shape(ss.begin(), ss.end() - 1))) {
    return false;
  }
  const ir::ValueId values = next.inputs[1];
  ir::Node& fused = graph.node(id);
  fused.inputs.resize(4, ir::kAbsent);
  fused.inputs.push_back(values);
  absorb_successor(graph, id, *next_id);
  return true;
}

}  // namespace

StatusOr<int> fuse_matmul(ir::Graph& graph) {
  int rewrites = 0;
  auto consumers = graph.consumers();
  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(graph.nodes().size()); ++id) {
    // A node a rewrite absorbed keeps its fields until remove_dead (fuse_values absorbs a MatMul).
    if (graph.is_erased(id) || graph.node(id).outputs.empty()) continue;
    // The scale first, then the bias, the residual after it, then the activation or the
    // softmax, on the same MatMul.
    while (fuse_operand_scale(graph, consumers, id) || fuse_scale(graph, consumers, id) ||
           fuse_bias(graph, consumers, id) || fuse_residual(graph, consumers, id) ||
           fuse_broadcast_addend(graph, consumers, id) ||
           fuse_gelu_activation(graph, consumers, id) || fuse_softmax(graph, consumers, id) ||
           fuse_values(graph, consumers, id)) {
      ++rewrites;
      consumers = graph.consumers();
    }
  }
  if (rewrites > 0) {
    KILN_RETURN_IF_ERROR(graph.topological_sort());
    graph.remove_dead();
  }
  return rewrites;
}

}  // namespace kiln::passes
