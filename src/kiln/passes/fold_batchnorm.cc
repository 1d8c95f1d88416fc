#include <cmath>

#include "kiln/passes/passes.h"
#include "kiln/passes/pattern_util.h"

namespace kiln::passes {
namespace {

bool all_constant_f32(const ir::Graph& graph, std::span<const ir::ValueId> ids) {
  for (ir::ValueId id : ids) {
    if (!graph.is_constant(id) || graph.value(id).dtype != DType::kF32) return false;
  }
  return true;
}

// Conv(x, W, b) followed by BN(scale, shift, mean, var) equals Conv(x, W', b') with
// W'[o] = W[o] * s[o] and b'[o] = (b[o] - mean[o]) * s[o] + shift[o], s = scale / sqrt(var + eps).
Status fold_into_conv(ir::Graph& graph, ir::NodeId conv_id, ir::NodeId bn_id) {
  const ir::Node& bn = graph.node(bn_id);
  KILN_ASSIGN_OR_RETURN(double epsilon, bn.attributes.get_float("epsilon", 1e-5));
  const Tensor& w = *graph.value(graph.node(conv_id).inputs[1]).constant;
  const int64_t out_channels = w.shape()[0];
  const int64_t per_channel = w.element_count() / std::max<int64_t>(out_channels, 1);
  auto scale = graph.value(bn.inputs[1]).constant->values<float>();
  auto shift = graph.value(bn.inputs[2]).constant->values<float>();
  auto mean = graph.value(bn.inputs[3]).constant->values<float>();
  auto var = graph.value(bn.inputs[4]).constant->values<float>();
  if (static_cast<int64_t>(scale.size()) != out_channels) {
    return invalid_argument("BatchNormalization has {} channels, Conv has {}", scale.size(),
                            out_channels);
  }

  KILN_ASSIGN_OR_RETURN(Tensor new_w, Tensor::create(DType::kF32, w.shape()));
  KILN_ASSIGN_OR_RETURN(Tensor new_b, Tensor::create(DType::kF32, {out_channels}));
  const ir::Node& conv = graph.node(conv_id);
  bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] != ir::kAbsent;
  auto w_in = w.values<float>();
  auto w_out = new_w.mutable_values<float>();
  auto b_out = new_b.mutable_values<float>();
  for (int64_t o = 0; o < out_channels; ++o) {
    double s = scale[o] / std::sqrt(static_cast<double>(var[o]) + epsilon);
    for (int64_t i = 0; i < per_channel; ++i) {
      w_out[o * per_channel + i] = static_cast<float>(w_in[o * per_channel + i] * s);
    }
    double bias = has_bias ? graph.value(conv.inputs[2]).constant->values<float>()[o] : 0.0;
    b_out[o] = static_cast<float>((bias - mean[o]) * s + shift[o]);
  }
  std::string w_name = graph.unique_value_name(graph.value(conv.inputs[1]).name + "_bnfold");
  std::string b_name = graph.unique_value_name(graph.value(bn.outputs[0]).name + "_bias");
  ir::ValueId w_id = graph.add_constant(w_name, std::move(new_w));
  ir::ValueId b_id = graph.add_constant(b_name, std::move(new_b));
  ir::Node& conv_mut = graph.node(conv_id);
  conv_mut.inputs.resize(3);
  conv_mut.inputs[1] = w_id;
  conv_mut.inputs[2] = b_id;
  absorb_successor(graph, conv_id, bn_id);
  return ok_status();
}

}  // namespace

StatusOr<int> fold_batchnorm(ir::Graph& graph) {
  int rewrites = 0;
  auto consumers = graph.consumers();
  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(graph.nodes().size()); ++id) {
    const ir::Node& conv = graph.node(id);
    if (conv.op_type != "Conv" || conv.inputs.size() > 3 || conv.attributes.has("kiln_activation"))
      continue;
    auto bn_id = sole_consumer(graph, consumers, conv.outputs[0]);
    if (!bn_id) continue;
    const ir::Node& bn = graph.node(*bn_id);
    if (bn.op_type != "BatchNormalization" || bn.inputs.size() != 5 || bn.outputs.size() != 1 ||
        bn.inputs[0] != conv.outputs[0] || bn.attributes.has("kiln_activation")) {
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int64_t spatial, bn.attributes.get_int("spatial", 1));
    KILN_ASSIGN_OR_RETURN(int64_t training, bn.attributes.get_int("training_mode", 0));
    if (spatial != 1 || training != 0) continue;
    std::vector<ir::ValueId> params(bn.inputs.begin() + 1, bn.inputs.end());
    params.push_back(conv.inputs[1]);
    if (conv.inputs.size() > 2 && conv.inputs[2] != ir::kAbsent) params.push_back(conv.inputs[2]);
    if (!all_constant_f32(graph, params)) continue;
    std::string where = bn.describe();
    Status folded = fold_into_conv(graph, id, *bn_id);
    if (!folded.ok()) return std::move(folded).with_note("while folding " + where);
    consumers = graph.consumers();
    ++rewrites;
  }
  if (rewrites) graph.remove_dead();
  return rewrites;
}

}  // namespace kiln::passes
