// The canonicalize pass's rewrite of Conv, MaxPool and AveragePool nodes: explicit pads and
// kernel_shape, so that backends normally see auto_pad = NOTSET. The geometry itself (attribute
// parsing, symbolic output dims, auto_pad resolution) is the ops' definition's, in
// kernels/conv_geometry.h; this file applies it to graph nodes.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/kernels/conv_geometry.h"
#include "kiln/shape/shape.h"

namespace kiln::passes {

// The geometry of a Conv, MaxPool or AveragePool node whose data input X has `input_shape`
// ([N, C, spatial...]). A Conv without kernel_shape takes its kernel from `weight_shape`
// ([M, C/group, kernel...]), whose spatial dims must then be constants.
StatusOr<kernels::WindowGeometry> node_window_geometry(const ir::Node& node,
                                                       const Shape& input_shape,
                                                       const Shape* weight_shape = nullptr);

// Compiler entry point: the explicit pads for a Conv, MaxPool or AveragePool node given X's shape
// (and W's shape for a Conv without kernel_shape).
StatusOr<std::vector<int64_t>> explicit_pads(const ir::Node& node, const Shape& input_shape,
                                             const Shape* weight_shape = nullptr);

// Rewrites node `id` (Conv, MaxPool or AveragePool) in place so that auto_pad is "NOTSET",
// `pads` is explicit and `kernel_shape` is set; ceil_mode is cleared when auto_pad was SAME or
// VALID (their output sizes equal the floor-mode sizes with the explicit pads). Shapes are read
// from the graph's values. Output shapes are unchanged.
Status canonicalize_window_attributes(ir::Graph& graph, ir::NodeId id);

}  // namespace kiln::passes
