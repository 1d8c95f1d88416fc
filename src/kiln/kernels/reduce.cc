// Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceLogSum, ReduceLogSumExp, ReduceSumSquare over a set of axes; ArgMax, ArgMin along one.
//
// Axes: ReduceSum takes them as input 1 (opset 13); the others as the attribute 'axes' (opset
// 17), or as input 1 like opset 18 (never both). Empty axes reduce everything, or nothing when
// noop_with_empty_axes = 1. The axes must be known at compile time: the output shape depends on
// them.
//
// Precision and order: float inputs (f16, bf16, f32, f64) accumulate in double, and each output
// element reduces its inputs sequentially in row-major order of the reduced axes, so results do
// not depend on the thread count or on the other axes' sizes (batch invariance). Integer sums,
// products, sums of squares and L1 wrap modulo 2^64 and are truncated to the output width (what
// numpy's 64-bit accumulation cast back gives); Mean of integers divides that sum, rounding
// toward zero. L2, LogSum and LogSumExp of integers compute in double and saturate to the
// integer range. Max and Min propagate NaN.
//
// Empty reductions (a reduced dim of size 0) give the identity, as ONNX opset 18 specifies: 0 for
// Sum, SumSquare, L1, L2; 1 for Prod; -inf for LogSum and LogSumExp; NaN for Mean (0 for
// integers); the lowest value (-inf for floats) for Max and the highest for Min. ArgMax and ArgMin
// of an empty axis are an error.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/reduce_geometry.h"

