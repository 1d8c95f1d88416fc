// Writing by index: ScatterND and ScatterElements (the deprecated Scatter is converted to
// ScatterElements by the importer). The output starts as a copy of data; updates are then applied
// one after another in the row-major order of the indices, so duplicate indices give a
// deterministic result (the last write wins for reduction "none"). Every index is validated
// before anything is applied.
#include <cstring>
#include <type_traits>

#include <fmt/format.h>

#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/index_util.h"

namespace kiln::kernels {
namespace {

enum class Reduction { kNone, kAdd, kMul };

StatusOr<Reduction> read_reduction(const Attributes& a) {
  KILN_ASSIGN_OR_RETURN(std::string r, a.get_string("reduction", "none"));
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  return unimplemented("attribute 'reduction' = '{}' is not supported (none, add, mul)", r);
}

// a op b in T's compute type; integers wrap (two's complement), bool add/mul are or/and.
template <typename T>
compute_t<T> combine(compute_t<T> a, compute_t<T> b, Reduction r) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<C, bool>) {
    return r == Reduction::kAdd ? (a || b) : (a && b);
  } else if constexpr (std::is_integral_v<C>) {
    const auto ua = static_cast<uint64_t>(a);
    const auto ub = static_cast<uint64_t>(b);
    return static_cast<C>(r == Reduction::kAdd ? ua + ub : ua * ub);
  } else {
    return r == Reduction::kAdd ? a + b : a * b;
  }
}

// Copies data to the output, then for each k in order applies updates[k * slice, +slice) at
// output element offsets[k].
Status apply_updates(const ConstBuffer& data, const ConstBuffer& updates, const MutableBuffer& out,
                     std::span<const int64_t> offsets, int64_t slice, Reduction reduction) {
  const size_t element = dtype_size(data.dtype);
  const auto total = static_cast<size_t>(data.element_count()) * element;
  if (total > 0) std::memcpy(out.data, data.data, total);
  if (slice == 0) return ok_status();
  if (reduction == Reduction::kNone) {
    const auto bytes = static_cast<size_t>(slice) * element;
    for (size_t k = 0; k < offsets.size(); ++k) {
      std::memcpy(out.data + offsets[k] * element, updates.data + k * bytes, bytes);
    }
    return ok_status();
  }
  return visit_dtype(data.dtype, [&]<typename T>() -> Status {
    const T* u = updates.as<T>();
    T* y = out.as<T>();
    for (size_t k = 0; k < offsets.size(); ++k) {
      T* dst = y + offsets[k];
      const T* src = u + static_cast<int64_t>(k) * slice;
      // Elements of one slice are distinct: in parallel is still deterministic.
      parallel_for(slice, [&](int64_t i) {
        store(dst, i, combine<T>(load(dst, i), load(src, i), reduction));
      });
    }
    return ok_status();
  });
}

Status infer_scatter_nd(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"reduction"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3));
  KILN_ASSIGN_OR_RETURN(ValueType data, required_input(args, 0, "data"));
  KILN_ASSIGN_OR_RETURN(ValueType indices, required_input(args, 1, "indices"));
  KILN_ASSIGN_OR_RETURN(ValueType updates, required_input(args, 2, "updates"));
  KILN_RETURN_IF_ERROR(check_dtype(data, 0, "data", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(indices, 1, "indices", kIndexDtypes));
  KILN_RETURN_IF_ERROR(check_same_dtype(updates, 2, "updates", data.dtype, "input 0 'data'"));
  KILN_RETURN_IF_ERROR(read_reduction(args.attributes).status());
  KILN_RETURN_IF_ERROR(check_rank_range(data, 0, "data", 1, 64));
  KILN_RETURN_IF_ERROR(check_rank_range(indices, 1, "indices", 1, 64));
  const auto r = static_cast<int64_t>(data.shape.size());
  KILN_ASSIGN_OR_RETURN(int64_t k,
                        require_constant_dim(indices.shape.back(), "input 1 'indices' last dim"));
  if (k < 1 || k > r) {
    return invalid_argument("input 1 'indices' last dim = {} must be in [1, {}] (data rank)", k, r);
  }
  Shape want(indices.shape.begin(), indices.shape.end() - 1);
  want.insert(want.end(), data.shape.begin() + k, data.shape.end());
  if (updates.shape.size() != want.size()) {
    return invalid_argument(
        "input 2 'updates' must have shape {} (indices.shape[:-1] + "
        "data.shape[{}:]), got {}",
        shape_to_string(want), k, shape_to_string(updates.shape));
  }
  for (size_t d = 0; d < want.size(); ++d) {
    KILN_RETURN_IF_ERROR(
        check_dims_equal(updates.shape[d], want[d], fmt::format("input 2 'updates' dim {}", d)));
  }
  args.outputs = {data};
  return ok_status();
}

