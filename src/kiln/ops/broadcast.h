// Numpy multidirectional broadcasting, symbolic (for shape inference) and concrete (for reference
// kernels).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/shape/shape.h"

namespace kiln::ops {

// Broadcasts shapes right-aligned. Per dim: equal DimExprs match; a constant 1 takes the other
// dim. Anything else is an error naming the inputs (`labels`, one per shape) and the dims:
// InvalidArgument for two different constants, Unimplemented when a symbol is involved
// (e.g. N against 5 or N against M), since kiln cannot prove the result.
StatusOr<Shape> broadcast_shapes(std::span<const Shape> shapes,
                                 std::span<const std::string> labels);

// For an `input` shape that broadcasts to `output`: the flat input index of every output element,
// in output row-major order.
std::vector<int64_t> broadcast_index_map(const ConcreteShape& input, const ConcreteShape& output);

}  // namespace kiln::ops
