// Ops that make a tensor from a few values: OneHot, EyeLike, Range, ConstantOfShape, the
// HannWindow, HammingWindow and BlackmanWindow signal windows, and Constant (which the importer
// turns into constant values). Where an
// input's values decide the output shape (OneHot's depth, Range's operands, ConstantOfShape's
// shape) they must be known at compile time (OpDef::compile_time_inputs), except Range's, whose
// length is a data-dependent size (InferArgs::data_dim) when its operands are computed at run
// time; the kernels take every size from the dims make() was given and read only the remaining
// values at run time.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "kiln/base/checked_math.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/index_util.h"

namespace kiln::kernels {
namespace {

// Output values are propagated for shape computations only up to this many elements.
constexpr int64_t kMaxPropagatedValues = 1024;

// The known values of a required integer input (input_dim_values without the optional).
StatusOr<std::vector<DimExpr>> required_dim_values(const InferArgs& args, size_t index,
                                                   std::string_view name) {
  StatusOr<std::optional<std::vector<DimExpr>>> known = input_dim_values(args, index, name);
  if (!known.ok()) return known.status();
  if (!known->has_value()) return invalid_argument("{} is required", input_label(index, name));
  return std::move(known->value());
}

// ---- OneHot(indices, depth, values) ----

// The depth: a constant of any numeric dtype (truncated), or an integer known as an expression.
StatusOr<DimExpr> onehot_depth(const InferArgs& args) {
  if (const Tensor* t = constant_input(args, 1)) {
    const double d = element_as_double(*t, 0);
    if (!std::isfinite(d) || d < 0 || d >= 9.0e18) {
      return invalid_argument("input 1 'depth' = {} must be a non-negative count", d);
    }
    return DimExpr(static_cast<int64_t>(d));
  }
  if (auto values = known_dim_values(args, 1); values && values->size() == 1) {
    const DimExpr& d = (*values)[0];
    if (auto c = d.constant_value(); c && *c < 0) {
      return invalid_argument("input 1 'depth' = {} must be a non-negative count", *c);
    }
    return d;
  }
  return unimplemented(
      "input 1 'depth' must be known at compile time (a constant, or computed "
      "from shapes and constants)");
}

Status infer_onehot(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"axis"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3));
  KILN_ASSIGN_OR_RETURN(ValueType indices, required_input(args, 0, "indices"));
  KILN_ASSIGN_OR_RETURN(ValueType depth, required_input(args, 1, "depth"));
  KILN_ASSIGN_OR_RETURN(ValueType values, required_input(args, 2, "values"));
  KILN_RETURN_IF_ERROR(check_dtype(indices, 0, "indices", numeric_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(depth, 1, "depth", numeric_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(values, 2, "values", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_scalar(depth, 1, "depth"));
  KILN_RETURN_IF_ERROR(check_rank(values, 2, "values", 1));
  KILN_RETURN_IF_ERROR(
      check_dims_equal(values.shape[0], DimExpr(2), "input 2 'values' length ([off, on])"));
  KILN_RETURN_IF_ERROR(check_rank_range(indices, 0, "indices", 0, 63));
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", -1));
  const auto rank = static_cast<int64_t>(indices.shape.size());
  // The axis counts in the output, which has one more dim.
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw_axis, rank + 1, "attribute 'axis'"));
  KILN_ASSIGN_OR_RETURN(DimExpr d, onehot_depth(args));
  Shape out = indices.shape;
  out.insert(out.begin() + axis, d);
  args.outputs = {ValueType{values.dtype, std::move(out)}};
  return ok_status();
}

// out[o, j, i] = values[1] if indices[o, i] (truncated, negative counting from depth) == j, else
// values[0]. Indices outside [-depth, depth - 1] give a row of values[0].
class OneHotKernel : public Kernel {
 public:
  OneHotKernel(int64_t outer, int64_t depth, int64_t inner, size_t element_size)
      : outer_(outer), depth_(depth), inner_(inner), element_size_(element_size) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t count = outer_ * inner_;
    std::vector<int64_t> hot(static_cast<size_t>(count), -1);
    visit_dtype(in[0].dtype, [&]<typename T>() {
      if constexpr (!std::is_same_v<T, Bool>) {
        const T* x = in[0].as<T>();
        for (int64_t i = 0; i < count; ++i) {
          const double v = std::trunc(static_cast<double>(load(x, i)));
          if (v >= -static_cast<double>(depth_) && v < static_cast<double>(depth_)) {
            const auto h = static_cast<int64_t>(v);
            hot[i] = h < 0 ? h + depth_ : h;
          }
        }
      }
    });
    return visit_element_size(element_size_, [&]<typename U>() -> Status {
      U off, on;
      std::memcpy(&off, in[2].data, sizeof(U));
      std::memcpy(&on, in[2].data + sizeof(U), sizeof(U));
      U* y = reinterpret_cast<U*>(out[0].data);
      parallel_for(outer_ * depth_, [&](int64_t r) {
        const int64_t o = r / depth_;
        const int64_t j = r % depth_;
        U* row = y + r * inner_;
        const int64_t* h = hot.data() + o * inner_;
        for (int64_t i = 0; i < inner_; ++i) row[i] = h[i] == j ? on : off;
      });
      return ok_status();
    });
  }

