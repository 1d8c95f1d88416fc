// Data-dependent selections: NonZero and Compress. Their output size is a count of nonzero
// elements: a number when the counted input is a constant, otherwise a size the runtime binds
// from the data before the node runs (InferArgs::data_dim, OpDef::data_sizes). The kernels
// are made for one count and report a Status if the data does not match it.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {
namespace {

// The number of nonzero elements among the first `limit` of `t` (NaN counts; -0.0 does not).
int64_t count_nonzero(const Tensor& t, int64_t limit) {
  int64_t n = 0;
  for (int64_t i = 0; i < std::min(limit, t.element_count()); ++i) {
    if (is_float(t.dtype())) {
      const double v = element_as_double(t, i);
      n += v != 0 || std::isnan(v) ? 1 : 0;
    } else {
      n += element_as_int64(t, i) != 0 ? 1 : 0;
    }
  }
  return n;
}

// The nonzero count of input `index`'s first `limit` elements: a number when the input is a
// constant, else the op's data-dependent size `size_index`.
StatusOr<DimExpr> count_of_nonzero(InferArgs& args, size_t index, std::string_view name,
                                   size_t size_index) {
  if (const Tensor* t = constant_input(args, index)) {
    return DimExpr(count_nonzero(*t, t->element_count()));
  }
  if (!args.data_dim) {
    return unimplemented(
        "the output size depends on the data of {}, which must be a constant "
        "here",
        input_label(index, name));
  }
  return args.data_dim(size_index);
}

Status infer_nonzero(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_rank_range(x, 0, "X", 1, 64));
  KILN_ASSIGN_OR_RETURN(DimExpr count, count_of_nonzero(args, 0, "X", 0));
  args.outputs = {ValueType{
      DType::kI64, Shape{DimExpr(static_cast<int64_t>(x.shape.size())), std::move(count)}}};
  return ok_status();
}

StatusOr<std::vector<int64_t>> nonzero_sizes(const Attributes&, std::span<const Tensor> inputs) {
  if (inputs.empty() || inputs[0].empty_storage()) {
    return invalid_argument("input 0 'X' is missing");
  }
  return std::vector<int64_t>{count_nonzero(inputs[0], inputs[0].element_count())};
}

// out[d, j] = coordinate d of the j-th nonzero element (row-major order).
class NonZeroKernel : public Kernel {
 public:
  NonZeroKernel(ConcreteShape dims, int64_t count) : dims_(std::move(dims)), count_(count) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t n = product(dims_);
    const auto rank = static_cast<int64_t>(dims_.size());
    std::vector<int64_t> coords(static_cast<size_t>(rank), 0);
    int64_t* y = out[0].as<int64_t>();
    int64_t j = 0;
    bool more = false;
    Status status = visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      const T* x = in[0].as<T>();
      for (int64_t i = 0; i < n; ++i) {
        const auto v = load(x, i);
        bool nonzero;
        if constexpr (std::is_floating_point_v<decltype(v)>) {
          nonzero = v != 0 || std::isnan(v);
        } else {
          nonzero = static_cast<bool>(v);
        }
        if (nonzero) {
          if (j == count_) {
            more = true;
            break;
          }
          for (int64_t d = 0; d < rank; ++d) y[d * count_ + j] = coords[d];
          ++j;
        }
        for (int64_t d = rank; d-- > 0;) {
          if (++coords[d] < dims_[d]) break;
          coords[d] = 0;
        }
      }
      return ok_status();
    });
    KILN_RETURN_IF_ERROR(status);
    if (more || j != count_) {
      return invalid_argument(
          "input 0 'X' has {} nonzero elements where the compiled output holds "
          "{}",
          more ? "more" : fmt::format("{}", j), count_);
    }
    return ok_status();
  }

 private:
  ConcreteShape dims_;
  int64_t count_;
};

StatusOr<std::unique_ptr<Kernel>> make_nonzero(const MakeArgs& args) {
  return std::unique_ptr<Kernel>(
      std::make_unique<NonZeroKernel>(args.input_dims(0), args.output_dims(0)[1]));
}

// Compress's axis (nullopt: the flattened input).
StatusOr<std::optional<int64_t>> compress_axis(const Attributes& a, int64_t rank) {
  if (!a.has("axis")) return std::optional<int64_t>();
  KILN_ASSIGN_OR_RETURN(int64_t raw, a.get_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw, rank, "attribute 'axis'"));
  return std::optional<int64_t>(axis);
}