namespace kiln::kernels {
namespace {

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// A double converted to integer type C: NaN gives 0, out-of-range values saturate.
template <typename C>
C saturate(double v) {
  if (std::isnan(v)) return C(0);
  if (v <= static_cast<double>(std::numeric_limits<C>::lowest())) {
    return std::numeric_limits<C>::lowest();
  }
  if (v >= static_cast<double>(std::numeric_limits<C>::max())) {
    return std::numeric_limits<C>::max();
  }
  return static_cast<C>(v);
}

// The float reductions that add one term per element into a double (Sum, Mean, L1, L2, LogSum,
// SumSquare): the term, and the result from the sum.
constexpr bool is_sum_of_terms(Reduce r) {
  return r == Reduce::kSum || r == Reduce::kMean || r == Reduce::kL1 || r == Reduce::kL2 ||
         r == Reduce::kLogSum || r == Reduce::kSumSquare;
}

template <Reduce R>
double sum_term(double e) {
  if constexpr (R == Reduce::kL1) return std::fabs(e);
  if constexpr (R == Reduce::kL2 || R == Reduce::kSumSquare) return e * e;
  return e;
}

template <Reduce R, typename T>
compute_t<T> finish_sum(double acc, const Geometry& g) {
  if constexpr (R == Reduce::kMean) acc /= static_cast<double>(g.red_count);
  if constexpr (R == Reduce::kL2) acc = std::sqrt(acc);
  if constexpr (R == Reduce::kLogSum) acc = std::log(acc);
  return static_cast<compute_t<T>>(acc);
}

// A float sum of terms whose innermost input axis is kept (a channels-last tensor reduced over
// its spatial axes): the outputs along that axis are adjacent, and so are their elements at each
// reduced position. Each run of up to kColumns such outputs is summed together, walking the
// reduced positions once in row-major order and adding each position's contiguous elements to
// one double per output: every output adds the same terms in the same order as reduce_one, so
// the bits are the same, with the input read in order instead of one strided element at a time.
inline constexpr int64_t kColumns = 64;

bool sums_by_columns(const Geometry& g) {
  return !g.kept_dims.empty() && g.kept_strides.back() == 1 && !g.red_dims.empty();
}

template <Reduce R, typename T>
void reduce_by_columns(const Geometry& g, const T* x, T* y) {
  const int64_t inner = g.kept_dims.back();
  const int64_t chunks = (inner + kColumns - 1) / kColumns;
  const int64_t rows = g.out_count / inner;
  parallel_ranges(rows * chunks, g.red_count * std::min(inner, kColumns),
                  [&](int64_t begin, int64_t end) {
                    std::vector<int64_t> idx(g.red_dims.size());
                    double acc[kColumns];
                    for (int64_t item = begin; item < end; ++item) {
                      const int64_t first = (item / chunks) * inner + (item % chunks) * kColumns;
                      const int64_t n = std::min(kColumns, inner - (item % chunks) * kColumns);
                      std::fill(acc, acc + n, 0.0);
                      visit_reduced(g, kept_offset(g, first), idx, [&](int64_t off) {
                        for (int64_t j = 0; j < n; ++j) {
                          acc[j] += sum_term<R>(static_cast<double>(load(x, off + j)));
                        }
                      });
                      for (int64_t j = 0; j < n; ++j)
                        store(y, first + j, finish_sum<R, T>(acc[j], g));
                    }
                  });
}

template <Reduce R, typename T>
compute_t<T> reduce_one(const Geometry& g, const T* x, int64_t base, std::vector<int64_t>& idx) {
  using C = compute_t<T>;
  if constexpr (is_float_storage_v<T>) {
    auto v = [&](int64_t off) { return static_cast<double>(load(x, off)); };
    double acc = 0;
    if constexpr (R == Reduce::kMax || R == Reduce::kMin) {
      acc = R == Reduce::kMax ? -std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::infinity();
      visit_reduced(g, base, idx, [&](int64_t off) {
        const double e = v(off);
        // A NaN once taken stays: comparisons with NaN are false.
        if (std::isnan(e) || (R == Reduce::kMax ? e > acc : e < acc)) acc = e;
      });
    } else if constexpr (R == Reduce::kProd) {
      acc = 1;
      visit_reduced(g, base, idx, [&](int64_t off) { acc *= v(off); });
    } else if constexpr (R == Reduce::kLogSumExp) {
      double m = -std::numeric_limits<double>::infinity();
      bool nan = false;
      visit_reduced(g, base, idx, [&](int64_t off) {
        const double e = v(off);
        if (std::isnan(e))
          nan = true;
        else if (e > m)
          m = e;
      });
      if (nan) return static_cast<C>(std::numeric_limits<double>::quiet_NaN());
      if (std::isinf(m)) return static_cast<C>(m);  // all -inf (or empty), or some +inf
      visit_reduced(g, base, idx, [&](int64_t off) { acc += std::exp(v(off) - m); });
      return static_cast<C>(m + std::log(acc));
    } else {
      visit_reduced(g, base, idx, [&](int64_t off) { acc += sum_term<R>(v(off)); });
      return finish_sum<R, T>(acc, g);
    }
    return static_cast<C>(acc);
  } else {
    static_assert(std::is_integral_v<T>);
    if constexpr (R == Reduce::kMax || R == Reduce::kMin) {
      T acc = R == Reduce::kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
      visit_reduced(g, base, idx, [&](int64_t off) {
        const T e = x[off];
        if (R == Reduce::kMax ? e > acc : e < acc) acc = e;
      });
      return acc;
    } else if constexpr (R == Reduce::kL2 || R == Reduce::kLogSum || R == Reduce::kLogSumExp) {
      double acc = 0;
      if constexpr (R == Reduce::kLogSumExp) {
        double m = -std::numeric_limits<double>::infinity();
        visit_reduced(g, base, idx,
                      [&](int64_t off) { m = std::max(m, static_cast<double>(x[off])); });
        if (std::isinf(m)) return saturate<T>(m);
        visit_reduced(g, base, idx,
                      [&](int64_t off) { acc += std::exp(static_cast<double>(x[off]) - m); });
        return saturate<T>(m + std::log(acc));
      } else {
        visit_reduced(g, base, idx, [&](int64_t off) {
          const auto e = static_cast<double>(x[off]);
          acc += R == Reduce::kL2 ? e * e : e;
        });
        return saturate<T>(R == Reduce::kL2 ? std::sqrt(acc) : std::log(acc));
      }
    } else {
      // Wrapping 64-bit arithmetic (unsigned: no UB on overflow).
      uint64_t acc = R == Reduce::kProd ? 1 : 0;
      visit_reduced(g, base, idx, [&](int64_t off) {
        const T e = x[off];
        auto u = static_cast<uint64_t>(
            static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(e));
        if constexpr (R == Reduce::kL1) {
          if constexpr (std::is_signed_v<T>) {
            if (e < 0) u = uint64_t{0} - u;
          }
          acc += u;
        } else if constexpr (R == Reduce::kProd) {
          acc *= u;
        } else if constexpr (R == Reduce::kSumSquare) {
          acc += u * u;
        } else {
          acc += u;
        }
      });
      if constexpr (R == Reduce::kMean) {
        if (g.red_count == 0) return T(0);
        if constexpr (std::is_signed_v<T>) {
          return static_cast<T>(static_cast<int64_t>(acc) / g.red_count);
        } else {
          return static_cast<T>(acc / static_cast<uint64_t>(g.red_count));
        }
      }
      return static_cast<T>(acc);
    }
  }
}

template <Reduce R>
class ReduceKernel : public Kernel {
 public:
  // `identity`: noop_with_empty_axes with empty axes (even L2 or SumSquare return the input).
  ReduceKernel(Geometry g, bool identity) : g_(std::move(g)), identity_(identity) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    if (identity_) {
      const int64_t n = in[0].element_count();
      if (n > 0) std::memcpy(out[0].data, in[0].data, n * dtype_size(in[0].dtype));
      return ok_status();
    }
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (std::is_same_v<T, Bool>) {
        return internal_error("no reduction instance for bool");
      } else {
        const T* x = in[0].as<T>();
        T* y = out[0].as<T>();
        if constexpr (is_float_storage_v<T> && is_sum_of_terms(R)) {
          if (sums_by_columns(g_)) {
            reduce_by_columns<R, T>(g_, x, y);
            return ok_status();
          }
        }
        parallel_ranges(g_.out_count, g_.red_count, [&](int64_t begin, int64_t end) {
          std::vector<int64_t> idx(g_.red_dims.size());
          for (int64_t o = begin; o < end; ++o) {
            store(y, o, reduce_one<R, T>(g_, x, kept_offset(g_, o), idx));
          }
        });
        return ok_status();
      }
    });
  }

 private:
  Geometry g_;
  bool identity_;
};

