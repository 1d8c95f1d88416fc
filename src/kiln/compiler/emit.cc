#include "kiln/compiler/emit.h"

#include <memory>
#include <set>

namespace kiln::compiler {

StatusOr<module::ModuleContents> emit_module(const ir::Graph& graph) {
  module::ModuleContents contents;
  contents.model_name = graph.name;
  contents.producer = "kiln 0.1";

  std::set<std::string> bindable;
  for (ir::ValueId in : graph.inputs()) {
    for (const DimExpr& dim : graph.value(in).shape) {
      if (dim.is_symbol()) bindable.insert(dim.symbols()[0]);
    }
  }
  // A body input may hold symbols as its elements (Loop's iteration number): bound from its data.
  for (ir::ValueId in : graph.inputs()) {
    for (const DimExpr& element : graph.value(in).dim_values) {
      if (element.is_symbol()) bindable.insert(element.symbols()[0]);
    }
  }
  contents.symbols.assign(bindable.begin(), bindable.end());
  for (const ir::Node& node : graph.nodes()) {
    for (const std::string& symbol : node.data_symbols) {
      if (!bindable.insert(symbol).second) {
        return invalid_argument(
            "{} binds symbol '{}' from its data, but that symbol is already "
            "bound by a graph input or another node",
            node.describe(), symbol);
      }
    }
  }

  std::vector<bool> is_input(graph.values().size(), false);
  for (ir::ValueId in : graph.inputs()) is_input[in] = true;
  for (size_t v = 0; v < graph.values().size(); ++v) {
    const ir::Value& value = graph.value(static_cast<ir::ValueId>(v));
    for (const std::string& symbol : symbolic_element_count(value.shape).symbols()) {
      if (!bindable.count(symbol)) {
        return unimplemented(
            "value '{}' has shape {} whose symbol '{}' cannot be bound from the graph inputs' "
            "shapes or data",
            value.name, shape_to_string(value.shape), symbol);
      }
    }
    module::ModuleValue out;
    out.name = value.name;
    out.dtype = value.dtype;
    out.shape = value.shape;
    out.form = value.form;
    if (is_input[v]) {
      out.kind = module::ValueKind::kInput;
    } else if (value.constant) {
      out.kind = module::ValueKind::kConstant;
      out.constant = *value.constant;
    } else {
      out.kind = module::ValueKind::kIntermediate;
    }
    // A fraction (int(S * 0.5) before its Floor) is left to the kernels: known values are whole.
    bool symbol_elements = !value.dim_values.empty();
    for (const DimExpr& d : value.dim_values) symbol_elements = symbol_elements && d.is_symbol();
    if (!value.constant && (!is_input[v] || symbol_elements) && value.dim_values_denominator == 1) {
      bool all_bindable = true;
      for (const DimExpr& d : value.dim_values) {
        for (const std::string& symbol : d.symbols())
          all_bindable = all_bindable && bindable.count(symbol);
      }
      if (all_bindable) out.known_values = value.dim_values;
    }
    contents.values.push_back(std::move(out));
  }
  contents.assumptions = graph.assumptions;
  contents.inputs.assign(graph.inputs().begin(), graph.inputs().end());
  contents.outputs.assign(graph.outputs().begin(), graph.outputs().end());

  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const ir::Node& node = graph.nodes()[n];
    module::Dispatch dispatch;
    dispatch.name = fmt::format("d{}_{}", n, node.name);
    dispatch.op_type = node.op_type;
    dispatch.inputs.assign(node.inputs.begin(), node.inputs.end());
    dispatch.outputs.assign(node.outputs.begin(), node.outputs.end());
    dispatch.attributes = node.attributes;
    dispatch.origins = node.origins;
    dispatch.data_symbols = node.data_symbols;
    for (size_t b = 0; b < node.bodies.size(); ++b) {
      auto body = emit_module(*node.bodies[b]);
      if (!body.ok()) {
        return std::move(body).status().with_note(
            fmt::format("in body {} of {}", b, node.describe()));
      }
      dispatch.bodies.push_back(
          std::make_shared<const module::ModuleContents>(std::move(body).value()));
    }
    contents.dispatches.push_back(std::move(dispatch));
  }
  KILN_RETURN_IF_ERROR(module::verify_contents(contents));
  return contents;
}

}  // namespace kiln::compiler
