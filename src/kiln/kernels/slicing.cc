// Concat, Split and Slice: copies of contiguous runs (Concat, Split) or of a strided view
// (Slice). All three pass the element values of 1-D shape computations through.
#include <algorithm>
#include <cstring>

#include "kiln/kernels/movement_util.h"
#include "kiln/kernels/strided_copy.h"

namespace kiln::kernels {
namespace {

// ---- Concat ----

Status infer_concat(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"axis"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, SIZE_MAX));
  if (!args.attributes.has("axis")) return invalid_argument("attribute 'axis' is required");
  KILN_ASSIGN_OR_RETURN(ValueType first, required_input(args, 0, "inputs"));
  KILN_RETURN_IF_ERROR(check_dtype(first, 0, "inputs", all_dtypes()));
  const auto rank = static_cast<int64_t>(first.shape.size());
  if (rank == 0) return invalid_argument("input 0 'inputs' is a scalar; Concat needs rank >= 1");
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw_axis, rank, "attribute 'axis'"));
  Shape out = first.shape;
  DimExpr sum(0);
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(ValueType t, required_input(args, i, "inputs"));
    KILN_RETURN_IF_ERROR(check_same_dtype(t, i, "inputs", first.dtype, "input 0 'inputs'"));
    KILN_RETURN_IF_ERROR(check_rank(t, i, "inputs", rank));
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) continue;
      KILN_RETURN_IF_ERROR(check_dims_equal(
          t.shape[d], first.shape[d],
          fmt::format("dim {} of {} {} (like input 0 {})", d, input_label(i, "inputs"),
                      shape_to_string(t.shape), shape_to_string(first.shape))));
    }
    if (auto a = sum.constant_value(), b = t.shape[axis].constant_value();
        a && b && !checked_add(*a, *b)) {
      return invalid_argument("Concat along axis {} overflows int64", axis);
    }
    sum = sum + t.shape[axis];
  }
  out[axis] = sum;
  KILN_RETURN_IF_ERROR(check_element_count(out, "the output"));
  args.outputs = {ValueType{first.dtype, out}};
  if (rank == 1) {
    std::vector<DimExpr> values;
    for (size_t i = 0; i < args.inputs.size(); ++i) {
      auto v = known_dim_values(args, i);
      if (!v) return ok_status();
      values.insert(values.end(), v->begin(), v->end());
    }
    set_output_values(args, 0, std::move(values));
  }
  return ok_status();
}

// Output row o is the concatenation of row o of every input; a row of input k has chunks_[k]
// elements (its axis dim times the inner dims).
class ConcatKernel : public Kernel {
 public:
  ConcatKernel(int64_t outer, std::vector<int64_t> chunks)
      : outer_(outer), chunks_(std::move(chunks)) {
    for (int64_t c : chunks_) out_chunk_ += c;
  }
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const size_t es = dtype_size(out[0].dtype);
    if (out_chunk_ == 0) return ok_status();
    for_row_chunks(outer_, out_chunk_, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        std::byte* dst = out[0].data + static_cast<size_t>(o * out_chunk_) * es;
        for (size_t k = 0; k < chunks_.size(); ++k) {
          const size_t bytes = static_cast<size_t>(chunks_[k]) * es;
          if (bytes == 0) continue;
          std::memcpy(dst, in[k].data + static_cast<size_t>(o) * bytes, bytes);
          dst += bytes;
        }
      }
    });
    return ok_status();
  }

 private:
  int64_t outer_;
  std::vector<int64_t> chunks_;
  int64_t out_chunk_ = 0;
};

// Outer count and per-piece row lengths of pieces (`dims` of each) split or joined along `axis`.
std::pair<int64_t, std::vector<int64_t>> rows_along(const std::vector<ConcreteShape>& dims,
                                                    int64_t axis) {
  const ConcreteShape& d0 = dims[0];
  const int64_t outer = product(std::span<const int64_t>(d0).first(static_cast<size_t>(axis)));
  std::vector<int64_t> chunks;
  for (const ConcreteShape& d : dims) {
    chunks.push_back(product(std::span<const int64_t>(d).subspan(static_cast<size_t>(axis))));
  }
  return {outer, chunks};
}