 private:
  int64_t outer_, depth_, inner_;
  size_t element_size_;
};

StatusOr<std::unique_ptr<Kernel>> make_onehot(const MakeArgs& args) {
  ConcreteShape dims = args.output_dims(0);
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw_axis, dims.size(), "attribute 'axis'"));
  return std::unique_ptr<Kernel>(std::make_unique<OneHotKernel>(
      product(std::span(dims).first(axis)), dims[axis], product(std::span(dims).subspan(axis + 1)),
      dtype_size(args.outputs[0].dtype)));
}

// ---- EyeLike(input) ----

Status infer_eyelike(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"dtype", "k"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_rank(x, 0, "input", 2));
  KILN_RETURN_IF_ERROR(args.attributes.get_int("k", 0).status());
  if (args.attributes.has("dtype")) {
    KILN_ASSIGN_OR_RETURN(int64_t code, args.attributes.get_int("dtype", 1));
    KILN_ASSIGN_OR_RETURN(x.dtype, dtype_from_onnx_code(code, "dtype"));
  }
  args.outputs = {x};
  return ok_status();
}

// Ones on the diagonal j = i + k, zeros elsewhere.
class EyeLikeKernel : public Kernel {
 public:
  EyeLikeKernel(int64_t rows, int64_t cols, int64_t k) : rows_(rows), cols_(cols), k_(k) {}
  Status run(std::span<const ConstBuffer>, std::span<const MutableBuffer> out) const override {
    const MutableBuffer& y = out[0];
    const size_t bytes = static_cast<size_t>(rows_ * cols_) * dtype_size(y.dtype);
    if (bytes > 0) std::memset(y.data, 0, bytes);
    if (k_ >= cols_ || k_ <= -rows_) return ok_status();
    const int64_t first = k_ < 0 ? -k_ : 0;
    const int64_t last = std::min(rows_, cols_ - k_);  // exclusive
    visit_dtype(y.dtype, [&]<typename T>() {
      T* p = y.as<T>();
      for (int64_t i = first; i < last; ++i) store(p, i * cols_ + i + k_, compute_t<T>(1));
    });
    return ok_status();
  }

 private:
  int64_t rows_, cols_, k_;
};

StatusOr<std::unique_ptr<Kernel>> make_eyelike(const MakeArgs& args) {
  ConcreteShape dims = args.output_dims(0);
  KILN_ASSIGN_OR_RETURN(int64_t k, args.attributes.get_int("k", 0));
  return std::unique_ptr<Kernel>(std::make_unique<EyeLikeKernel>(dims[0], dims[1], k));
}

// ---- Range(start, limit, delta) ----

