#include "kiln/kernels/broadcast.h"

#include <algorithm>

#include "kiln/base/checked_math.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {

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
      // Dims equal only at run time ([N,S] + [N,T], a U-Net skip's H against 2*floor(H/2)):
      // assumed equal, the result taking the simpler form. A size of 1 where the other is not
      // breaks the assumption: the runtime refuses it rather than broadcasting.
      KILN_RETURN_IF_ERROR(assume_equal(acc, dim, message));
      if (dim.is_constant() ||
          (!acc.is_constant() && dim.to_string().size() < acc.to_string().size())) {
        acc = dim;
        source[offset + i] = k;
      }
    }
  }
  return out;
}

ConcreteShape broadcast_concrete(const ConcreteShape& a, const ConcreteShape& b) {
  ConcreteShape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t from_end = out.size() - i;
    const int64_t da = from_end <= a.size() ? a[a.size() - from_end] : 1;
    const int64_t db = from_end <= b.size() ? b[b.size() - from_end] : 1;
    out[i] = da == 1 ? db : (db == 1 ? da : std::max(da, db));
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

StatusOr<BroadcastIter> BroadcastIter::make(std::span<const ConcreteShape> inputs,
                                            const ConcreteShape& output) {
  BroadcastIter it;
  it.inputs_ = inputs.size();
  it.count_ = 1;
  for (int64_t d : output) {
    if (d < 0) return invalid_argument("negative output dim {}", d);
    auto count = checked_mul(it.count_, d);
    if (!count) return invalid_argument("output shape {} is too large", shape_to_string(output));
    it.count_ = *count;
  }
  const size_t rank = output.size();
  // Full-rank strides per input, 0 where the input broadcasts.
  std::vector<std::vector<int64_t>> full(inputs.size(), std::vector<int64_t>(rank, 0));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const ConcreteShape& in = inputs[k];
    if (in.size() > rank) {
      return invalid_argument("input {} shape {} has a higher rank than the output shape {}", k,
                              shape_to_string(in), shape_to_string(output));
    }
    const size_t offset = rank - in.size();
    int64_t stride = 1;
    for (size_t i = in.size(); i-- > 0;) {
      if (in[i] != 1 && in[i] != output[offset + i]) {
        return invalid_argument("input {} shape {} does not broadcast to the output shape {}", k,
                                shape_to_string(in), shape_to_string(output));
      }
      full[k][offset + i] = in[i] == 1 ? 0 : stride;
      stride *= in[i];
    }
  }
  // Drop dims of size 1, then merge dim d into its successor where every input's layout allows.
  std::vector<size_t> kept;
  for (size_t d = 0; d < rank; ++d) {
    if (output[d] != 1) kept.push_back(d);
  }
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides(inputs.size());
  for (size_t d : kept) {
    bool merge = !dims.empty();
    for (size_t k = 0; merge && k < inputs.size(); ++k) {
      merge = strides[k].back() == full[k][d] * output[d];
    }
    if (merge) {
      dims.back() *= output[d];
      for (size_t k = 0; k < inputs.size(); ++k) strides[k].back() = full[k][d];
    } else {
      dims.push_back(output[d]);
      for (size_t k = 0; k < inputs.size(); ++k) strides[k].push_back(full[k][d]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (auto& s : strides) s.push_back(0);
  }
  it.dims_ = dims;
  it.strides_.reserve(inputs.size() * dims.size());
  for (const auto& s : strides) it.strides_.insert(it.strides_.end(), s.begin(), s.end());
  return it;
}

}  // namespace kiln::kernels