class ScatterNDKernel : public Kernel {
 public:
  ScatterNDKernel(ConcreteShape data_dims, ConcreteShape index_dims, Reduction reduction)
      : data_dims_(std::move(data_dims)),
        index_dims_(std::move(index_dims)),
        reduction_(reduction) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t k = index_dims_.back();
    const int64_t tuples = product(index_dims_) / k;  // k >= 1 (infer)
    const int64_t slice = product(std::span(data_dims_).subspan(k));
    const std::vector<int64_t> strides = row_major_strides(data_dims_);
    std::vector<int64_t> offsets(static_cast<size_t>(tuples));
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t flat = t * k + j;
        KILN_ASSIGN_OR_RETURN(
            int64_t v, normalize_index(load_index(in[1], flat), data_dims_[j], 1, "indices", flat,
                                       index_dims_, fmt::format("data axis {}", j)));
        offset += v * strides[j];
      }
      offsets[t] = offset;
    }
    return apply_updates(in[0], in[2], out[0], offsets, slice, reduction_);
  }

 private:
  ConcreteShape data_dims_, index_dims_;
  Reduction reduction_;
};

StatusOr<std::unique_ptr<Kernel>> make_scatter_nd(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(Reduction reduction, read_reduction(args.attributes));
  return std::unique_ptr<Kernel>(
      std::make_unique<ScatterNDKernel>(args.input_dims(0), args.input_dims(1), reduction));
}

Status infer_scatter_elements(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"axis", "reduction"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3));
  KILN_ASSIGN_OR_RETURN(ValueType data, required_input(args, 0, "data"));
  KILN_ASSIGN_OR_RETURN(ValueType indices, required_input(args, 1, "indices"));
  KILN_ASSIGN_OR_RETURN(ValueType updates, required_input(args, 2, "updates"));
  KILN_RETURN_IF_ERROR(check_dtype(data, 0, "data", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(indices, 1, "indices", kIndexDtypes));
  KILN_RETURN_IF_ERROR(check_same_dtype(updates, 2, "updates", data.dtype, "input 0 'data'"));
  KILN_RETURN_IF_ERROR(read_reduction(args.attributes).status());
  KILN_RETURN_IF_ERROR(check_rank_range(data, 0, "data", 1, 64));
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        normalize_axis(raw_axis, data.shape.size(), "attribute 'axis'"));
  KILN_RETURN_IF_ERROR(check_element_indices(data, indices, axis));
  if (updates.shape.size() != indices.shape.size()) {
    return invalid_argument(
        "input 2 'updates' must have the shape of input 1 'indices' ({}), "
        "got {}",
        shape_to_string(indices.shape), shape_to_string(updates.shape));
  }
  for (size_t d = 0; d < indices.shape.size(); ++d) {
    KILN_RETURN_IF_ERROR(check_dims_equal(updates.shape[d], indices.shape[d],
                                          fmt::format("input 2 'updates' dim {}", d)));
  }
  args.outputs = {data};
  return ok_status();
}

class ScatterElementsKernel : public Kernel {
 public:
  ScatterElementsKernel(ConcreteShape data_dims, ConcreteShape index_dims, int64_t axis,
                        Reduction reduction)
      : data_dims_(std::move(data_dims)),
        index_dims_(std::move(index_dims)),
        axis_(axis),
        reduction_(reduction) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t count = product(index_dims_);
    const std::vector<int64_t> strides = row_major_strides(data_dims_);
    const auto rank = static_cast<int64_t>(index_dims_.size());
    std::vector<int64_t> offsets(static_cast<size_t>(count));
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
    return apply_updates(in[0], in[2], out[0], offsets, 1, reduction_);
  }

 private:
  ConcreteShape data_dims_, index_dims_;
  int64_t axis_;
  Reduction reduction_;
};

StatusOr<std::unique_ptr<Kernel>> make_scatter_elements(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(Reduction reduction, read_reduction(args.attributes));
  ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw_axis, dims.size(), "attribute 'axis'"));
  return std::unique_ptr<Kernel>(std::make_unique<ScatterElementsKernel>(
      std::move(dims), args.input_dims(1), axis, reduction));
}

}  // namespace

void register_scatter_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"ScatterND", infer_scatter_nd, make_scatter_nd});
  table.push_back(OpDef{"ScatterElements", infer_scatter_elements, make_scatter_elements});
}

}  // namespace kiln::kernels
