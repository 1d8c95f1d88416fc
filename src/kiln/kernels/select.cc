// Data-dependent selections: NonZero, Compress and Unique. Their output size is a count of
// nonzero elements or of distinct values: a number when the counted input is a constant,
// otherwise a size the runtime binds from the data before the node runs (InferArgs::data_dim,
// OpDef::data_sizes). The kernels are made for one count and report a Status if the data does not
// match it.
//
// Unique (opset 11) compares elements (or, with 'axis', the slices along it, lexicographically
// in row-major order) by value: -0.0 equals 0.0, every NaN equals every other NaN and sorts after
// all numbers (numpy.unique's rules). sorted=1 orders the distinct values ascending, sorted=0 by
// first occurrence; Y holds each value's first occurrence, and the outputs indices,
// inverse_indices and counts are i64.
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

// Unique's axis (nullopt: the flattened input).
StatusOr<std::optional<int64_t>> unique_axis(const Attributes& a, int64_t rank) {
  if (!a.has("axis")) return std::optional<int64_t>();
  KILN_ASSIGN_OR_RETURN(int64_t raw, a.get_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw, rank, "attribute 'axis'"));
  return std::optional<int64_t>(axis);
}

StatusOr<bool> unique_sorted(const Attributes& a) {
  KILN_ASSIGN_OR_RETURN(int64_t v, a.get_int("sorted", 1));
  if (v != 0 && v != 1) return invalid_argument("attribute 'sorted' must be 0 or 1, got {}", v);
  return v == 1;
}

// The distinct slices of a tensor along an axis (or its elements): per group (in output order)
// the first slice it holds and its count, and per slice its group.
struct UniqueGroups {
  std::vector<int64_t> first, counts, inverse;
};

// Slices [outer, length, inner] of `x`: slice j is the elements x[o, j, i] in (o, i) order.
UniqueGroups group_unique(const Tensor& x, std::optional<int64_t> axis, bool sorted) {
  const ConcreteShape& dims = x.shape();
  const int64_t length = axis ? dims[*axis] : x.element_count();
  const int64_t outer = axis ? product(std::span(dims).first(*axis)) : 1;
  const int64_t inner = axis ? product(std::span(dims).subspan(*axis + 1)) : 1;
  std::vector<int64_t> order(static_cast<size_t>(length));
  for (int64_t j = 0; j < length; ++j) order[j] = j;
  // compare(a, b): -1, 0 or 1 as slice a orders before, with or after slice b.
  auto compare = [&](int64_t a, int64_t b) {
    return visit_dtype(x.dtype(), [&]<typename T>() -> int {
      const T* p = reinterpret_cast<const T*>(x.data());
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const auto va = load(p, (o * length + a) * inner + i);
          const auto vb = load(p, (o * length + b) * inner + i);
          if constexpr (std::is_floating_point_v<decltype(va)>) {
            const bool na = std::isnan(va), nb = std::isnan(vb);
            if (na || nb) {
              if (na && nb) continue;
              return na ? 1 : -1;
            }
          }
          if (va < vb) return -1;
          if (vb < va) return 1;
        }
      }
      return 0;
    });
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
  UniqueGroups g;
  g.inverse.resize(static_cast<size_t>(length));
  std::vector<int64_t> group_of_sorted(static_cast<size_t>(length));
  for (int64_t k = 0; k < length; ++k) {
    if (k == 0 || compare(order[k - 1], order[k]) != 0) {
      g.first.push_back(order[k]);  // stable: the group's first occurrence
      g.counts.push_back(0);
    }
    group_of_sorted[k] = static_cast<int64_t>(g.first.size()) - 1;
    ++g.counts.back();
  }
  std::vector<int64_t> rank(g.first.size());  // output position of each sorted group
  for (size_t u = 0; u < rank.size(); ++u) rank[u] = static_cast<int64_t>(u);
  if (!sorted) {
    std::vector<int64_t> by_first(g.first.size());
    for (size_t u = 0; u < by_first.size(); ++u) by_first[u] = static_cast<int64_t>(u);
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return g.first[a] < g.first[b]; });
    std::vector<int64_t> first(g.first.size()), counts(g.first.size());
    for (size_t u = 0; u < by_first.size(); ++u) {
      rank[by_first[u]] = static_cast<int64_t>(u);
      first[u] = g.first[by_first[u]];
      counts[u] = g.counts[by_first[u]];
    }
    g.first = std::move(first);
    g.counts = std::move(counts);
  }
  for (int64_t k = 0; k < length; ++k) g.inverse[order[k]] = rank[group_of_sorted[k]];
  return g;
}

