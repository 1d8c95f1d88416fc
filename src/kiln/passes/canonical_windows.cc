#include "kiln/passes/canonical_windows.h"

#include <fmt/format.h>

#include "kiln/kernels/infer_util.h"

namespace kiln::passes {

using kernels::AutoPad;
using kernels::WindowGeometry;
using kernels::WindowOptions;

StatusOr<WindowGeometry> node_window_geometry(const ir::Node& node, const Shape& input_shape,
                                              const Shape* weight_shape) {
  if (input_shape.size() < 3) {
    return invalid_argument("input 0 'X' must have rank >= 3 ([N, C, spatial...]), got {}",
                            shape_to_string(input_shape));
  }
  size_t spatial_rank = input_shape.size() - 2;
  WindowOptions options;
  if (node.op_type == "Conv") {
    if (weight_shape != nullptr) {
      if (weight_shape->size() != input_shape.size()) {
        return invalid_argument("input 1 'W' must have rank {} like input 0 'X', got {}",
                                input_shape.size(), shape_to_string(*weight_shape));
      }
      std::vector<int64_t> kernel;
      for (size_t i = 2; i < weight_shape->size(); ++i) {
        KILN_ASSIGN_OR_RETURN(int64_t k,
                              kernels::require_constant_dim((*weight_shape)[i],
                                                            fmt::format("input 1 'W' dim {}", i)));
        kernel.push_back(k);
      }
      options.kernel_from_weights = std::move(kernel);
    } else if (!node.attributes.has("kernel_shape")) {
      return invalid_argument(
          "Conv needs attribute 'kernel_shape' or the shape of input 1 'W' for its kernel");
    }
  } else if (node.op_type == "MaxPool" || node.op_type == "AveragePool") {
    options.allow_ceil_mode = true;
  } else {
    return invalid_argument("{} has no window geometry (expected Conv, MaxPool or AveragePool)",
                            node.op_type);
  }
  return kernels::parse_window_geometry(node.attributes, spatial_rank, options);
}

StatusOr<std::vector<int64_t>> explicit_pads(const ir::Node& node, const Shape& input_shape,
                                             const Shape* weight_shape) {
  KILN_ASSIGN_OR_RETURN(WindowGeometry g, node_window_geometry(node, input_shape, weight_shape));
  return kernels::explicit_pads(g, std::span<const DimExpr>(input_shape).subspan(2));
}

Status canonicalize_window_attributes(ir::Graph& graph, ir::NodeId id) {
  ir::Node& node = graph.node(id);
  if (node.inputs.empty() || node.inputs[0] == ir::kAbsent) {
    return invalid_argument("input 0 'X' is required").with_note("in " + node.describe());
  }
  const Shape& x_shape = graph.value(node.inputs[0]).shape;
  const Shape* w_shape = nullptr;
  if (node.op_type == "Conv" && node.inputs.size() > 1 && node.inputs[1] != ir::kAbsent) {
    w_shape = &graph.value(node.inputs[1]).shape;
  }
  auto geometry = node_window_geometry(node, x_shape, w_shape);
  if (!geometry.ok()) return std::move(geometry).status().with_note("in " + node.describe());
  auto pads = kernels::explicit_pads(*geometry, std::span<const DimExpr>(x_shape).subspan(2));
  if (!pads.ok() && pads.status().code() != StatusCode::kUnimplemented) {
    return std::move(pads).status().with_note("in " + node.describe());
  }
  node.attributes.set("kernel_shape", geometry->kernel);
  if (geometry->auto_pad != AutoPad::kNotSet && node.attributes.has("ceil_mode")) {
    node.attributes.set("ceil_mode", int64_t{0});
  }
  // SAME_* padding that depends on a symbolic dim's value stays auto_pad: every backend resolves
  // it from the concrete dims with kernels::explicit_pads, the same rule as here.
  if (!pads.ok()) return ok_status();
  node.attributes.set("pads", *pads);
  node.attributes.set("auto_pad", std::string("NOTSET"));
  return ok_status();
}

}  // namespace kiln::passes