StatusOr<std::unique_ptr<Kernel>> make_concat(const MakeArgs& args) {
  const ConcreteShape out = args.output_dims(0);
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        normalize_axis(raw_axis, static_cast<int64_t>(out.size()), "axis"));
  std::vector<ConcreteShape> dims;
  for (size_t i = 0; i < args.inputs.size(); ++i) dims.push_back(args.input_dims(i));
  auto [outer, chunks] = rows_along(dims, axis);
  return std::unique_ptr<Kernel>(std::make_unique<ConcatKernel>(outer, std::move(chunks)));
}

// ---- Split ----

Status infer_split(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"axis"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 2, 1, SIZE_MAX));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  const auto rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) return invalid_argument("input 0 'input' is a scalar; Split needs rank >= 1");
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw_axis, rank, "attribute 'axis'"));
  const DimExpr dim = x.shape[axis];
  const size_t n = args.output_count;
  std::vector<DimExpr> parts;
  if (const ValueType* split = optional_input(args, 1)) {
    KILN_RETURN_IF_ERROR(check_dtype(*split, 1, "split", {DType::kI64}));
    KILN_RETURN_IF_ERROR(check_rank(*split, 1, "split", 1));
    KILN_ASSIGN_OR_RETURN(parts, required_dim_values(args, 1, "split"));
    if (parts.size() != n) {
      return invalid_argument("input 1 'split' has {} elements for {} outputs", parts.size(), n);
    }
    DimExpr sum(0);
    for (size_t i = 0; i < n; ++i) {
      if (auto v = parts[i].constant_value(); v && *v < 0) {
        return invalid_argument("input 1 'split' element {} is negative ({})", i, *v);
      }
      sum = sum + parts[i];
    }
    KILN_RETURN_IF_ERROR(
        check_dims_equal(sum, dim,
                         fmt::format("sum of input 1 'split' (dim {} of input 0 'input' {})", axis,
                                     shape_to_string(x.shape))));
  } else if (auto d = dim.constant_value(); d && *d % static_cast<int64_t>(n) != 0) {
    return invalid_argument("dim {} of input 0 'input' {} ({}) does not split into {} equal parts",
                            axis, shape_to_string(x.shape), *d, n);
  } else {
    KILN_ASSIGN_OR_RETURN(
        DimExpr part,
        divide_exactly(dim, DimExpr(static_cast<int64_t>(n)),
                       fmt::format("dim {} of input 0 'input' {} ({}), split into equal parts,",
                                   axis, shape_to_string(x.shape), dim.to_string())));
    parts.assign(n, part);
  }
  args.outputs.clear();
  for (const DimExpr& p : parts) {
    Shape s = x.shape;
    s[axis] = p;
    args.outputs.push_back(ValueType{x.dtype, std::move(s)});
  }
  if (rank == 1) {
    if (auto values = known_dim_values(args, 0)) {
      size_t begin = 0;
      for (size_t i = 0; i < n; ++i) {
        auto len = parts[i].constant_value();
        if (!len || begin + static_cast<size_t>(*len) > values->size()) break;
        set_output_values(
            args, i,
            std::vector<DimExpr>(values->begin() + static_cast<int64_t>(begin),
                                 values->begin() + static_cast<int64_t>(begin) + *len));
        begin += static_cast<size_t>(*len);
      }
    }
  }
  return ok_status();
}

// The reverse of ConcatKernel.
class SplitKernel : public Kernel {
 public:
  SplitKernel(int64_t outer, std::vector<int64_t> chunks)
      : outer_(outer), chunks_(std::move(chunks)) {
    for (int64_t c : chunks_) in_chunk_ += c;
  }
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const size_t es = dtype_size(in[0].dtype);
    if (in_chunk_ == 0) return ok_status();
    for_row_chunks(outer_, in_chunk_, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const std::byte* src = in[0].data + static_cast<size_t>(o * in_chunk_) * es;
        for (size_t k = 0; k < chunks_.size(); ++k) {
          const size_t bytes = static_cast<size_t>(chunks_[k]) * es;
          if (bytes != 0 && out[k].data != nullptr) {
            std::memcpy(out[k].data + static_cast<size_t>(o) * bytes, src, bytes);
          }
          src += bytes;
        }
      }
    });
    return ok_status();
  }

 private:
  int64_t outer_;
  std::vector<int64_t> chunks_;
  int64_t in_chunk_ = 0;
};

