// Scans and selections along one axis: CumSum and TopK.
//
// CumSum's axis (input 1) does not change the output shape, so it may be a graph input: a
// constant is checked at compile time, anything else is read and checked at run time. Sums run
// sequentially along the axis, float inputs accumulating in double, integers wrapping modulo 2^64
// (no overflow UB) and truncated to the output width.
//
// TopK's k (input 1) sets the output shape: when it is not known at compile time (a constant or
// a shape computation), the runtime binds it from the data before the node runs. The order is a
// strict total one, so results do not depend on the sort algorithm or the thread count: by
// value (largest or smallest first), NaN counting as larger than every number (numpy's sort puts
// it last), and equal values by lower index first (the ONNX rule). sorted = 0 returns the same
// sorted order, which the spec allows.
#include <algorithm>
#include <cmath>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/reduce_geometry.h"

namespace kiln::kernels {
namespace {

struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at(const ConcreteShape& dims, int64_t axis) {
  return {product(std::span(dims).first(axis)), dims[axis],
          product(std::span(dims).subspan(axis + 1))};
}

StatusOr<bool> read_flag(const Attributes& a, const char* name, int64_t fallback) {
  KILN_ASSIGN_OR_RETURN(int64_t v, a.get_int(name, fallback));
  if (v != 0 && v != 1) return invalid_argument("attribute '{}' must be 0 or 1, got {}", name, v);
  return v == 1;
}

// ---- CumSum

struct CumSumOptions {
  bool exclusive = false;
  bool reverse = false;
};

StatusOr<CumSumOptions> read_cumsum_options(const Attributes& a) {
  KILN_RETURN_IF_ERROR(check_known_attributes(a, {"exclusive", "reverse"}));
  CumSumOptions o;
  KILN_ASSIGN_OR_RETURN(o.exclusive, read_flag(a, "exclusive", 0));
  KILN_ASSIGN_OR_RETURN(o.reverse, read_flag(a, "reverse", 0));
  return o;
}

Status infer_cumsum(InferArgs& args) {
  KILN_RETURN_IF_ERROR(read_cumsum_options(args.attributes).status());
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "x"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "x", numeric_dtypes()));
  KILN_ASSIGN_OR_RETURN(ValueType axis, required_input(args, 1, "axis"));
  KILN_RETURN_IF_ERROR(check_dtype(axis, 1, "axis", {DType::kI32, DType::kI64}));
  if (!(axis.shape.empty() || (axis.shape.size() == 1 && axis.shape[0] == DimExpr(1)))) {
    return invalid_argument("input 1 'axis' must be a scalar, got shape {}",
                            shape_to_string(axis.shape));
  }
  const auto rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) return invalid_argument("input 0 'x' must have rank >= 1, got a scalar");
  if (auto value = known_dim_values(args, 1); value && value->size() == 1) {
    if (auto a = (*value)[0].constant_value()) {
      KILN_RETURN_IF_ERROR(normalize_axis(*a, rank, "input 1 'axis'").status());
    }
  }
  args.outputs = {x};
  return ok_status();
}

