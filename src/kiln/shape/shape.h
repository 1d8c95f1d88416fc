// Shape: a tensor's dims as DimExprs, with helpers to evaluate them under symbol bindings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/base/tensor.h"
#include "kiln/shape/dim_expr.h"

namespace kiln {

using Shape = std::vector<DimExpr>;
// ConcreteShape comes from kiln/base/tensor.h.

// "[N,3,224,224]"
std::string shape_to_string(const Shape& shape);
// "[8,3,224,224]"
std::string shape_to_string(const ConcreteShape& shape);
// Parses the form written by shape_to_string(Shape).
StatusOr<Shape> parse_shape(std::string_view text);

Shape shape_from_concrete(const ConcreteShape& dims);
// Evaluates every dim; error if a symbol is unbound or a dim is negative.
StatusOr<ConcreteShape> evaluate_shape(const Shape& shape, const Bindings& bindings);
// Number of elements, overflow-checked; error on overflow or a negative dim.
StatusOr<int64_t> element_count(const ConcreteShape& shape);
// Product of the dims as an expression.
DimExpr symbolic_element_count(const Shape& shape);
// All dims constant.
bool is_static(const Shape& shape);

}  // namespace kiln