StatusOr<std::unique_ptr<Kernel>> make_split(const MakeArgs& args) {
  const ConcreteShape in = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        normalize_axis(raw_axis, static_cast<int64_t>(in.size()), "axis"));
  std::vector<ConcreteShape> dims;
  for (size_t i = 0; i < args.outputs.size(); ++i) dims.push_back(args.output_dims(i));
  auto [outer, chunks] = rows_along(dims, axis);
  return std::unique_ptr<Kernel>(std::make_unique<SplitKernel>(outer, std::move(chunks)));
}

// ---- Slice ----

// Ends at or beyond this (starts at or below its negation) mean "to the end of the dim" also
// for a symbolic dim: models write INT32_MAX or INT64_MAX there.
constexpr int64_t kOpenEnd = (int64_t{1} << 31) - 1;

// Per data axis: the first element read and the step (0 and 1 for axes not sliced).
struct SliceSpec {
  Shape out;
  std::vector<DimExpr> start;
  std::vector<int64_t> step;
};

StatusOr<std::vector<DimExpr>> slice_operand(const InferArgs& args, size_t index,
                                             std::string_view name) {
  const ValueType* t = optional_input(args, index);
  if (t == nullptr) return std::vector<DimExpr>{};
  KILN_RETURN_IF_ERROR(check_dtype(*t, index, name, {DType::kI32, DType::kI64}));
  KILN_RETURN_IF_ERROR(check_rank(*t, index, name, 1));
  return required_dim_values(args, index, name);
}

// ceil(diff / step) for diff > 0, step > 0, without overflow.
int64_t count_steps(__int128 diff, __int128 step) {
  return static_cast<int64_t>((diff - 1) / step + 1);
}

// A slice bound clamped as ONNX does (a negative bound counts from the end, then it is clamped to
// [0, dim] for a forward step; to [0, dim - 1] for a backward start and [-1, dim - 1] for a
// backward end), as an expression. A bound computed from shapes that is provably nonnegative is
// assumed to lie within the dim (`dim - bound >= 0`), which keeps shapes such as a sequence
// length S from becoming min(S, dim) everywhere downstream.
StatusOr<DimExpr> clamp_slice_bound(const DimExpr& bound, const DimExpr& dim, int64_t step,
                                    bool is_end, std::string_view what) {
  const DimExpr lo = step < 0 && is_end ? DimExpr(-1) : DimExpr(0);
  const DimExpr hi = step > 0 ? dim : dim - DimExpr(1);
  // On an empty dim a backward start's range [0, -1] is empty: hi wins, as in the concrete rule.
  auto at_most_hi = [&](const DimExpr& v) { return step > 0 ? v : DimExpr::min(v, hi); };
  if (auto c = bound.constant_value()) {
    if (*c >= kOpenEnd) return hi;
    if (*c <= -kOpenEnd) return at_most_hi(lo);
    if (*c >= 0) return DimExpr::min(DimExpr(*c), hi);
  }
  // Counted from the end.
  if (bound.constant_value() || (DimExpr(0) - bound).provably_nonnegative()) {
    return at_most_hi(DimExpr::max(dim + bound, lo));
  }
  const std::string which =
      fmt::format("{}: {} '{}'", what, is_end ? "end" : "start", bound.to_string());
  KILN_RETURN_IF_ERROR(assume_nonnegative(bound, which));
  KILN_RETURN_IF_ERROR(assume_nonnegative(hi - bound, which));
  return bound;
}

struct SymbolicSlice {
  DimExpr start;   // the first element read
  DimExpr length;  // elements read
};

