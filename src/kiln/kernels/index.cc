// Reading by index: Shape, Size, Gather, GatherElements, GatherND. Data of any dtype moves as
// bytes (by element size); indices are i32 or i64, negative ones count from the end of their axis,
// and an index out of range is a Status naming the element. Shape, Size and Gather of known
// integer values propagate element values for shape computations.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "kiln/base/checked_math.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/index_util.h"

namespace kiln::kernels {

std::string coords_of(int64_t flat, std::span<const int64_t> dims) {
  std::vector<int64_t> coords(dims.size(), 0);
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] > 0) {
      coords[d] = flat % dims[d];
      flat /= dims[d];
    }
  }
  return fmt::format("[{}]", fmt::join(coords, ", "));
}

StatusOr<int64_t> normalize_index(int64_t value, int64_t size, size_t index, std::string_view name,
                                  int64_t flat, std::span<const int64_t> dims,
                                  std::string_view axis_what) {
  if (value < -size || value >= size) {
    return invalid_argument("{} element {} = {} is out of range [{}, {}] ({} of size {})",
                            input_label(index, name), coords_of(flat, dims), value, -size, size - 1,
                            axis_what, size);
  }
  return value < 0 ? value + size : value;
}

Status check_element_indices(const ValueType& data, const ValueType& indices, int64_t axis) {
  if (indices.shape.size() != data.shape.size()) {
    return invalid_argument("input 1 'indices' must have the rank of input 0 'data' ({}), got {}",
                            data.shape.size(), indices.shape.size());
  }
  for (size_t d = 0; d < data.shape.size(); ++d) {
    if (static_cast<int64_t>(d) == axis || indices.shape[d] == data.shape[d]) continue;
    auto got = indices.shape[d].constant_value();
    auto limit = data.shape[d].constant_value();
    if (!got || !limit) {
      return unimplemented(
          "input 1 'indices' dim {} ({}) must not exceed input 0 'data' dim {} "
          "({}), and kiln cannot prove it",
          d, indices.shape[d].to_string(), d, data.shape[d].to_string());
    }
    if (*got > *limit) {
      return invalid_argument("input 1 'indices' dim {} ({}) exceeds input 0 'data' dim {} ({})", d,
                              *got, d, *limit);
    }
  }
  return ok_status();
}

namespace {

// Writes fixed int64 values (Shape's dims, Size's count) decided at make().
class ConstantI64Kernel : public Kernel {
 public:
  explicit ConstantI64Kernel(std::vector<int64_t> values) : values_(std::move(values)) {}
  Status run(std::span<const ConstBuffer>, std::span<const MutableBuffer> out) const override {
    if (!values_.empty()) {
      std::memcpy(out[0].data, values_.data(), values_.size() * sizeof(int64_t));
    }
    return ok_status();
  }

 private:
  std::vector<int64_t> values_;
};

// Shape's [start, end) after ONNX's clamping (opset 15).
StatusOr<std::pair<int64_t, int64_t>> shape_range(const Attributes& a, int64_t rank) {
  KILN_ASSIGN_OR_RETURN(int64_t start, a.get_int("start", 0));
  KILN_ASSIGN_OR_RETURN(int64_t end, a.get_int("end", rank));
  auto clamp = [rank](int64_t v) {
    if (v < 0) v = v < -rank ? 0 : v + rank;
    return std::min(v, rank);
  };
  start = clamp(start);
  end = std::max(clamp(end), start);
  return std::pair{start, end};
}

Status infer_shape(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"start", "end"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "data"));
  auto rank = static_cast<int64_t>(x.shape.size());
  KILN_ASSIGN_OR_RETURN(auto range, shape_range(args.attributes, rank));
  std::vector<DimExpr> values(x.shape.begin() + range.first, x.shape.begin() + range.second);
  args.outputs = {ValueType{DType::kI64, Shape{DimExpr(range.second - range.first)}}};
  set_output_values(args, 0, std::move(values));
  return ok_status();
}

