#include "kiln/ops/broadcast.h"

#include "kiln/ops/op_util.h"

namespace kiln::ops {

StatusOr<Shape> broadcast_shapes(std::span<const Shape> shapes,
                                 std::span<const std::string> labels) {
  KILN_CHECK(shapes.size() == labels.size());
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, DimExpr(1));
  // The input that set each output dim, for error messages.
  std::vector<size_t> source(rank, 0);
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Shape& s = shapes[k];
    size_t offset = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      const DimExpr& dim = s[i];
      DimExpr& acc = out[offset + i];
      if (dim == acc || dim == DimExpr(1)) continue;
      if (acc == DimExpr(1)) {
        acc = dim;
        source[offset + i] = k;
        continue;
      }
      std::string message = fmt::format(
          "cannot broadcast {} shape {} with {} shape {}: dim {} of the result is {} vs {}",
          labels[source[offset + i]], shape_to_string(shapes[source[offset + i]]), labels[k],
          shape_to_string(s), offset + i, acc.to_string(), dim.to_string());
      if (acc.is_constant() && dim.is_constant()) {
        return Status(StatusCode::kInvalidArgument, message);
      }
      return Status(StatusCode::kUnimplemented, message + " (not provably equal)");
    }
  }
  return out;
}

std::vector<int64_t> broadcast_index_map(const ConcreteShape& input, const ConcreteShape& output) {
  KILN_CHECK(input.size() <= output.size());
  int64_t count = 1;
  for (int64_t d : output) count *= d;
  std::vector<int64_t> map(static_cast<size_t>(count));
  if (count == 0) return map;
  size_t rank = output.size();
  size_t offset = rank - input.size();
  // Stride of each output dim in the input; 0 where the input broadcasts.
  std::vector<int64_t> in_strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = input.size(); i-- > 0;) {
    in_strides[offset + i] = input[i] == 1 ? 0 : stride;
    stride *= input[i];
  }
  std::vector<int64_t> index(rank, 0);
  int64_t pos = 0;
  for (int64_t flat = 0; flat < count; ++flat) {
    map[static_cast<size_t>(flat)] = pos;
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < output[d]) {
        pos += in_strides[d];
        break;
      }
      pos -= in_strides[d] * (output[d] - 1);
      index[d] = 0;
    }
  }
  return map;
}

}  // namespace kiln::ops