StatusOr<SymbolicSlice> symbolic_slice(const DimExpr& dim, const DimExpr& start, const DimExpr& end,
                                       int64_t step, std::string_view what) {
  const int64_t magnitude = step > 0 ? step : (step == INT64_MIN ? INT64_MAX : -step);
  KILN_ASSIGN_OR_RETURN(DimExpr s, clamp_slice_bound(start, dim, step, false, what));
  auto c = start.constant_value();
  if (step > 0 && c && *c > -kOpenEnd && end.constant_value().value_or(0) >= kOpenEnd) {
    // x[:, c:] and x[:, -c:] read max(dim - c, 0) and min(c, dim) elements.
    DimExpr length =
        *c >= 0 ? DimExpr::max(dim - DimExpr(*c), DimExpr(0)) : DimExpr::min(DimExpr(-*c), dim);
    return SymbolicSlice{s, length.ceil_div(magnitude)};
  }
  KILN_ASSIGN_OR_RETURN(DimExpr e, clamp_slice_bound(end, dim, step, true, what));
  const DimExpr span = step > 0 ? e - s : s - e;
  return SymbolicSlice{s, DimExpr::max(span.ceil_div(magnitude), DimExpr(0))};
}

StatusOr<SliceSpec> slice_spec(const InferArgs& args, const ValueType& x) {
  const auto rank = static_cast<int64_t>(x.shape.size());
  KILN_RETURN_IF_ERROR(required_input(args, 1, "starts").status());
  KILN_RETURN_IF_ERROR(required_input(args, 2, "ends").status());
  KILN_ASSIGN_OR_RETURN(std::vector<DimExpr> starts, slice_operand(args, 1, "starts"));
  KILN_ASSIGN_OR_RETURN(std::vector<DimExpr> ends, slice_operand(args, 2, "ends"));
  KILN_ASSIGN_OR_RETURN(std::vector<DimExpr> axes_values, slice_operand(args, 3, "axes"));
  KILN_ASSIGN_OR_RETURN(std::vector<DimExpr> steps_values, slice_operand(args, 4, "steps"));
  const size_t n = starts.size();
  if (ends.size() != n) {
    return invalid_argument("input 2 'ends' has {} elements, input 1 'starts' has {}", ends.size(),
                            n);
  }
  std::vector<int64_t> raw_axes;
  if (optional_input(args, 3) != nullptr) {
    if (axes_values.size() != n) {
      return invalid_argument("input 3 'axes' has {} elements, input 1 'starts' has {}",
                              axes_values.size(), n);
    }
    KILN_ASSIGN_OR_RETURN(raw_axes, constant_elements(axes_values, 3, "axes"));
  } else {
    if (static_cast<int64_t>(n) > rank) {
      return invalid_argument("input 1 'starts' has {} elements for input 0 'data' of rank {}", n,
                              rank);
    }
    for (size_t i = 0; i < n; ++i) raw_axes.push_back(static_cast<int64_t>(i));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                        normalize_axes(raw_axes, rank, "input 3 'axes'"));
  std::vector<int64_t> steps(n, 1);
  if (optional_input(args, 4) != nullptr) {
    if (steps_values.size() != n) {
      return invalid_argument("input 4 'steps' has {} elements, input 1 'starts' has {}",
                              steps_values.size(), n);
    }
    KILN_ASSIGN_OR_RETURN(steps, constant_elements(steps_values, 4, "steps"));
  }
  SliceSpec spec{x.shape, std::vector<DimExpr>(static_cast<size_t>(rank), DimExpr(0)),
                 std::vector<int64_t>(static_cast<size_t>(rank), 1)};
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = axes[i];
    const int64_t step = steps[i];
    if (step == 0) return invalid_argument("input 4 'steps' element {} is 0", i);
    const DimExpr& dim = x.shape[a];
    spec.step[a] = step;
    if (auto d = dim.constant_value(); d && starts[i].is_constant() && ends[i].is_constant()) {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> s_value,
                            constant_elements({starts[i]}, 1, "starts"));
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> e_value, constant_elements({ends[i]}, 2, "ends"));
      int64_t s = s_value[0], e = e_value[0];
      if (s < 0) s += *d;
      if (e < 0) e += *d;
      int64_t len = 0;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, *d);
        e = std::clamp<int64_t>(e, 0, *d);
        if (e > s) len = count_steps(static_cast<__int128>(e) - s, step);
      } else if (*d == 0) {
        s = 0;
      } else {
        s = std::clamp<int64_t>(s, 0, *d - 1);
        e = std::clamp<int64_t>(e, -1, *d - 1);
        if (s > e) len = count_steps(static_cast<__int128>(s) - e, -static_cast<__int128>(step));
      }
      spec.start[a] = DimExpr(s);
      spec.out[a] = DimExpr(len);
      continue;
    }
    // A symbolic dim or bound: the same clamping as expressions.
    KILN_ASSIGN_OR_RETURN(
        SymbolicSlice sliced,
        symbolic_slice(dim, starts[i], ends[i], step,
                       fmt::format("Slice of dim {} ('{}') of input 0 'data' {}", a,
                                   dim.to_string(), shape_to_string(x.shape))));
    spec.start[a] = sliced.start;
    spec.out[a] = sliced.length;
  }
  return spec;
}