struct ReduceInfo {
  Reduce reduce;
  std::string_view op_type;
};

constexpr ReduceInfo kReductions[] = {
    {Reduce::kSum, "ReduceSum"},
    {Reduce::kMean, "ReduceMean"},
    {Reduce::kMax, "ReduceMax"},
    {Reduce::kMin, "ReduceMin"},
    {Reduce::kProd, "ReduceProd"},
    {Reduce::kL1, "ReduceL1"},
    {Reduce::kL2, "ReduceL2"},
    {Reduce::kLogSum, "ReduceLogSum"},
    {Reduce::kLogSumExp, "ReduceLogSumExp"},
    {Reduce::kSumSquare, "ReduceSumSquare"},
};

struct Options {
  bool keepdims = true;
  bool noop_with_empty_axes = false;
  std::optional<std::vector<int64_t>> attribute_axes;  // ReduceSum never has it
};

template <Reduce R>
StatusOr<Options> read_options(const Attributes& a) {
  if constexpr (R == Reduce::kSum) {
    KILN_RETURN_IF_ERROR(check_known_attributes(a, {"keepdims", "noop_with_empty_axes"}));
  } else {
    KILN_RETURN_IF_ERROR(check_known_attributes(a, {"axes", "keepdims", "noop_with_empty_axes"}));
  }
  Options o;
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, a.get_int("keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t noop, a.get_int("noop_with_empty_axes", 0));
  if (keepdims != 0 && keepdims != 1) {
    return invalid_argument("attribute 'keepdims' must be 0 or 1, got {}", keepdims);
  }
  if (noop != 0 && noop != 1) {
    return invalid_argument("attribute 'noop_with_empty_axes' must be 0 or 1, got {}", noop);
  }
  o.keepdims = keepdims == 1;
  o.noop_with_empty_axes = noop == 1;
  if (a.has("axes")) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, a.get_ints("axes", {}));
    o.attribute_axes = std::move(axes);
  }
  return o;
}

// Which input axes are reduced; all false with `identity` for a no-op.
struct ReducedAxes {
  std::vector<bool> reduced;
  bool identity = false;
};

StatusOr<ReducedAxes> reduced_axes(const Options& o, std::span<const int64_t> raw, int64_t rank,
                                   std::string_view what) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, normalize_axes(raw, rank, what));
  ReducedAxes r;
  r.identity = axes.empty() && o.noop_with_empty_axes;
  r.reduced.assign(static_cast<size_t>(rank), axes.empty() && !o.noop_with_empty_axes);
  for (int64_t a : axes) r.reduced[a] = true;
  return r;
}