// max(ceil((limit - start) / delta), 0) for constants of any numeric dtype.
StatusOr<int64_t> range_length(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  if (is_float(start.dtype())) {
    const double s = element_as_double(start, 0);
    const double l = element_as_double(limit, 0);
    const double d = element_as_double(delta, 0);
    if (!std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d) || d == 0) {
      return invalid_argument(
          "Range(start {}, limit {}, delta {}) needs finite values and a "
          "nonzero delta",
          s, l, d);
    }
    const double n = std::ceil((l - s) / d);
    if (!(n < 9.0e18)) {
      return invalid_argument("Range(start {}, limit {}, delta {}) is too long", s, l, d);
    }
    return n > 0 ? static_cast<int64_t>(n) : 0;
  }
  auto read = [](const Tensor& t) -> __int128 {
    if (t.dtype() == DType::kU64) return static_cast<__int128>(t.values<uint64_t>()[0]);
    return element_as_int64(t, 0);
  };
  const __int128 s = read(start), l = read(limit), d = read(delta);
  if (d == 0) return invalid_argument("Range delta must be nonzero");
  __int128 diff = l - s;
  __int128 n =
      d > 0 ? (diff <= 0 ? 0 : (diff + d - 1) / d) : (diff >= 0 ? 0 : (-diff - d - 1) / -d);
  if (n > std::numeric_limits<int64_t>::max()) return invalid_argument("Range is too long");
  return static_cast<int64_t>(n);
}

// The length as an expression when the operands are integers known from shapes.
StatusOr<DimExpr> symbolic_range_length(const std::vector<DimExpr>& s,
                                        const std::vector<DimExpr>& l,
                                        const std::vector<DimExpr>& d) {
  auto delta = d[0].constant_value();
  if (!delta || *delta == 0) {
    return unimplemented("Range delta must be a nonzero constant, got '{}'", d[0].to_string());
  }
  const DimExpr diff = *delta > 0 ? l[0] - s[0] : s[0] - l[0];
  const int64_t step = *delta > 0 ? *delta : -*delta;
  if (auto c = diff.constant_value()) {
    return DimExpr(*c <= 0 ? 0 : (*c - 1) / step + 1);
  }
  // DimExpr::max drops the clamp where diff is provably nonnegative (8*N, S - floor(S/2)).
  return DimExpr::max(diff.ceil_div(step), DimExpr(0));
}

Status infer_range(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3));
  const char* names[] = {"start", "limit", "delta"};
  std::vector<ValueType> types;
  for (size_t i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(ValueType t, required_input(args, i, names[i]));
    KILN_RETURN_IF_ERROR(check_dtype(t, i, names[i], numeric_dtypes()));
    if (i > 0) {
      KILN_RETURN_IF_ERROR(check_same_dtype(t, i, names[i], types[0].dtype, "input 0 'start'"));
    }
    KILN_RETURN_IF_ERROR(check_scalar(t, i, names[i]));
    types.push_back(t);
  }
  const DType dtype = types[0].dtype;
  const Tensor* c[3] = {constant_input(args, 0), constant_input(args, 1), constant_input(args, 2)};
  DimExpr length;
  if (c[0] != nullptr && c[1] != nullptr && c[2] != nullptr) {
    KILN_ASSIGN_OR_RETURN(int64_t n, range_length(*c[0], *c[1], *c[2]));
    length = DimExpr(n);
  } else {
    // Operands from shapes: integers, or whole numbers in a float type (torch.arange(S).float()
    // is Range(0.0, Cast(S), 1.0)).
    std::vector<DimExpr> v[3];
    std::optional<size_t> unknown;
    for (size_t i = 0; i < 3 && !unknown; ++i) {
      auto known = known_dim_values(args, i);
      if (!known) {
        unknown = i;
      } else if (known->size() != 1) {
        return invalid_argument("{} must be a scalar", input_label(i, names[i]));
      } else {
        v[i] = std::move(*known);
      }
    }
    if (!unknown) {
      KILN_ASSIGN_OR_RETURN(length, symbolic_range_length(v[0], v[1], v[2]));
    } else if (args.data_dim) {
      // Operands computed from data (a window's length cast to float): the runtime binds the
      // length from their values before the node runs (range_sizes).
      KILN_ASSIGN_OR_RETURN(length, args.data_dim(0));
    } else {
      return unimplemented(
          "{} must be known at compile time (a constant, or computed from shapes and "
          "constants; a float one must be a whole number)",
          input_label(*unknown, names[*unknown]));
    }
  }
  args.outputs = {ValueType{dtype, Shape{length}}};
  // Integer ranges feed shape computations (axes lists, Gather indices).
  auto n = length.constant_value();
  auto start = known_dim_values(args, 0);
  auto delta = known_dim_values(args, 2);
  if (n && *n <= kMaxPropagatedValues && start && delta && start->size() == 1 &&
      delta->size() == 1) {
    std::vector<DimExpr> values;
    for (int64_t i = 0; i < *n; ++i) values.push_back((*start)[0] + DimExpr(i) * (*delta)[0]);
    set_output_values(args, 0, std::move(values));
  }
  return ok_status();
}

