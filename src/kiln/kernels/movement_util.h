// Helpers shared by the data movement families (movement.cc, slicing.cc, layout.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/base/checked_math.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {

// slicing.cc: Concat, Split, Slice. layout.cc: Tile, Pad, DepthToSpace, SpaceToDepth, Trilu.
// Both are registered by register_movement_kernels.
void register_slicing_kernels(std::vector<OpDef>& table);
void register_layout_kernels(std::vector<OpDef>& table);

// InvalidArgument when the constant dims of `shape` multiply to more than INT64_MAX elements
// ("the output shape [...] has more than 2^63 elements"); symbolic dims are checked at run time.
inline Status check_element_count(const Shape& shape, std::string_view what) {
  for (const DimExpr& d : shape) {
    if (auto v = d.constant_value(); v && *v < 0) {
      return invalid_argument("{} shape {} has negative dim {}", what, shape_to_string(shape), *v);
    }
    if (d == DimExpr(0)) return ok_status();
  }
  int64_t n = 1;
  for (const DimExpr& d : shape) {
    auto v = d.constant_value();
    if (!v) continue;
    auto next = checked_mul(n, *v);
    if (!next) {
      return invalid_argument("{} shape {} has more than 2^63 elements", what,
                              shape_to_string(shape));
    }
    n = *next;
  }
  return ok_status();
}

// The values of `values` (input `index` 'name') as integers; Unimplemented naming the element
// when one is symbolic.
inline StatusOr<std::vector<int64_t>> constant_elements(const std::vector<DimExpr>& values,
                                                        size_t index, std::string_view name) {
  std::vector<int64_t> out;
  out.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    auto v = values[i].constant_value();
    if (!v) {
      return unimplemented("{} element {} is symbolic ('{}'); kiln needs a constant",
                           input_label(index, name), i, values[i].to_string());
    }
    out.push_back(*v);
  }
  return out;
}

// The element values of required input `index` (input_dim_values, absent being an error).
inline StatusOr<std::vector<DimExpr>> required_dim_values(const InferArgs& args, size_t index,
                                                          std::string_view name) {
  StatusOr<std::optional<std::vector<DimExpr>>> values = input_dim_values(args, index, name);
  if (!values.ok()) return values.status();
  std::optional<std::vector<DimExpr>>& v = *values;
  if (!v.has_value()) return invalid_argument("{} is required", input_label(index, name));
  return std::vector<DimExpr>(std::move(*v));
}

// Re-creates infer's view of a node from what make() was given, for ops whose kernel needs input
// values (Slice's starts, Pad's pads) that infer already validated.
inline InferArgs infer_args_of(const MakeArgs& args) {
  return InferArgs{
      args.attributes, args.inputs, args.constants, args.outputs.size(), {}, {}, {}, {}, {}, {}};
}

}  // namespace kiln::kernels