Status infer_unique(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"axis", "sorted"}));
  KILN_RETURN_IF_ERROR(unique_sorted(args.attributes).status());
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1, 4));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", all_dtypes()));
  KILN_ASSIGN_OR_RETURN(auto axis, unique_axis(args.attributes, x.shape.size()));
  DimExpr count;
  if (const Tensor* t = constant_input(args, 0)) {
    KILN_ASSIGN_OR_RETURN(bool sorted, unique_sorted(args.attributes));
    count = DimExpr(static_cast<int64_t>(group_unique(*t, axis, sorted).first.size()));
  } else if (args.data_dim) {
    KILN_ASSIGN_OR_RETURN(count, args.data_dim(0));
  } else {
    return unimplemented(
        "the output size depends on the data of input 0 'X', which must be a constant here");
  }
  Shape y = axis ? x.shape : Shape{count};
  if (axis) y[*axis] = count;
  const DimExpr length = axis ? x.shape[*axis] : symbolic_element_count(x.shape);
  args.outputs = {ValueType{x.dtype, std::move(y)}, ValueType{DType::kI64, Shape{count}},
                  ValueType{DType::kI64, Shape{length}}, ValueType{DType::kI64, Shape{count}}};
  args.outputs.resize(args.output_count);
  return ok_status();
}

StatusOr<std::vector<int64_t>> unique_sizes(const Attributes& attributes,
                                            std::span<const Tensor> inputs) {
  if (inputs.empty()) return invalid_argument("input 0 'X' is missing");
  KILN_ASSIGN_OR_RETURN(auto axis, unique_axis(attributes, inputs[0].rank()));
  KILN_ASSIGN_OR_RETURN(bool sorted, unique_sorted(attributes));
  return std::vector<int64_t>{
      static_cast<int64_t>(group_unique(inputs[0], axis, sorted).first.size())};
}

class UniqueKernel : public Kernel {
 public:
  UniqueKernel(ConcreteShape dims, std::optional<int64_t> axis, bool sorted, int64_t count)
      : dims_(std::move(dims)), axis_(axis), sorted_(sorted), count_(count) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const Tensor x = Tensor::borrow(in[0].dtype, dims_, in[0].data, nullptr);
    const UniqueGroups g = group_unique(x, axis_, sorted_);
    if (static_cast<int64_t>(g.first.size()) != count_) {
      return invalid_argument("input 0 'X' has {} distinct {} where the compiled output holds {}",
                              g.first.size(), axis_ ? "slices" : "values", count_);
    }
    // Y: the first slice of each group.
    const int64_t length = axis_ ? dims_[*axis_] : product(dims_);
    const int64_t outer = axis_ ? product(std::span(dims_).first(*axis_)) : 1;
    const int64_t inner_bytes = (axis_ ? product(std::span(dims_).subspan(*axis_ + 1)) : 1) *
                                static_cast<int64_t>(dtype_size(in[0].dtype));
    for (int64_t o = 0; o < outer && out[0].data != nullptr && inner_bytes > 0; ++o) {
      for (int64_t u = 0; u < count_; ++u) {
        std::memcpy(out[0].data + (o * count_ + u) * inner_bytes,
                    in[0].data + (o * length + g.first[u]) * inner_bytes,
                    static_cast<size_t>(inner_bytes));
      }
    }
    const std::vector<int64_t>* rest[] = {&g.first, &g.inverse, &g.counts};
    for (size_t k = 1; k < out.size(); ++k) {
      if (out[k].data == nullptr) continue;
      std::copy(rest[k - 1]->begin(), rest[k - 1]->end(), out[k].as<int64_t>());
    }
    return ok_status();
  }

 private:
  ConcreteShape dims_;
  std::optional<int64_t> axis_;
  bool sorted_;
  int64_t count_;
};

StatusOr<std::unique_ptr<Kernel>> make_unique_kernel(const MakeArgs& args) {
  ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(auto axis, unique_axis(args.attributes, dims.size()));
  KILN_ASSIGN_OR_RETURN(bool sorted, unique_sorted(args.attributes));
  const int64_t count = args.output_dims(0)[axis ? *axis : 0];
  return std::unique_ptr<Kernel>(
      std::make_unique<UniqueKernel>(std::move(dims), axis, sorted, count));
}

}  // namespace

void register_select_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"NonZero", infer_nonzero, make_nonzero, 0, nonzero_sizes});
  table.push_back(OpDef{"Compress", infer_compress, make_compress, 0, compress_sizes});
  table.push_back(OpDef{.op_type = "Unique",
                        .infer = infer_unique,
                        .make = make_unique_kernel,
                        .data_sizes = unique_sizes,
                        .since_version = 11});
}

}  // namespace kiln::kernels