// Range's data-dependent length, from the operands' values.
StatusOr<std::vector<int64_t>> range_sizes(const Attributes&, std::span<const Tensor> inputs) {
  if (inputs.size() < 3 || inputs[0].empty_storage() || inputs[1].empty_storage() ||
      inputs[2].empty_storage()) {
    return invalid_argument("Range needs inputs 0 'start', 1 'limit' and 2 'delta'");
  }
  KILN_ASSIGN_OR_RETURN(int64_t n, range_length(inputs[0], inputs[1], inputs[2]));
  return std::vector<int64_t>{n};
}

// out[i] = start + i * delta; the count comes from make(), start and delta from the buffers.
class RangeKernel : public Kernel {
 public:
  explicit RangeKernel(int64_t count) : count_(count) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    visit_dtype(out[0].dtype, [&]<typename T>() {
      if constexpr (is_float_storage_v<T>) {
        const double s = static_cast<double>(load(in[0].as<T>(), 0));
        const double d = static_cast<double>(load(in[2].as<T>(), 0));
        T* y = out[0].as<T>();
        parallel_for(count_, [&](int64_t i) {
          store(y, i, static_cast<compute_t<T>>(s + static_cast<double>(i) * d));
        });
      } else if constexpr (!std::is_same_v<T, Bool>) {
        // Wrapping arithmetic: every element lies between start and limit, so nothing wraps in
        // the end, but intermediate products must not be signed overflow.
        const auto s = static_cast<uint64_t>(in[0].as<T>()[0]);
        const auto d = static_cast<uint64_t>(in[2].as<T>()[0]);
        T* y = out[0].as<T>();
        parallel_for(count_,
                     [&](int64_t i) { y[i] = static_cast<T>(s + static_cast<uint64_t>(i) * d); });
      }
    });
    return ok_status();
  }

 private:
  int64_t count_;
};

StatusOr<std::unique_ptr<Kernel>> make_range(const MakeArgs& args) {
  return std::unique_ptr<Kernel>(std::make_unique<RangeKernel>(args.output_dims(0)[0]));
}

// ---- ConstantOfShape(input) ----

// The fill value and dtype: attribute 'value' (int or float) and 'kiln_value_dtype' as the
// importer stores ONNX's one-element tensor (ops/registry.h); f32 0 when absent.
struct Fill {
  DType dtype = DType::kF32;
  double real = 0;
  int64_t integer = 0;
};

StatusOr<Fill> read_fill(const Attributes& a) {
  Fill fill;
  auto it = a.all().find("value");
  bool is_int = false;
  if (it != a.all().end()) {
    if (const auto* i = std::get_if<int64_t>(&it->second)) {
      fill.integer = *i;
      fill.real = static_cast<double>(*i);
      fill.dtype = DType::kI64;
      is_int = true;
    } else if (const auto* f = std::get_if<double>(&it->second)) {
      fill.real = *f;
      fill.dtype = DType::kF32;
    } else {
      return invalid_argument(
          "attribute 'value' must be a number (the importer's form of the "
          "ONNX tensor)");
    }
  }
  if (a.has("kiln_value_dtype")) {
    KILN_ASSIGN_OR_RETURN(std::string name, a.get_string("kiln_value_dtype", ""));
    auto dtype = parse_dtype(name);
    if (!dtype) return invalid_argument("attribute 'kiln_value_dtype' = '{}' is not a dtype", name);
    fill.dtype = *dtype;
    if (is_float(*dtype) == is_int && it != a.all().end()) {
      return invalid_argument("attribute 'value' is {} but 'kiln_value_dtype' is {}",
                              is_int ? "an int" : "a float", name);
    }
  }
  return fill;
}