StatusOr<std::unique_ptr<Kernel>> make_shape(const MakeArgs& args) {
  ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(auto range,
                        shape_range(args.attributes, static_cast<int64_t>(dims.size())));
  return std::unique_ptr<Kernel>(std::make_unique<ConstantI64Kernel>(
      std::vector<int64_t>(dims.begin() + range.first, dims.begin() + range.second)));
}

Status infer_size(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "data"));
  args.outputs = {ValueType{DType::kI64, Shape{}}};
  set_output_values(args, 0, {symbolic_element_count(x.shape)});
  return ok_status();
}

StatusOr<std::unique_ptr<Kernel>> make_size(const MakeArgs& args) {
  ConcreteShape dims = args.input_dims(0);
  auto count = checked_product(dims);
  if (!count) return invalid_argument("the element count of {} overflows", shape_to_string(dims));
  return std::unique_ptr<Kernel>(std::make_unique<ConstantI64Kernel>(std::vector<int64_t>{*count}));
}

// Gather: out[o, j, i] = data[o, indices[j], i] with o over data's dims before the axis, j over
// indices' elements, i over data's dims after the axis.
class GatherKernel : public Kernel {
 public:
  GatherKernel(int64_t outer, int64_t axis_size, int64_t inner_bytes, ConcreteShape index_dims)
      : outer_(outer),
        axis_size_(axis_size),
        inner_bytes_(inner_bytes),
        index_dims_(std::move(index_dims)) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t count = product(index_dims_);
    std::vector<int64_t> rows(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j) {
      KILN_ASSIGN_OR_RETURN(rows[j], normalize_index(load_index(in[1], j), axis_size_, 1, "indices",
                                                     j, index_dims_, "the axis"));
    }
    const std::byte* src = in[0].data;
    std::byte* dst = out[0].data;
    if (inner_bytes_ == 0) return ok_status();
    parallel_for(outer_ * count, [&](int64_t t) {
      const int64_t o = t / count;
      const int64_t j = t % count;
      std::memcpy(dst + t * inner_bytes_, src + (o * axis_size_ + rows[j]) * inner_bytes_,
                  static_cast<size_t>(inner_bytes_));
    });
    return ok_status();
  }

 private:
  int64_t outer_, axis_size_, inner_bytes_;
  ConcreteShape index_dims_;
};

// Element values of Gather's output when data is a 1-D integer tensor with known values and the
// indices are known constants (e.g. Gather(Shape(x), 0) = N).
Status propagate_gather_values(InferArgs& args, const ValueType& data, const ValueType& indices) {
  if (data.shape.size() != 1 || indices.shape.size() > 1 || !is_integer(data.dtype)) {
    return ok_status();
  }
  // Shape computations are short vectors; a large integer table is data, not a shape.
  constexpr int64_t kMaxValues = 1024;
  auto length = data.shape[0].constant_value();
  auto picks_length =
      indices.shape.empty() ? std::optional<int64_t>(1) : indices.shape[0].constant_value();
  if (!length || *length > kMaxValues || !picks_length || *picks_length > kMaxValues) {
    return ok_status();
  }
  auto values = known_dim_values(args, 0);
  auto picks = known_dim_values(args, 1);
  if (!values || !picks) return ok_status();
  std::vector<DimExpr> out;
  const auto size = static_cast<int64_t>(values->size());
  for (size_t j = 0; j < picks->size(); ++j) {
    auto pick = (*picks)[j].constant_value();
    if (!pick) return ok_status();
    if (*pick < -size || *pick >= size) {
      return invalid_argument("input 1 'indices' element {} = {} is out of range [{}, {}]", j,
                              *pick, -size, size - 1);
    }
    out.push_back((*values)[*pick < 0 ? *pick + size : *pick]);
  }
  set_output_values(args, 0, std::move(out));
  return ok_status();
}

Status infer_gather(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"axis"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType data, required_input(args, 0, "data"));
  KILN_ASSIGN_OR_RETURN(ValueType indices, required_input(args, 1, "indices"));
  KILN_RETURN_IF_ERROR(check_dtype(data, 0, "data", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(indices, 1, "indices", kIndexDtypes));
  KILN_RETURN_IF_ERROR(check_rank_range(data, 0, "data", 1, 64));
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", 0));
  const auto rank = static_cast<int64_t>(data.shape.size());
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw_axis, rank, "attribute 'axis'"));
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), indices.shape.begin(), indices.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  args.outputs = {ValueType{data.dtype, std::move(out)}};
  return propagate_gather_values(args, data, indices);
}