template <Reduce R>
Status infer_reduce(InferArgs& args) {
  KILN_ASSIGN_OR_RETURN(Options o, read_options<R>(args.attributes));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "data"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "data", numeric_dtypes()));
  const auto rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> raw;
  std::string what = "attribute 'axes'";
  KILN_ASSIGN_OR_RETURN(auto values, input_dim_values(args, 1, "axes"));
  if (values) {
    if (o.attribute_axes) {
      return invalid_argument("axes are given both as attribute 'axes' and as input 1 'axes'");
    }
    for (size_t i = 0; i < values->size(); ++i) {
      auto v = (*values)[i].constant_value();
      if (!v) {
        return unimplemented("input 1 'axes' element {} is symbolic ('{}'); it must be a constant",
                             i, (*values)[i].to_string());
      }
      raw.push_back(*v);
    }
    what = "input 1 'axes'";
  } else if (o.attribute_axes) {
    raw = *o.attribute_axes;
  }
  KILN_ASSIGN_OR_RETURN(ReducedAxes r, reduced_axes(o, raw, rank, what));
  const std::vector<bool>& reduced = r.reduced;
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d])
      out.push_back(x.shape[d]);
    else if (o.keepdims)
      out.push_back(DimExpr(1));
  }
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  // Shape computations: the product or sum of a 1-D tensor of dims (an element count).
  if constexpr (R == Reduce::kProd || R == Reduce::kSum) {
    auto elements = known_dim_values(args, 0);
    if (elements && rank == 1 && reduced[0] && !is_float(x.dtype)) {
      DimExpr total(R == Reduce::kProd ? 1 : 0);
      for (const DimExpr& e : *elements) total = R == Reduce::kProd ? total * e : total + e;
      set_output_values(args, 0, {total});
    }
  }
  return ok_status();
}

// The reduced axes for make: from the constant axes when there is one, else recovered from the
// input and output dims (the axes came from a shape computation make cannot see).
template <Reduce R>
StatusOr<ReducedAxes> make_reduced_axes(const MakeArgs& args, const Options& o,
                                        const ConcreteShape& in, const ConcreteShape& out) {
  const auto rank = static_cast<int64_t>(in.size());
  const Tensor* axes = args.constants.size() > 1 ? args.constants[1] : nullptr;
  const bool axes_input = args.inputs.size() > 1 && args.inputs[1].has_value();
  if (!axes_input) {
    return reduced_axes(o, o.attribute_axes.value_or(std::vector<int64_t>{}), rank,
                        "attribute 'axes'");
  }
  if (axes != nullptr) {
    std::vector<int64_t> raw;
    for (int64_t i = 0; i < axes->element_count(); ++i) raw.push_back(element_as_int64(*axes, i));
    return reduced_axes(o, raw, rank, "input 1 'axes'");
  }
  auto refuse = [&]() {
    return unimplemented(
        "input 1 'axes' must be a constant here (the reduced axes cannot be recovered from "
        "shapes {} -> {})",
        shape_to_string(in), shape_to_string(out));
  };
  ReducedAxes r;
  r.reduced.assign(in.size(), false);
  if (o.keepdims) {
    // Dims that changed were reduced; reducing a dim of size 1 changes nothing for most ops.
    if (out.size() != in.size()) return internal_error("reduction output rank differs");
    bool any = false;
    for (size_t d = 0; d < in.size(); ++d) any = any || (r.reduced[d] = in[d] != out[d]);
    // Empty axes (a no-op) and axes of size-1 dims differ for ops that change single values.
    constexpr bool kChangesSingles =
        R == Reduce::kL1 || R == Reduce::kL2 || R == Reduce::kSumSquare || R == Reduce::kLogSum;
    if (!any && o.noop_with_empty_axes && kChangesSingles) return refuse();
    return r;
  }
  if (out.size() == in.size() && o.noop_with_empty_axes) {
    r.identity = true;
    return r;
  }
  // keepdims = 0: the output dims are the kept input dims; the embedding must be unique.
  std::vector<bool> left(in.size(), true), right(in.size(), true);
  size_t j = 0;
  for (size_t d = 0; d < in.size() && j < out.size(); ++d) {
    if (in[d] == out[j]) left[d] = false, ++j;
  }
  if (j != out.size()) return internal_error("reduction output dims are not kept input dims");
  j = out.size();
  for (size_t d = in.size(); d-- > 0 && j > 0;) {
    if (in[d] == out[j - 1]) right[d] = false, --j;
  }
  if (left != right) return refuse();
  r.reduced = left;
  return r;
}

template <Reduce R>
StatusOr<std::unique_ptr<Kernel>> make_reduce(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(Options o, read_options<R>(args.attributes));
  const ConcreteShape in = args.input_dims(0);
  const ConcreteShape out = args.output_dims(0);
  KILN_ASSIGN_OR_RETURN(ReducedAxes r, make_reduced_axes<R>(args, o, in, out));
  return std::unique_ptr<Kernel>(
      std::make_unique<ReduceKernel<R>>(make_geometry(in, r.reduced), r.identity));
}