Status infer_constant_of_shape(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"value", "kiln_value_dtype"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType shape, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(shape, 0, "input", {DType::kI64}));
  KILN_RETURN_IF_ERROR(check_rank(shape, 0, "input", 1));
  KILN_ASSIGN_OR_RETURN(Fill fill, read_fill(args.attributes));
  KILN_ASSIGN_OR_RETURN(std::vector<DimExpr> dims, required_dim_values(args, 0, "input"));
  std::vector<int64_t> constant;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (auto c = dims[i].constant_value()) {
      if (*c < 0) return invalid_argument("input 0 'input' element {} = {} is negative", i, *c);
      constant.push_back(*c);
    }
  }
  if (!checked_product(constant)) {
    return invalid_argument("the output of shape {} has too many elements",
                            shape_to_string(Shape(dims.begin(), dims.end())));
  }
  Shape out(dims.begin(), dims.end());
  if (out.size() == 1 && is_integer(fill.dtype)) {
    if (auto n = out[0].constant_value(); n && *n <= kMaxPropagatedValues) {
      set_output_values(args, 0, std::vector<DimExpr>(static_cast<size_t>(*n), fill.integer));
    }
  }
  args.outputs = {ValueType{fill.dtype, std::move(out)}};
  return ok_status();
}

// Fills the output with one element's bytes, made at make().
class FillKernel : public Kernel {
 public:
  FillKernel(uint64_t pattern, size_t element_size)
      : pattern_(pattern), element_size_(element_size) {}
  Status run(std::span<const ConstBuffer>, std::span<const MutableBuffer> out) const override {
    return visit_element_size(element_size_, [&]<typename U>() -> Status {
      U v;
      std::memcpy(&v, &pattern_, sizeof(U));
      U* y = reinterpret_cast<U*>(out[0].data);
      parallel_for(out[0].element_count(), [&](int64_t i) { y[i] = v; });
      return ok_status();
    });
  }

 private:
  uint64_t pattern_;  // the element in its first element_size_ bytes
  size_t element_size_;
};

StatusOr<std::unique_ptr<Kernel>> make_constant_of_shape(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(Fill fill, read_fill(args.attributes));
  uint64_t pattern = 0;
  visit_dtype(fill.dtype, [&]<typename T>() {
    T element[1];
    if constexpr (is_float_storage_v<T>) {
      store(element, 0, static_cast<compute_t<T>>(fill.real));
    } else if constexpr (std::is_same_v<T, Bool>) {
      store(element, 0, fill.integer != 0);
    } else {
      element[0] = static_cast<T>(fill.integer);
    }
    std::memcpy(&pattern, element, sizeof(T));
  });
  return std::unique_ptr<Kernel>(std::make_unique<FillKernel>(pattern, dtype_size(fill.dtype)));
}

// ---- HannWindow, HammingWindow, BlackmanWindow(size) ----
// w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) for n in [0, size), with N = size when
// `periodic` = 1 (the default) and size - 1 when 0, as ONNX defines them: Hann a0 = a1 = 0.5;
// Hamming a0 = 25/46, a1 = 21/46; Blackman a0 = 0.42, a1 = 0.5, a2 = 0.08. Computed in double
// and rounded once to `output_datatype` (an ONNX dtype code, default f32; integer dtypes
// truncate). A symmetric window of size 1 (N = 0) is [1], as in PyTorch and SciPy, where ONNX's
// reference divides 0 by 0. The size must be known at compile time: it is the output's length.

struct WindowCoefficients {
  double a0 = 0, a1 = 0, a2 = 0;
};

struct WindowOptions {
  DType dtype = DType::kF32;
  bool periodic = true;
};

StatusOr<WindowOptions> read_window_options(const Attributes& a) {
  KILN_RETURN_IF_ERROR(check_known_attributes(a, {"output_datatype", "periodic"}));
  WindowOptions o;
  KILN_ASSIGN_OR_RETURN(int64_t code, a.get_int("output_datatype", 1));
  KILN_ASSIGN_OR_RETURN(o.dtype, dtype_from_onnx_code(code, "output_datatype"));
  if (o.dtype == DType::kBool) {
    return invalid_argument("attribute 'output_datatype' = {} (bool) is not a numeric type", code);
  }
  KILN_ASSIGN_OR_RETURN(int64_t periodic, a.get_int("periodic", 1));
  if (periodic != 0 && periodic != 1) {
    return invalid_argument("attribute 'periodic' must be 0 or 1, got {}", periodic);
  }
  o.periodic = periodic == 1;
  return o;
}