class CumSumKernel : public Kernel {
 public:
  CumSumKernel(ConcreteShape dims, std::optional<int64_t> axis, CumSumOptions o)
      : dims_(std::move(dims)), axis_(axis), o_(o) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const auto rank = static_cast<int64_t>(dims_.size());
    int64_t axis = 0;
    if (axis_) {
      axis = *axis_;
    } else {
      const int64_t raw =
          in[1].dtype == DType::kI32 ? in[1].as<int32_t>()[0] : in[1].as<int64_t>()[0];
      KILN_ASSIGN_OR_RETURN(axis, normalize_axis(raw, rank, "input 1 'axis'"));
    }
    const AxisSplit s = split_at(dims_, axis);
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (std::is_same_v<T, Bool>) {
        return internal_error("no CumSum instance for bool");
      } else {
        const T* x = in[0].as<T>();
        T* y = out[0].as<T>();
        const int64_t n = s.n, inner = s.inner;
        parallel_ranges(s.outer * inner, n, [&](int64_t begin, int64_t end) {
          for (int64_t lane = begin; lane < end; ++lane) {
            const int64_t base = (lane / inner) * n * inner + lane % inner;
            using Acc = std::conditional_t<is_float_storage_v<T>, double, uint64_t>;
            Acc acc = 0;
            for (int64_t step = 0; step < n; ++step) {
              const int64_t at = base + (o_.reverse ? n - 1 - step : step) * inner;
              Acc v;
              if constexpr (is_float_storage_v<T>) {
                v = static_cast<double>(load(x, at));
              } else {
                v = static_cast<uint64_t>(
                    static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(x[at]));
              }
              if (!o_.exclusive) acc += v;
              store(y, at, static_cast<compute_t<T>>(acc));
              if (o_.exclusive) acc += v;
            }
          }
        });
        return ok_status();
      }
    });
  }

 private:
  ConcreteShape dims_;
  std::optional<int64_t> axis_;  // nullopt: read at run time
  CumSumOptions o_;
};

StatusOr<std::unique_ptr<Kernel>> make_cumsum(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(CumSumOptions o, read_cumsum_options(args.attributes));
  ConcreteShape dims = args.input_dims(0);
  std::optional<int64_t> axis;
  if (args.constants.size() > 1 && args.constants[1] != nullptr &&
      args.constants[1]->element_count() == 1) {
    KILN_ASSIGN_OR_RETURN(axis,
                          normalize_axis(element_as_int64(*args.constants[1], 0),
                                         static_cast<int64_t>(dims.size()), "input 1 'axis'"));
  }
  return std::unique_ptr<Kernel>(std::make_unique<CumSumKernel>(std::move(dims), axis, o));
}

// ---- TopK

struct TopKOptions {
  int64_t axis = -1;
  bool largest = true;
};

StatusOr<TopKOptions> read_topk_options(const Attributes& a, int64_t rank) {
  KILN_RETURN_IF_ERROR(check_known_attributes(a, {"axis", "largest", "sorted"}));
  TopKOptions o;
  KILN_ASSIGN_OR_RETURN(int64_t axis, a.get_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(o.largest, read_flag(a, "largest", 1));
  KILN_RETURN_IF_ERROR(read_flag(a, "sorted", 1).status());
  KILN_ASSIGN_OR_RETURN(o.axis, normalize_axis(axis, rank, "attribute 'axis'"));
  return o;
}

Status infer_topk(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", numeric_dtypes()));
  const auto rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) return invalid_argument("input 0 'X' must have rank >= 1, got a scalar");
  KILN_ASSIGN_OR_RETURN(TopKOptions o, read_topk_options(args.attributes, rank));
  KILN_ASSIGN_OR_RETURN(ValueType k_type, required_input(args, 1, "K"));
  KILN_RETURN_IF_ERROR(check_dtype(k_type, 1, "K", {DType::kI64}));
  KILN_RETURN_IF_ERROR(check_rank_range(k_type, 1, "K", 0, 1));
  if (auto count = symbolic_element_count(k_type.shape).constant_value(); count && *count != 1) {
    return invalid_argument("input 1 'K' must hold one value, got {}", *count);
  }
  DimExpr k;
  if (auto values = known_dim_values(args, 1); values && values->size() == 1) {
    k = values->front();
  } else if (args.data_dim) {
    KILN_ASSIGN_OR_RETURN(k, args.data_dim(0));
  } else {
    return unimplemented(
        "input 1 'K' must be known at compile time here (a constant, or "
        "computed from shapes and constants)");
  }
  const DimExpr& n = x.shape[o.axis];
  if (auto kv = k.constant_value()) {
    if (*kv < 0) return invalid_argument("input 1 'K' = {} must be >= 0", *kv);
    if (auto nv = n.constant_value(); nv && *kv > *nv) {
      return invalid_argument("input 1 'K' = {} exceeds input 0 'X' dim {} (the axis) = {}", *kv,
                              o.axis, *nv);
    }
  }
  Shape out = x.shape;
  out[o.axis] = k;
  args.outputs = {ValueType{x.dtype, out}, ValueType{DType::kI64, out}};
  return ok_status();
}

