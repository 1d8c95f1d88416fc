// evaluate_node (graph_eval.h): the reference evaluation of one node runs its definition's kernel
// (kernels::OpDef::make) on float64 copies of the floating-point inputs and rounds the results
// to the dtypes the op gives for the original inputs.
#include <fmt/format.h>

#include "kiln/base/half.h"
#include "kiln/graph_eval/control_flow.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/graph_eval/lookup.h"
#include "kiln/graph_eval/sequence.h"
#include "kiln/kernels/kernel.h"

namespace kiln::graph_eval {
namespace {

kernels::InferArgs infer_args(const ir::Node& node,
                              const std::vector<std::optional<ValueType>>& inputs,
                              const std::vector<const Tensor*>& constants) {
  return kernels::InferArgs{
      node.attributes, inputs, constants, node.outputs.size(), {}, {}, {}, {}, {}, {}};
}

Tensor to_f64(const Tensor& t) {
  Tensor out = Tensor::create(DType::kF64, t.shape()).value();
  auto y = out.mutable_values<double>();
  for (int64_t i = 0; i < t.element_count(); ++i) y[i] = element_as_double(t, i);
  return out;
}

// `t` (f64) rounded to `dtype` (a float dtype).
Tensor from_f64(const Tensor& t, DType dtype) {
  Tensor out = Tensor::create(dtype, t.shape()).value();
  auto x = t.values<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    const auto f = static_cast<float>(x[i]);
    switch (dtype) {
      case DType::kF32: out.mutable_values<float>()[i] = f; break;
      case DType::kF16: out.mutable_values<uint16_t>()[i] = float_to_half_bits(f); break;
      case DType::kBF16: out.mutable_values<uint16_t>()[i] = float_to_bfloat16_bits(f); break;
      default: out.mutable_values<double>()[i] = x[i]; break;
    }
  }
  return out;
}

StatusOr<std::vector<Tensor>> run_kernel(const kernels::OpDef& op, const ir::Node& node,
                                         std::span<const Tensor> inputs) {
  std::vector<kernels::ConcreteInput> concrete;
  for (const Tensor& t : inputs) {
    if (t.empty_storage()) {
      concrete.push_back({});  // an absent optional input
    } else {
      concrete.push_back({true, t.dtype(), t.shape(), &t});
    }
  }
  KILN_ASSIGN_OR_RETURN(
      kernels::Planned planned,
      kernels::plan_concrete(op, node.attributes, concrete, node.outputs.size(), nullptr));
  std::vector<Tensor> outputs;
  std::vector<kernels::ConstBuffer> in;
  std::vector<kernels::MutableBuffer> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(
        {inputs[i].dtype(), inputs[i].shape(), concrete[i].present ? inputs[i].data() : nullptr});
  }
  for (const kernels::ConcreteOutput& o : planned.outputs) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(o.dtype, o.dims));
    outputs.push_back(std::move(t));
  }
  for (Tensor& t : outputs) out.push_back({t.dtype(), t.shape(), t.mutable_data()});
  KILN_RETURN_IF_ERROR(planned.kernel->run(in, out));
  return outputs;
}

Status evaluate_definition(const kernels::OpDef& op, const ir::Node& node,
                           std::span<const Tensor> inputs, std::vector<Tensor>& outputs) {
  if (inputs.size() != node.inputs.size()) {
    return invalid_argument("got {} input tensors for {} node inputs", inputs.size(),
                            node.inputs.size());
  }
  // MaxPool only selects input values, so float64 adds nothing, and a window with no tap inside
  // the input must give the lowest finite value of the model's dtype, not of float64.
  bool upcast = false;
  const bool selects_only = node.op_type == "MaxPool";
  std::vector<Tensor> wide;
  for (const Tensor& t : inputs) {
    if (selects_only) break;
    wide.push_back(t);
    if (!t.empty_storage() &&
        (t.dtype() == DType::kF32 || t.dtype() == DType::kF16 || t.dtype() == DType::kBF16)) {
      wide.back() = to_f64(t);
      upcast = true;
    }
  }
  if (!upcast) {
    KILN_ASSIGN_OR_RETURN(outputs, run_kernel(op, node, inputs));
    return ok_status();
  }
  // Infer on the original types to learn the result types; run in float64.
  std::vector<std::optional<ValueType>> types;
  std::vector<const Tensor*> constants;
  for (const Tensor& t : inputs) {
    if (t.empty_storage()) {
      types.emplace_back(std::nullopt);
      constants.push_back(nullptr);
    } else {
      types.emplace_back(ValueType{t.dtype(), shape_from_concrete(t.shape())});
      constants.push_back(&t);
    }
  }
  while (!types.empty() && !types.back()) {
    types.pop_back();
    constants.pop_back();
  }
  kernels::InferArgs args = infer_args(node, types, constants);
  KILN_RETURN_IF_ERROR(op.infer(args));
  auto wide_result = run_kernel(op, node, wide);
  bool same_dims = wide_result.ok() && wide_result->size() == args.outputs.size();
  for (size_t i = 0; same_dims && i < args.outputs.size(); ++i) {
    same_dims = shape_from_concrete((*wide_result)[i].shape()) == args.outputs[i].shape;
  }
  if (!same_dims) {
    // The op's shapes depend on float data (e.g. Range): evaluate in the original dtypes.
    KILN_ASSIGN_OR_RETURN(outputs, run_kernel(op, node, inputs));
    return ok_status();
  }
  outputs.clear();
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    Tensor& t = (*wide_result)[i];
    const DType want = args.outputs[i].dtype;
    outputs.push_back(t.dtype() == DType::kF64 && want != DType::kF64 ? from_f64(t, want)
                                                                      : std::move(t));
  }
  return ok_status();
}

}  // namespace

StatusOr<std::vector<Tensor>> evaluate_node(const ir::Graph& graph, ir::NodeId id,
                                            std::span<const Tensor> inputs,
                                            const Registry& registry) {
  if (id >= 0 && static_cast<size_t>(id) < graph.nodes().size() &&
      (is_control_flow(graph.node(id)) || is_sequence_node(graph, graph.node(id)))) {
    const ir::Node& node = graph.node(id);
    const std::vector<HostValue> values = tensor_values(inputs);
    auto outputs = is_control_flow(node) ? evaluate_control_flow(graph, id, values, registry)
                                         : evaluate_sequence_node(graph, id, values);
    if (!outputs.ok()) return std::move(outputs).status();
    auto tensors = value_tensors(std::move(outputs).value(), "output");
    if (!tensors.ok()) return with_node_note(std::move(tensors).status(), node);
    return tensors;
  }
  KILN_ASSIGN_OR_RETURN(const OpDef* def, lookup(graph, id, registry));
  const ir::Node& node = graph.node(id);
  if (inputs.size() != node.inputs.size()) {
    return with_node_note(invalid_argument("got {} input tensors for {} node inputs", inputs.size(),
                                           node.inputs.size()),
                          node);
  }
  std::vector<Tensor> outputs;
  Status status = evaluate_definition(*def, node, inputs, outputs);
  if (!status.ok()) return with_node_note(std::move(status), node);
  if (outputs.size() != node.outputs.size()) {
    return with_node_note(internal_error("evaluation gave {} outputs for {} node outputs",
                                         outputs.size(), node.outputs.size()),
                          node);
  }
  return outputs;
}

}  // namespace kiln::graph_eval
