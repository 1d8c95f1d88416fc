#include "kiln/shape/shape.h"

#include "kiln/base/checked_math.h"

namespace kiln {

std::string shape_to_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + shape[i].to_string();
  return out + "]";
}

std::string shape_to_string(const ConcreteShape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

StatusOr<Shape> parse_shape(std::string_view text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    return invalid_argument("bad shape '{}': expected [d0,d1,...]", text);
  }
  Shape shape;
  std::string_view body = text.substr(1, text.size() - 2);
  if (body.empty()) return shape;
  // Commas inside a dim expression occur only within quotes or parentheses (min(a, b)).
  size_t start = 0;
  bool quoted = false;
  int depth = 0;
  for (size_t i = 0; i <= body.size(); ++i) {
    if (quoted && i < body.size() && body[i] == '\\') {
      ++i;  // an escaped character inside a quoted symbol never ends it
      continue;
    }
    if (i < body.size() && body[i] == '"') quoted = !quoted;
    if (!quoted && i < body.size()) depth += body[i] == '(' ? 1 : body[i] == ')' ? -1 : 0;
    if (i == body.size() || (!quoted && depth == 0 && body[i] == ',')) {
      KILN_ASSIGN_OR_RETURN(DimExpr dim, parse_dim_expr(body.substr(start, i - start)));
      shape.push_back(std::move(dim));
      start = i + 1;
    }
  }
  return shape;
}

Shape shape_from_concrete(const ConcreteShape& dims) { return Shape(dims.begin(), dims.end()); }

StatusOr<ConcreteShape> evaluate_shape(const Shape& shape, const Bindings& bindings) {
  ConcreteShape out;
  out.reserve(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t value, shape[i].evaluate(bindings));
    if (value < 0) {
      return invalid_argument("dim {} of shape {} evaluates to {}", i, shape_to_string(shape),
                              value);
    }
    out.push_back(value);
  }
  return out;
}

StatusOr<int64_t> element_count(const ConcreteShape& shape) {
  auto count = checked_product(shape);
  if (!count) return out_of_range("element count of shape {} overflows", shape_to_string(shape));
  return *count;
}

DimExpr symbolic_element_count(const Shape& shape) {
  DimExpr total(1);
  for (const DimExpr& dim : shape) total = total * dim;
  return total;
}

bool is_static(const Shape& shape) {
  for (const DimExpr& dim : shape) {
    if (!dim.is_constant()) return false;
  }
  return true;
}

}  // namespace kiln