Status infer_compress(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"axis"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_ASSIGN_OR_RETURN(ValueType condition, required_input(args, 1, "condition"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(condition, 1, "condition", {DType::kBool}));
  KILN_RETURN_IF_ERROR(check_rank(condition, 1, "condition", 1));
  KILN_RETURN_IF_ERROR(check_rank_range(x, 0, "input", 1, 64));
  KILN_ASSIGN_OR_RETURN(auto axis, compress_axis(args.attributes, x.shape.size()));
  const DimExpr length = axis ? x.shape[*axis] : symbolic_element_count(x.shape);
  if (auto limit = length.constant_value(), n = condition.shape[0].constant_value();
      limit && n && *n > *limit) {
    return invalid_argument(
        "input 1 'condition' has {} elements, more than the {} it selects "
        "from",
        *n, *limit);
  }
  KILN_ASSIGN_OR_RETURN(DimExpr count, count_of_nonzero(args, 1, "condition", 0));
  Shape out = axis ? x.shape : Shape{};
  if (axis) {
    out[*axis] = count;
  } else {
    out = {count};
  }
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

StatusOr<std::vector<int64_t>> compress_sizes(const Attributes& attributes,
                                              std::span<const Tensor> inputs) {
  if (inputs.size() < 2 || inputs[0].empty_storage() || inputs[1].empty_storage()) {
    return invalid_argument("Compress needs inputs 0 'input' and 1 'condition'");
  }
  KILN_ASSIGN_OR_RETURN(auto axis, compress_axis(attributes, inputs[0].rank()));
  const int64_t length = axis ? inputs[0].shape()[*axis] : inputs[0].element_count();
  if (inputs[1].element_count() > length) {
    return invalid_argument(
        "input 1 'condition' has {} elements, more than the {} it selects "
        "from",
        inputs[1].element_count(), length);
  }
  return std::vector<int64_t>{count_nonzero(inputs[1], length)};
}

// Copies the slices of `input` along the axis whose condition element is true.
class CompressKernel : public Kernel {
 public:
  CompressKernel(int64_t outer, int64_t axis_size, int64_t inner_bytes, int64_t count)
      : outer_(outer), axis_size_(axis_size), inner_bytes_(inner_bytes), count_(count) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t n = in[1].element_count();
    std::vector<int64_t> picked;
    for (int64_t i = 0; i < n && i < axis_size_; ++i) {
      if (in[1].as<uint8_t>()[i] != 0) picked.push_back(i);
    }
    if (static_cast<int64_t>(picked.size()) != count_) {
      return invalid_argument(
          "input 1 'condition' selects {} elements where the compiled output "
          "holds {}",
          picked.size(), count_);
    }
    if (inner_bytes_ == 0) return ok_status();
    parallel_for(outer_ * count_, [&](int64_t t) {
      const int64_t o = t / count_;
      std::memcpy(out[0].data + t * inner_bytes_,
                  in[0].data + (o * axis_size_ + picked[t % count_]) * inner_bytes_,
                  static_cast<size_t>(inner_bytes_));
    });
    return ok_status();
  }

 private:
  int64_t outer_, axis_size_, inner_bytes_, count_;
};

StatusOr<std::unique_ptr<Kernel>> make_compress(const MakeArgs& args) {
  ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(auto axis, compress_axis(args.attributes, dims.size()));
  const auto element = static_cast<int64_t>(dtype_size(args.inputs[0]->dtype));
  const int64_t count = args.output_dims(0)[axis ? *axis : 0];
  if (!axis) {
    return std::unique_ptr<Kernel>(
        std::make_unique<CompressKernel>(1, product(dims), element, count));
  }
  return std::unique_ptr<Kernel>(std::make_unique<CompressKernel>(
      product(std::span(dims).first(*axis)), dims[*axis],
      product(std::span(dims).subspan(*axis + 1)) * element, count));
}

}  // namespace

void register_select_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"NonZero", infer_nonzero, make_nonzero, 0, nonzero_sizes});
  table.push_back(OpDef{"Compress", infer_compress, make_compress, 0, compress_sizes});
}

}  // namespace kiln::kernels