class TopKKernel : public Kernel {
 public:
  TopKKernel(AxisSplit s, int64_t k, bool largest) : s_(s), k_(k), largest_(largest) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (std::is_same_v<T, Bool>) {
        return internal_error("no TopK instance for bool");
      } else {
        using C = compute_t<T>;
        const T* x = in[0].as<T>();
        T* values = out[0].as<T>();
        int64_t* indices = out[1].as<int64_t>();
        const int64_t n = s_.n, inner = s_.inner, k = k_;
        parallel_ranges(s_.outer * inner, n, [&](int64_t begin, int64_t end) {
          std::vector<int64_t> order(static_cast<size_t>(n));
          std::vector<C> v(static_cast<size_t>(n));
          for (int64_t lane = begin; lane < end; ++lane) {
            const int64_t o = lane / inner, i = lane % inner;
            const int64_t base = o * n * inner + i;
            for (int64_t j = 0; j < n; ++j) {
              order[j] = j;
              v[j] = load(x, base + j * inner);
            }
            // a before b: strictly better value, or equal values and a lower index.
            auto before = [&](int64_t a, int64_t b) {
              const C va = v[a], vb = v[b];
              if constexpr (std::is_floating_point_v<C>) {
                const bool na = std::isnan(va), nb = std::isnan(vb);
                if (na || nb) {
                  if (na && nb) return a < b;
                  return largest_ ? na : nb;
                }
              }
              if (va != vb) return largest_ ? va > vb : va < vb;
              return a < b;
            };
            std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
            const int64_t obase = o * k * inner + i;
            for (int64_t j = 0; j < k; ++j) {
              store(values, obase + j * inner, v[order[j]]);
              indices[obase + j * inner] = order[j];
            }
          }
        });
        return ok_status();
      }
    });
  }

 private:
  AxisSplit s_;
  int64_t k_;
  bool largest_;
};

StatusOr<std::unique_ptr<Kernel>> make_topk(const MakeArgs& args) {
  const ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(TopKOptions o,
                        read_topk_options(args.attributes, static_cast<int64_t>(dims.size())));
  const int64_t k = args.output_dims(0)[o.axis];
  if (k < 0 || k > dims[o.axis]) {
    return invalid_argument("input 1 'K' = {} is out of range [0, {}]", k, dims[o.axis]);
  }
  return std::unique_ptr<Kernel>(
      std::make_unique<TopKKernel>(split_at(dims, o.axis), k, o.largest));
}

StatusOr<std::vector<int64_t>> topk_sizes(const Attributes& attributes,
                                          std::span<const Tensor> inputs) {
  if (inputs.size() < 2 || inputs[0].empty_storage() || inputs[1].empty_storage()) {
    return invalid_argument("TopK needs inputs 0 'X' and 1 'K'");
  }
  if (inputs[1].dtype() != DType::kI64 || inputs[1].element_count() != 1) {
    return invalid_argument("input 1 'K' must hold one i64 value, got {} {}",
                            inputs[1].element_count(), dtype_name(inputs[1].dtype()));
  }
  KILN_ASSIGN_OR_RETURN(TopKOptions o, read_topk_options(attributes, inputs[0].rank()));
  const int64_t k = element_as_int64(inputs[1], 0), n = inputs[0].shape()[o.axis];
  if (k < 0 || k > n) {
    return invalid_argument("input 1 'K' = {} is out of range [0, {}] (input 0 'X' dim {})", k, n,
                            o.axis);
  }
  return std::vector<int64_t>{k};
}

}  // namespace

void register_scan_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"CumSum", infer_cumsum, make_cumsum});
  table.push_back(OpDef{"TopK", infer_topk, make_topk, 0, topk_sizes});
}

}  // namespace kiln::kernels