// Output 0's element values: the sliced elements of input 0's known values (any rank with
// constant dims, e.g. the reversed rows of a [4, 2] pads tensor).
void slice_values(InferArgs& args, const SliceSpec& spec) {
  if (spec.out.empty()) return;
  auto values = known_dim_values(args, 0, /*any_rank=*/true);
  auto in = evaluate_shape(args.inputs[0]->shape, {});
  auto out_dims = evaluate_shape(spec.out, {});
  if (!values || !in.ok() || !out_dims.ok()) return;
  std::vector<int64_t> start;
  for (const DimExpr& d : spec.start) {
    auto v = d.constant_value();
    if (!v) return;
    start.push_back(*v);
  }
  const std::vector<int64_t> strides = row_major_strides(*in);
  std::vector<DimExpr> out;
  ConcreteShape index(out_dims->size(), 0);
  for (int64_t n = product(*out_dims); n > 0; --n) {
    __int128 from = 0;
    for (size_t a = 0; a < index.size(); ++a) {
      const __int128 at =
          static_cast<__int128>(start[a]) + static_cast<__int128>(index[a]) * spec.step[a];
      if (at < 0 || at >= (*in)[a]) return;
      from += at * strides[a];
    }
    out.push_back((*values)[static_cast<size_t>(from)]);
    for (size_t a = index.size(); a-- > 0;) {
      if (++index[a] < (*out_dims)[a]) break;
      index[a] = 0;
    }
  }
  set_output_values(args, 0, std::move(out));
}

Status infer_slice(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 5));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "data"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "data", all_dtypes()));
  KILN_ASSIGN_OR_RETURN(SliceSpec spec, slice_spec(args, x));
  args.outputs = {ValueType{x.dtype, spec.out}};
  slice_values(args, spec);
  return ok_status();
}

StatusOr<std::unique_ptr<Kernel>> make_slice(const MakeArgs& args) {
  InferArgs infer_args = infer_args_of(args);
  KILN_ASSIGN_OR_RETURN(SliceSpec spec, slice_spec(infer_args, *args.inputs[0]));
  const ConcreteShape in = args.input_dims(0);
  const std::vector<int64_t> strides = row_major_strides(in);
  StridedView view;
  view.dims = args.output_dims(0);
  for (size_t a = 0; a < in.size(); ++a) {
    // A dim of 0 or 1 never moves along its stride (which could overflow for a huge step).
    view.strides.push_back(view.dims[a] <= 1 ? 0 : strides[a] * spec.step[a]);
    view.offset += spec.start[a].constant_value().value_or(0) * strides[a];
  }
  return make_view_kernel(std::move(view));
}

}  // namespace

void register_slicing_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"Concat", infer_concat, make_concat});
  table.push_back(OpDef{"Slice", infer_slice, make_slice, 0b11110u});
  table.push_back(OpDef{"Split", infer_split, make_split, 1u << 1});
}

}  // namespace kiln::kernels