StatusOr<std::unique_ptr<Kernel>> make_gather(const MakeArgs& args) {
  ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", 0));
  const auto rank = static_cast<int64_t>(dims.size());
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw_axis, rank, "attribute 'axis'"));
  const int64_t outer = product(std::span(dims).first(axis));
  const int64_t inner = product(std::span(dims).subspan(axis + 1));
  const auto element = static_cast<int64_t>(dtype_size(args.inputs[0]->dtype));
  return std::unique_ptr<Kernel>(
      std::make_unique<GatherKernel>(outer, dims[axis], inner * element, args.input_dims(1)));
}

Status infer_gather_elements(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"axis"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType data, required_input(args, 0, "data"));
  KILN_ASSIGN_OR_RETURN(ValueType indices, required_input(args, 1, "indices"));
  KILN_RETURN_IF_ERROR(check_dtype(data, 0, "data", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(indices, 1, "indices", kIndexDtypes));
  KILN_RETURN_IF_ERROR(check_rank_range(data, 0, "data", 1, 64));
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        normalize_axis(raw_axis, data.shape.size(), "attribute 'axis'"));
  KILN_RETURN_IF_ERROR(check_element_indices(data, indices, axis));
  args.outputs = {ValueType{data.dtype, indices.shape}};
  return ok_status();
}

// out[c] = data[c with c[axis] replaced by indices[c]], c over the indices' coordinates.
class GatherElementsKernel : public Kernel {
 public:
  GatherElementsKernel(ConcreteShape data_dims, ConcreteShape index_dims, int64_t axis,
                       size_t element_size)
      : data_dims_(std::move(data_dims)),
        index_dims_(std::move(index_dims)),
        axis_(axis),
        element_size_(element_size) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t count = product(index_dims_);
    std::vector<int64_t> offsets(static_cast<size_t>(count));
    const std::vector<int64_t> strides = row_major_strides(data_dims_);
    const auto rank = static_cast<int64_t>(index_dims_.size());
    std::vector<int64_t> coords(static_cast<size_t>(rank), 0);
    for (int64_t i = 0; i < count; ++i) {
      KILN_ASSIGN_OR_RETURN(int64_t row, normalize_index(load_index(in[1], i), data_dims_[axis_], 1,
                                                         "indices", i, index_dims_, "the axis"));
      int64_t offset = 0;
      for (int64_t d = 0; d < rank; ++d) offset += (d == axis_ ? row : coords[d]) * strides[d];
      offsets[i] = offset;
      for (int64_t d = rank; d-- > 0;) {
        if (++coords[d] < index_dims_[d]) break;
        coords[d] = 0;
      }
    }
    return visit_element_size(element_size_, [&]<typename U>() -> Status {
      const U* src = reinterpret_cast<const U*>(in[0].data);
      U* dst = reinterpret_cast<U*>(out[0].data);
      parallel_for(count, [&](int64_t i) { dst[i] = src[offsets[i]]; });
      return ok_status();
    });
  }

 private:
  ConcreteShape data_dims_, index_dims_;
  int64_t axis_;
  size_t element_size_;
};

StatusOr<std::unique_ptr<Kernel>> make_gather_elements(const MakeArgs& args) {
  ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw_axis, dims.size(), "attribute 'axis'"));
  return std::unique_ptr<Kernel>(std::make_unique<GatherElementsKernel>(
      dims, args.input_dims(1), axis, dtype_size(args.inputs[0]->dtype)));
}