// The window length: input 0 'size', a constant or a value known from shapes.
StatusOr<DimExpr> window_size(const InferArgs& args) {
  if (const Tensor* t = constant_input(args, 0)) {
    const int64_t n = element_as_int64(*t, 0);
    if (n < 0) return invalid_argument("input 0 'size' = {} must be >= 0", n);
    return DimExpr(n);
  }
  if (auto values = known_dim_values(args, 0); values && values->size() == 1) {
    const DimExpr& n = (*values)[0];
    if (auto c = n.constant_value(); c && *c < 0) {
      return invalid_argument("input 0 'size' = {} must be >= 0", *c);
    }
    return n;
  }
  return unimplemented(
      "input 0 'size' must be known at compile time (a constant, or computed from shapes and "
      "constants): it is the output's length");
}

Status infer_window(InferArgs& args) {
  KILN_ASSIGN_OR_RETURN(WindowOptions o, read_window_options(args.attributes));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType size, required_input(args, 0, "size"));
  KILN_RETURN_IF_ERROR(check_dtype(size, 0, "size", {DType::kI32, DType::kI64}));
  KILN_RETURN_IF_ERROR(check_scalar(size, 0, "size"));
  KILN_ASSIGN_OR_RETURN(DimExpr length, window_size(args));
  args.outputs = {ValueType{o.dtype, Shape{length}}};
  return ok_status();
}

class WindowKernel : public Kernel {
 public:
  WindowKernel(WindowCoefficients c, bool periodic) : c_(c), periodic_(periodic) {}
  Status run(std::span<const ConstBuffer>, std::span<const MutableBuffer> out) const override {
    const int64_t size = out[0].element_count();
    const int64_t n_total = periodic_ ? size : size - 1;
    constexpr double kTwoPi = 6.283185307179586476925286766559;
    visit_dtype(out[0].dtype, [&]<typename T>() {
      if constexpr (!std::is_same_v<T, Bool>) {
        T* y = out[0].as<T>();
        for (int64_t n = 0; n < size; ++n) {
          double w = 1;
          if (n_total > 0) {
            const double x = kTwoPi * static_cast<double>(n) / static_cast<double>(n_total);
            w = c_.a0 - c_.a1 * std::cos(x) + c_.a2 * std::cos(2 * x);
          }
          if constexpr (is_float_storage_v<T>) {
            store(y, n, static_cast<compute_t<T>>(w));
          } else {
            y[n] = static_cast<T>(w);
          }
        }
      }
    });
    return ok_status();
  }

 private:
  WindowCoefficients c_;
  bool periodic_;
};

template <int kWindow>  // 0 Hann, 1 Hamming, 2 Blackman
StatusOr<std::unique_ptr<Kernel>> make_window(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(WindowOptions o, read_window_options(args.attributes));
  constexpr WindowCoefficients kCoefficients[] = {
      {0.5, 0.5, 0}, {25.0 / 46.0, 21.0 / 46.0, 0}, {0.42, 0.5, 0.08}};
  return std::unique_ptr<Kernel>(
      std::make_unique<WindowKernel>(kCoefficients[kWindow], o.periodic));
}

// ---- Constant ----
// kiln's Attributes cannot hold Constant's tensor, so the importer turns every Constant node into
// a constant value (and folds what reads only constants). The definition makes the op count as
// supported; a Constant node that reaches shape inference is an error.
Status infer_constant(InferArgs&) {
  return failed_precondition(
      "Constant nodes must be turned into constant values by the importer; this one reached op "
      "inference");
}

}  // namespace

void register_generate_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{.op_type = "Constant", .infer = infer_constant});
  table.push_back(OpDef{"HannWindow", infer_window, make_window<0>, 1u << 0});
  table.push_back(OpDef{"HammingWindow", infer_window, make_window<1>, 1u << 0});
  table.push_back(OpDef{"BlackmanWindow", infer_window, make_window<2>, 1u << 0});
  table.push_back(OpDef{"OneHot", infer_onehot, make_onehot, 1u << 1});
  table.push_back(OpDef{"EyeLike", infer_eyelike, make_eyelike});
  table.push_back(OpDef{"Range", infer_range, make_range, 0b111u, range_sizes});
  table.push_back(
      OpDef{"ConstantOfShape", infer_constant_of_shape, make_constant_of_shape, 1u << 0});
}

}  // namespace kiln::kernels
