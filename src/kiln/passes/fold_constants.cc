#include <optional>

#include "kiln/graph_eval/graph_eval.h"
#include "kiln/passes/passes.h"

namespace kiln::passes {
namespace {

// The value's data when shape inference knows every element as an integer (e.g. Shape of a
// static tensor); nullopt otherwise.
std::optional<Tensor> known_integer_data(const ir::Value& value) {
  if (value.dim_values.empty() || value.dim_values_denominator != 1 || !is_integer(value.dtype) ||
      !is_static(value.shape)) {
    return std::nullopt;
  }
  ConcreteShape dims;
  for (const DimExpr& d : value.shape) dims.push_back(*d.constant_value());
  auto tensor = Tensor::create(value.dtype, dims);
  if (!tensor.ok() || tensor->element_count() != static_cast<int64_t>(value.dim_values.size())) {
    return std::nullopt;
  }
  for (size_t i = 0; i < value.dim_values.size(); ++i) {
    auto v = value.dim_values[i].constant_value();
    if (!v) return std::nullopt;
    set_element_from_int64(*tensor, static_cast<int64_t>(i), *v);
  }
  return std::move(tensor).value();
}

// Integer and bool results are exact whoever computes them; floating-point results are not (the
// reference evaluator accumulates in float64, the runtime's kernels in f32).
bool exact_dtype(DType dtype) { return is_integer(dtype) || dtype == DType::kBool; }

class Folder {
 public:
  explicit Folder(ir::Graph& graph)
      : graph_(graph), size_dependent_(graph.values().size(), false) {}

  StatusOr<int> run() {
    int rewrites = 0;
    bool resized = false;
    for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(graph_.nodes().size()); ++id) {
      if (fold_known_values(id)) {
        ++rewrites;
        continue;
      }
      const ir::Node& node = graph_.node(id);
      // Control flow runs at run time: a loop's work is not the compiler's to do. Sequences and
      // optionals are never constants: their ops run on the host at run time.
      if (!node.bodies.empty() || touches_non_tensor(node)) continue;
      // A Dropout without a seed draws a new mask on every run (in training mode).
      if (node.op_type == "Dropout" && !node.attributes.has("seed")) continue;
      std::vector<Tensor> inputs;
      bool from_sizes = false;
      if (!constant_inputs(node, inputs, from_sizes)) continue;
      // Work on values computed from input sizes folds only where it is exact: the dynamic
      // module computes it at run time with the backend's kernels, and a module with the sizes
      // bound (or a static model) must give the same bits.
      if (from_sizes && !all_outputs_exact(node)) continue;
      auto outputs = graph_eval::evaluate_node(graph_, id, inputs);
      if (!outputs.ok())
        return std::move(outputs).status().with_note("while folding " + node.describe());
      resized = resized || !node.data_symbols.empty();
      const std::vector<ir::ValueId> outs = node.outputs;
      for (size_t i = 0; i < outs.size(); ++i) {
        if (outs[i] == ir::kAbsent) continue;
        ir::Value& out = graph_.value(outs[i]);
        // A size that depends on data (NonZero's count) is now known: the constant's own shape
        // replaces the symbol, and inference below carries it to the consumers.
        out.shape = shape_from_concrete((*outputs)[i].shape());
        out.constant = std::move((*outputs)[i]);
        out.dim_values.clear();
        out.dim_values_denominator = 1;
        size_dependent_[outs[i]] = from_sizes;
      }
      graph_.erase_node(id);
      ++rewrites;
    }
    if (rewrites) graph_.remove_dead();
    if (resized) KILN_RETURN_IF_ERROR(graph_eval::infer_graph(graph_));
    return rewrites;
  }

 private:
  bool touches_non_tensor(const ir::Node& node) const {
    for (const auto* ids : {&node.inputs, &node.outputs}) {
      for (ir::ValueId v : *ids) {
        if (v != ir::kAbsent && graph_.value(v).form != ValueForm::kTensor) return true;
      }
    }
    return false;
  }

  // Whether every input is a constant (absent optional inputs aside), collecting them; sets
  // `from_sizes` when one of them was computed from graph input sizes.
  bool constant_inputs(const ir::Node& node, std::vector<Tensor>& inputs, bool& from_sizes) const {
    if (node.inputs.empty()) return false;
    for (ir::ValueId in : node.inputs) {
      if (in == ir::kAbsent) {
        inputs.emplace_back();
        continue;
      }
      if (!graph_.is_constant(in)) return false;
      from_sizes = from_sizes || size_dependent_[in];
      inputs.push_back(*graph_.value(in).constant);
    }
    return true;
  }

  bool all_outputs_exact(const ir::Node& node) const {
    for (ir::ValueId out : node.outputs) {
      if (out != ir::kAbsent && !exact_dtype(graph_.value(out).dtype)) return false;
    }
    return true;
  }

  // Makes every output of `id` a constant when shape inference knows all of their elements
  // (Shape of a static or bound tensor, ...).
  bool fold_known_values(ir::NodeId id) {
    const ir::Node& node = graph_.node(id);
    bool from_sizes = false;
    for (ir::ValueId in : node.inputs) {
      if (in == ir::kAbsent) continue;
      from_sizes = from_sizes || !graph_.is_constant(in) || size_dependent_[in];
    }
    std::vector<Tensor> data;
    for (ir::ValueId out : node.outputs) {
      if (out == ir::kAbsent) return false;
      auto known = known_integer_data(graph_.value(out));
      if (!known) return false;
      data.push_back(std::move(*known));
    }
    if (data.empty()) return false;
    const std::vector<ir::ValueId> outputs = node.outputs;
    for (size_t i = 0; i < outputs.size(); ++i) {
      ir::Value& out = graph_.value(outputs[i]);
      out.constant = std::move(data[i]);
      out.dim_values.clear();
      out.dim_values_denominator = 1;
      size_dependent_[outputs[i]] = from_sizes;
    }
    graph_.erase_node(id);
    return true;
  }

  ir::Graph& graph_;
  // Per value: a constant made by this pass from graph input sizes.
  std::vector<bool> size_dependent_;
};

}  // namespace

StatusOr<int> fold_constants(ir::Graph& graph) { return Folder(graph).run(); }

}  // namespace kiln::passes