Status infer_gather_nd(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"batch_dims"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType data, required_input(args, 0, "data"));
  KILN_ASSIGN_OR_RETURN(ValueType indices, required_input(args, 1, "indices"));
  KILN_RETURN_IF_ERROR(check_dtype(data, 0, "data", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(indices, 1, "indices", kIndexDtypes));
  KILN_RETURN_IF_ERROR(check_rank_range(data, 0, "data", 1, 64));
  KILN_RETURN_IF_ERROR(check_rank_range(indices, 1, "indices", 1, 64));
  const auto r = static_cast<int64_t>(data.shape.size());
  const auto q = static_cast<int64_t>(indices.shape.size());
  KILN_ASSIGN_OR_RETURN(int64_t b, args.attributes.get_int("batch_dims", 0));
  if (b < 0 || b >= std::min(q, r)) {
    return invalid_argument(
        "attribute 'batch_dims' = {} must be in [0, {}) (the smaller rank "
        "of data and indices)",
        b, std::min(q, r));
  }
  for (int64_t d = 0; d < b; ++d) {
    KILN_RETURN_IF_ERROR(check_dims_equal(indices.shape[d], data.shape[d],
                                          fmt::format("input 1 'indices' batch dim {}", d)));
  }
  KILN_ASSIGN_OR_RETURN(int64_t k,
                        require_constant_dim(indices.shape.back(), "input 1 'indices' last dim"));
  if (k < 1 || k > r - b) {
    return invalid_argument(
        "input 1 'indices' last dim = {} must be in [1, {}] (data rank {} "
        "minus batch_dims {})",
        k, r - b, r, b);
  }
  Shape out(indices.shape.begin(), indices.shape.end() - 1);
  out.insert(out.end(), data.shape.begin() + b + k, data.shape.end());
  args.outputs = {ValueType{data.dtype, std::move(out)}};
  return ok_status();
}

// out[t] = data[batch(t)][indices[t, 0..k)] (a slice of the trailing data dims).
class GatherNDKernel : public Kernel {
 public:
  GatherNDKernel(ConcreteShape data_dims, ConcreteShape index_dims, int64_t batch_dims,
                 size_t element_size)
      : data_dims_(std::move(data_dims)),
        index_dims_(std::move(index_dims)),
        b_(batch_dims),
        element_size_(element_size) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t k = index_dims_.back();
    const int64_t batches = product(std::span(data_dims_).first(b_));
    const int64_t tuples = product(index_dims_) / k;  // k >= 1 (infer)
    const int64_t per_batch = batches == 0 ? 0 : tuples / batches;
    const int64_t slice = product(std::span(data_dims_).subspan(b_ + k));
    const int64_t batch_block = product(std::span(data_dims_).subspan(b_));
    const std::vector<int64_t> strides = row_major_strides(data_dims_);
    std::vector<int64_t> offsets(static_cast<size_t>(tuples));
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = (t / per_batch) * batch_block;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t flat = t * k + j;
        KILN_ASSIGN_OR_RETURN(
            int64_t v, normalize_index(load_index(in[1], flat), data_dims_[b_ + j], 1, "indices",
                                       flat, index_dims_, fmt::format("data axis {}", b_ + j)));
        offset += v * strides[b_ + j];
      }
      offsets[t] = offset;
    }
    const auto bytes = static_cast<int64_t>(element_size_) * slice;
    if (bytes == 0) return ok_status();
    parallel_for(tuples, [&](int64_t t) {
      std::memcpy(out[0].data + t * bytes, in[0].data + offsets[t] * element_size_,
                  static_cast<size_t>(bytes));
    });
    return ok_status();
  }

 private:
  ConcreteShape data_dims_, index_dims_;
  int64_t b_;
  size_t element_size_;
};

StatusOr<std::unique_ptr<Kernel>> make_gather_nd(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(int64_t b, args.attributes.get_int("batch_dims", 0));
  return std::unique_ptr<Kernel>(std::make_unique<GatherNDKernel>(
      args.input_dims(0), args.input_dims(1), b, dtype_size(args.inputs[0]->dtype)));
}

}  // namespace

void register_index_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"Shape", infer_shape, make_shape});
  table.push_back(OpDef{"Size", infer_size, make_size});
  table.push_back(OpDef{"Gather", infer_gather, make_gather});
  table.push_back(OpDef{"GatherElements", infer_gather_elements, make_gather_elements});
  table.push_back(OpDef{"GatherND", infer_gather_nd, make_gather_nd});
}

}  // namespace kiln::kernels