// ArgMax / ArgMin: the index of the first (or last, select_last_index) extreme element. NaN
// counts as the extreme, as numpy's argmax and argmin take it.
template <bool kMax>
class ArgKernel : public Kernel {
 public:
  ArgKernel(int64_t outer, int64_t n, int64_t inner, bool last)
      : outer_(outer), n_(n), inner_(inner), last_(last) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (std::is_same_v<T, Bool>) {
        return internal_error("no ArgMax/ArgMin instance for bool");
      } else {
        using C = compute_t<T>;
        const T* x = in[0].as<T>();
        int64_t* y = out[0].as<int64_t>();
        auto better = [](C a, C b) {  // a strictly better than b
          if constexpr (std::is_floating_point_v<C>) {
            if (std::isnan(a)) return !std::isnan(b);
            if (std::isnan(b)) return false;
          }
          return kMax ? a > b : a < b;
        };
        parallel_ranges(outer_ * inner_, n_, [&](int64_t begin, int64_t end) {
          for (int64_t lane = begin; lane < end; ++lane) {
            const int64_t o = lane / inner_;
            const int64_t i = lane % inner_;
            const int64_t base = o * n_ * inner_ + i;
            C best = load(x, base);
            int64_t at = 0;
            for (int64_t k = 1; k < n_; ++k) {
              const C v = load(x, base + k * inner_);
              if (better(v, best) || (last_ && !better(best, v))) {
                best = v;
                at = k;
              }
            }
            y[lane] = at;
          }
        });
        return ok_status();
      }
    });
  }

 private:
  int64_t outer_, n_, inner_;
  bool last_;
};

struct ArgOptions {
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last_index = false;
};

StatusOr<ArgOptions> read_arg_options(const Attributes& a, int64_t rank) {
  KILN_RETURN_IF_ERROR(check_known_attributes(a, {"axis", "keepdims", "select_last_index"}));
  ArgOptions o;
  KILN_ASSIGN_OR_RETURN(int64_t axis, a.get_int("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, a.get_int("keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t last, a.get_int("select_last_index", 0));
  if (keepdims != 0 && keepdims != 1) {
    return invalid_argument("attribute 'keepdims' must be 0 or 1, got {}", keepdims);
  }
  if (last != 0 && last != 1) {
    return invalid_argument("attribute 'select_last_index' must be 0 or 1, got {}", last);
  }
  KILN_ASSIGN_OR_RETURN(o.axis, normalize_axis(axis, rank, "attribute 'axis'"));
  o.keepdims = keepdims == 1;
  o.select_last_index = last == 1;
  return o;
}

Status infer_arg(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "data"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "data", numeric_dtypes()));
  const auto rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) return invalid_argument("input 0 'data' must have rank >= 1, got a scalar");
  KILN_ASSIGN_OR_RETURN(ArgOptions o, read_arg_options(args.attributes, rank));
  if (x.shape[o.axis] == DimExpr(0)) {
    return invalid_argument("input 0 'data' dim {} (the axis) is 0: no element to select", o.axis);
  }
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != o.axis)
      out.push_back(x.shape[d]);
    else if (o.keepdims)
      out.push_back(DimExpr(1));
  }
  args.outputs = {ValueType{DType::kI64, std::move(out)}};
  return ok_status();
}

template <bool kMax>
StatusOr<std::unique_ptr<Kernel>> make_arg(const MakeArgs& args) {
  const ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(ArgOptions o,
                        read_arg_options(args.attributes, static_cast<int64_t>(dims.size())));
  const int64_t outer = product(std::span(dims).first(o.axis));
  const int64_t inner = product(std::span(dims).subspan(o.axis + 1));
  return std::unique_ptr<Kernel>(
      std::make_unique<ArgKernel<kMax>>(outer, dims[o.axis], inner, o.select_last_index));
}

template <size_t... I>
void register_reductions(std::vector<OpDef>& table, std::index_sequence<I...>) {
  (table.push_back(OpDef{kReductions[I].op_type, infer_reduce<kReductions[I].reduce>,
                         make_reduce<kReductions[I].reduce>, 1u << 1}),
   ...);
}

}  // namespace

void register_reduce_kernels(std::vector<OpDef>& table) {
  register_reductions(table, std::make_index_sequence<std::size(kReductions)>());
  table.push_back(OpDef{"ArgMax", infer_arg, make_arg<true>});
  table.push_back(OpDef{"ArgMin", infer_arg, make_arg<false>});
}

}  // namespace kiln::kernels
