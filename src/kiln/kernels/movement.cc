// Ops that move or relabel data without arithmetic: Transpose, Concat, Split, Slice, Squeeze,
// Unsqueeze, Flatten, Reshape, Identity, Dropout, Expand, ReverseSequence. They accept
// every dtype and run on bytes (strided_copy.h); Dropout in training mode scales what it keeps.
// Those that carry small integer tensors (shape computations such as Reshape(x,
// Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))) also pass the element values through, so symbolic
// dims survive them.
#include <algorithm>
#include <cstring>
#include <limits>

#include "kiln/base/checked_math.h"
#include "kiln/kernels/broadcast.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/movement_util.h"
#include "kiln/kernels/op_attributes.h"
#include "kiln/kernels/random.h"
#include "kiln/kernels/strided_copy.h"

namespace kiln::kernels {
namespace {

StatusOr<std::unique_ptr<Kernel>> make_copy(const MakeArgs&) { return make_copy_kernel(); }

// Passes input 0's element values to output 0 in the same row-major order (Identity, Reshape,
// Flatten, Squeeze, Unsqueeze) when they are known and the output's dims are constants (or it
// has rank <= 1).
void forward_values(InferArgs& args) {
  if (args.outputs.empty()) return;
  auto values = known_dim_values(args, 0, /*any_rank=*/true);
  if (!values) return;
  const Shape& out = args.outputs[0].shape;
  if (out.size() > 1) {
    DimExpr count(1);
    for (const DimExpr& d : out) count = count * d;
    if (count != DimExpr(static_cast<int64_t>(values->size()))) return;
  }
  set_output_values(args, 0, std::move(*values));
}

// ---- Identity, Dropout ----

Status infer_identity(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  args.outputs = {x};
  forward_values(args);
  return ok_status();
}

// Dropout: at inference (training_mode absent or false) the output is the input and the mask
// all true. In training mode each element is kept with probability 1 - ratio (kiln's
// CounterRandom: element i is kept when uniform(i) >= ratio), kept elements are scaled by
// 1 / (1 - ratio) and the mask says which were kept; ratio 0 keeps everything. The 'seed'
// attribute fixes the draws (the same mask on every run); without it every run draws anew.
// ratio (default 0.5) must lie in [0, 1): checked here when it is a constant, else when it runs.
Status check_dropout_ratio(double ratio) {
  if (!(ratio >= 0 && ratio < 1)) {
    return invalid_argument("input 1 'ratio' must be in [0, 1) in training mode, got {}", ratio);
  }
  return ok_status();
}

Status infer_dropout(InferArgs& args) {
  // 'ratio' is the attribute of opsets 7-11, which models converted to opset 17 may still carry;
  // the ratio input replaced it.
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"seed", "ratio"}));
  KILN_RETURN_IF_ERROR(args.attributes.get_int("seed", 0).status());
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 3, 1, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "data"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "data", float_dtypes()));
  if (const ValueType* ratio = optional_input(args, 1)) {
    KILN_RETURN_IF_ERROR(check_dtype(*ratio, 1, "ratio", float_dtypes()));
    KILN_RETURN_IF_ERROR(check_rank(*ratio, 1, "ratio", 0));
  }
  bool training = false;
  if (const ValueType* mode = optional_input(args, 2)) {
    KILN_RETURN_IF_ERROR(check_dtype(*mode, 2, "training_mode", {DType::kBool}));
    KILN_RETURN_IF_ERROR(check_rank(*mode, 2, "training_mode", 0));
    if (const Tensor* t = constant_input(args, 2)) {
      if (t->dtype() != DType::kBool || t->element_count() != 1) {
        return invalid_argument("input 2 'training_mode' must be a single bool, got {} {}",
                                dtype_name(t->dtype()), shape_to_string(t->shape()));
      }
      training = element_as_int64(*t, 0) != 0;
    }
  }
  if (training) {
    if (const Tensor* r = constant_input(args, 1); r != nullptr && r->element_count() == 1) {
      KILN_RETURN_IF_ERROR(check_dropout_ratio(element_as_double(*r, 0)));
    }
  }
  args.outputs = {x};
  if (args.output_count > 1) args.outputs.push_back(ValueType{DType::kBool, x.shape});
  return ok_status();
}

class DropoutKernel : public Kernel {
 public:
  explicit DropoutKernel(std::optional<int64_t> seed) : seed_(seed) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t n = out[0].element_count();
    uint8_t* mask = out.size() > 1 && out[1].data != nullptr ? out[1].as<uint8_t>() : nullptr;
    const bool training = in.size() > 2 && in[2].data != nullptr && in[2].element_count() > 0 &&
                          in[2].as<uint8_t>()[0] != 0;
    double ratio = 0.5;
    if (in.size() > 1 && in[1].data != nullptr && in[1].element_count() > 0) {
      ratio = visit_dtype(in[1].dtype, [&]<typename R>() {
        if constexpr (is_float_storage_v<R>) {
          return static_cast<double>(load(in[1].as<R>(), 0));
        } else {
          return 0.5;  // infer accepts float ratios only
        }
      });
    }
    if (training) KILN_RETURN_IF_ERROR(check_dropout_ratio(ratio));
    if (!training || ratio == 0) {
      if (n > 0) {
        std::memcpy(out[0].data, in[0].data, static_cast<size_t>(n) * dtype_size(out[0].dtype));
        if (mask != nullptr) std::memset(mask, 1, static_cast<size_t>(n));
      }
      return ok_status();
    }
    const CounterRandom random(seed_ ? static_cast<uint64_t>(*seed_) : fresh_seed());
    const double scale = 1 / (1 - ratio);
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (is_float_storage_v<T>) {
        const T* x = in[0].as<T>();
        T* y = out[0].as<T>();
        // Element i's draw depends on i alone, so the blocks may run on any threads.
        parallel_blocks(n, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            const bool keep = random.uniform(static_cast<uint64_t>(i)) >= ratio;
            const double v = keep ? static_cast<double>(load(x, i)) * scale : 0.0;
            store(y, i, static_cast<compute_t<T>>(v));
            if (mask != nullptr) mask[i] = keep ? 1 : 0;
          }
        });
        return ok_status();
      } else {
        return internal_error("Dropout of dtype {}", dtype_name(in[0].dtype));
      }
    });
  }

 private:
  std::optional<int64_t> seed_;
};

StatusOr<std::unique_ptr<Kernel>> make_dropout(const MakeArgs& args) {
  std::optional<int64_t> seed;
  if (args.attributes.has("seed")) {
    KILN_ASSIGN_OR_RETURN(int64_t s, args.attributes.get_int("seed", 0));
    seed = s;
  }
  return std::unique_ptr<Kernel>(std::make_unique<DropoutKernel>(seed));
}

// ---- Flatten, Reshape, Squeeze, Unsqueeze ----

Status infer_flatten(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"axis"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  KILN_ASSIGN_OR_RETURN(int64_t raw_axis, args.attributes.get_int("axis", 1));
  const auto rank = static_cast<int64_t>(x.shape.size());
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(raw_axis, rank, "attribute 'axis'", true));
  DimExpr outer(1), inner(1);
  for (int64_t i = 0; i < rank; ++i) {
    if (i < axis) {
      outer = outer * x.shape[i];
    } else {
      inner = inner * x.shape[i];
    }
  }
  args.outputs = {ValueType{x.dtype, Shape{outer, inner}}};
  return ok_status();
}

std::string values_text(const std::vector<DimExpr>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += values[i].to_string();
  }
  return out + "]";
}

Status infer_reshape(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"allowzero"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "data"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "data", all_dtypes()));
  KILN_ASSIGN_OR_RETURN(ValueType shape_type, required_input(args, 1, "shape"));
  if (shape_type.dtype != DType::kI64) {
    return invalid_argument("input 1 'shape' must have dtype i64, got {}",
                            dtype_name(shape_type.dtype));
  }
  KILN_RETURN_IF_ERROR(check_rank(shape_type, 1, "shape", 1));
  if (const Tensor* t = constant_input(args, 1);
      t != nullptr && (t->dtype() != DType::kI64 || t->rank() != 1)) {
    return invalid_argument("input 1 'shape' constant must be a 1-D i64 tensor, got {} {}",
                            dtype_name(t->dtype()), shape_to_string(t->shape()));
  }
  KILN_ASSIGN_OR_RETURN(int64_t allow_zero, args.attributes.get_int("allowzero", 0));
  KILN_ASSIGN_OR_RETURN(const std::vector<DimExpr> target, required_dim_values(args, 1, "shape"));
  const std::string text = values_text(target);
  Shape out;
  DimExpr known(1);
  std::optional<size_t> inferred;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    DimExpr dim = target[i];
    if (auto v = dim.constant_value()) {
      if (*v == -1) {
        if (inferred) return invalid_argument("input 1 'shape' {} has more than one -1", text);
        inferred = i;
        out.push_back(DimExpr(1));
        continue;
      }
      if (*v < -1) {
        return invalid_argument("input 1 'shape' {} has invalid dim {} at {}", text, *v, i);
      }
      if (*v == 0) {
        has_zero = true;
        if (allow_zero == 0) {
          if (i >= x.shape.size()) {
            return invalid_argument(
                "input 1 'shape' {} copies dim {} (0) but input 0 'data' {} has rank {}", text, i,
                shape_to_string(x.shape), x.shape.size());
          }
          dim = x.shape[i];
        }
      }
    }
    known = known * dim;
    out.push_back(dim);
  }
  if (allow_zero != 0 && has_zero && inferred) {
    return invalid_argument("input 1 'shape' {} has both 0 and -1 with attribute 'allowzero' = 1",
                            text);
  }
  KILN_RETURN_IF_ERROR(check_element_count(out, "the output"));
  const DimExpr total = symbolic_element_count(x.shape);
  if (inferred) {
    if (known == DimExpr(0)) {
      return invalid_argument(
          "input 1 'shape' {}: cannot infer -1 when the other dims have no elements", text);
    }
    KILN_ASSIGN_OR_RETURN(
        out[*inferred],
        divide_exactly(total, known,
                       fmt::format("input 1 'shape' {}: cannot infer -1 for input 0 'data' {}: "
                                   "element count {}",
                                   text, shape_to_string(x.shape), total.to_string())));
  } else {
    KILN_RETURN_IF_ERROR(check_dims_equal(
        known, total,
        fmt::format("element count of input 1 'shape' {} (must match input 0 'data' {})", text,
                    shape_to_string(x.shape))));
  }
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  forward_values(args);
  return ok_status();
}

// Axes from input `index` (constants; symbolic values are an error) normalized against `rank`.
StatusOr<std::optional<std::vector<int64_t>>> axes_input(const InferArgs& args, size_t index,
                                                         int64_t rank) {
  if (optional_input(args, index) == nullptr) return std::optional<std::vector<int64_t>>();
  KILN_ASSIGN_OR_RETURN(std::vector<DimExpr> values, required_dim_values(args, index, "axes"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> raw, constant_elements(values, index, "axes"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                        normalize_axes(raw, rank, input_label(index, "axes")));
  return std::optional<std::vector<int64_t>>(std::move(axes));
}

Status infer_squeeze(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "data"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "data", all_dtypes()));
  const auto rank = static_cast<int64_t>(x.shape.size());
  KILN_ASSIGN_OR_RETURN(auto axes, axes_input(args, 1, rank));
  std::vector<bool> drop(static_cast<size_t>(rank), false);
  if (axes) {
    for (int64_t a : *axes) {
      KILN_RETURN_IF_ERROR(check_dims_equal(
          x.shape[a], DimExpr(1),
          fmt::format("squeezed dim {} of input 0 'data' {}", a, shape_to_string(x.shape))));
      drop[a] = true;
    }
  } else {
    for (int64_t a = 0; a < rank; ++a) {
      if (!x.shape[a].is_constant()) {
        return unimplemented(
            "Squeeze without axes of input 0 'data' {}: cannot tell whether dim {} ('{}') is 1",
            shape_to_string(x.shape), a, x.shape[a].to_string());
      }
      drop[a] = x.shape[a] == DimExpr(1);
    }
  }
  Shape out;
  for (int64_t a = 0; a < rank; ++a) {
    if (!drop[a]) out.push_back(x.shape[a]);
  }
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  forward_values(args);
  return ok_status();
}

Status infer_unsqueeze(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "data"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "data", all_dtypes()));
  KILN_ASSIGN_OR_RETURN(std::vector<DimExpr> raw_values, required_dim_values(args, 1, "axes"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> raw, constant_elements(raw_values, 1, "axes"));
  if (raw.size() > 64) {
    return unimplemented("input 1 'axes' has {} elements; kiln supports ranks up to 64",
                         raw.size());
  }
  const auto out_rank = static_cast<int64_t>(x.shape.size() + raw.size());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                        normalize_axes(raw, out_rank, input_label(1, "axes")));
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t a : axes) inserted[a] = true;
  Shape out;
  size_t next = 0;
  for (int64_t a = 0; a < out_rank; ++a) out.push_back(inserted[a] ? DimExpr(1) : x.shape[next++]);
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  forward_values(args);
  return ok_status();
}

// ---- Transpose ----

// Output 0's element values: input 0's (constant dims, row-major) permuted by `perm`.
void transpose_values(InferArgs& args, const std::vector<int64_t>& perm) {
  auto values = known_dim_values(args, 0, /*any_rank=*/true);
  if (!values) return;
  auto dims = evaluate_shape(args.inputs[0]->shape, {});
  if (!dims.ok()) return;
  const ConcreteShape& in = *dims;
  const std::vector<int64_t> in_strides = row_major_strides(in);
  ConcreteShape out_dims;
  for (int64_t p : perm) out_dims.push_back(in[static_cast<size_t>(p)]);
  std::vector<DimExpr> out;
  out.reserve(values->size());
  ConcreteShape index(out_dims.size(), 0);
  for (size_t n = 0; n < values->size(); ++n) {
    int64_t from = 0;
    for (size_t i = 0; i < index.size(); ++i) {
      from += index[i] * in_strides[static_cast<size_t>(perm[i])];
    }
    out.push_back((*values)[static_cast<size_t>(from)]);
    for (size_t i = index.size(); i-- > 0;) {
      if (++index[i] < out_dims[i]) break;
      index[i] = 0;
    }
  }
  set_output_values(args, 0, std::move(out));
}

Status infer_transpose(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"perm"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "data"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "data", all_dtypes()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm,
                        read_transpose_perm(args.attributes, x.shape.size()));
  Shape out;
  for (int64_t p : perm) out.push_back(x.shape[p]);
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  transpose_values(args, perm);
  return ok_status();
}

StatusOr<std::unique_ptr<Kernel>> make_transpose(const MakeArgs& args) {
  const ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm,
                        read_transpose_perm(args.attributes, dims.size()));
  return make_view_kernel(permuted_view(dims, perm));
}

// ---- Expand ----

Status infer_expand(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  KILN_ASSIGN_OR_RETURN(ValueType shape_type, required_input(args, 1, "shape"));
  KILN_RETURN_IF_ERROR(check_dtype(shape_type, 1, "shape", {DType::kI64}));
  KILN_RETURN_IF_ERROR(check_rank(shape_type, 1, "shape", 1));
  KILN_ASSIGN_OR_RETURN(Shape target, required_dim_values(args, 1, "shape"));
  for (size_t i = 0; i < target.size(); ++i) {
    if (auto v = target[i].constant_value(); v && *v < 0) {
      return invalid_argument("input 1 'shape' {} has negative dim {} at {}", values_text(target),
                              *v, i);
    }
  }
  const Shape shapes[] = {x.shape, target};
  const std::string labels[] = {"input 0 'input'", "input 1 'shape'"};
  KILN_ASSIGN_OR_RETURN(Shape out, broadcast_shapes(shapes, labels));
  KILN_RETURN_IF_ERROR(check_element_count(out, "the output"));
  args.outputs = {ValueType{x.dtype, out}};
  if (out.size() <= 1) {
    auto values = known_dim_values(args, 0);
    auto n = out.empty() ? std::optional<int64_t>(1) : out[0].constant_value();
    if (values && n && values->size() == 1 && *n <= 64) {
      set_output_values(args, 0, std::vector<DimExpr>(static_cast<size_t>(*n), (*values)[0]));
    } else if (values && n && static_cast<int64_t>(values->size()) == *n) {
      set_output_values(args, 0, std::move(*values));
    }
  }
  return ok_status();
}

StatusOr<std::unique_ptr<Kernel>> make_expand(const MakeArgs& args) {
  const ConcreteShape in = args.input_dims(0);
  const ConcreteShape out = args.output_dims(0);
  const std::vector<int64_t> strides = row_major_strides(in);
  StridedView view;
  view.dims = out;
  view.strides.assign(out.size(), 0);
  const size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    view.strides[offset + i] = in[i] == 1 ? 0 : strides[i];
  }
  return make_view_kernel(std::move(view));
}

// ---- ReverseSequence ----

struct SequenceAxes {
  int64_t batch = 1;
  int64_t time = 0;
};

StatusOr<SequenceAxes> sequence_axes(const Attributes& attributes) {
  SequenceAxes axes;
  KILN_ASSIGN_OR_RETURN(axes.batch, attributes.get_int("batch_axis", 1));
  KILN_ASSIGN_OR_RETURN(axes.time, attributes.get_int("time_axis", 0));
  if ((axes.batch != 0 && axes.batch != 1) || (axes.time != 0 && axes.time != 1) ||
      axes.batch == axes.time) {
    return invalid_argument(
        "attributes 'batch_axis' = {} and 'time_axis' = {} must be 0 and 1 "
        "in either order",
        axes.batch, axes.time);
  }
  return axes;
}

Status infer_reverse_sequence(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"batch_axis", "time_axis"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_ASSIGN_OR_RETURN(ValueType lens, required_input(args, 1, "sequence_lens"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_rank_range(x, 0, "input", 2, 64));
  KILN_RETURN_IF_ERROR(check_dtype(lens, 1, "sequence_lens", {DType::kI64}));
  KILN_RETURN_IF_ERROR(check_rank(lens, 1, "sequence_lens", 1));
  KILN_ASSIGN_OR_RETURN(SequenceAxes axes, sequence_axes(args.attributes));
  KILN_RETURN_IF_ERROR(check_dims_equal(
      lens.shape[0], x.shape[axes.batch],
      fmt::format("input 1 'sequence_lens' length (must be input 0's batch dim {})", axes.batch)));
  args.outputs = {x};
  return ok_status();
}

// y = x, except that for each batch entry b the first sequence_lens[b] steps along the time axis
// are reversed. The batch and time axes are dims 0 and 1, so each step of one entry is one
// contiguous run of the trailing dims.
class ReverseSequenceKernel : public Kernel {
 public:
  ReverseSequenceKernel(ConcreteShape dims, SequenceAxes axes, size_t element_size)
      : dims_(std::move(dims)), axes_(axes), element_size_(element_size) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t steps = dims_[static_cast<size_t>(axes_.time)];
    const int64_t batch = dims_[static_cast<size_t>(axes_.batch)];
    const int64_t* lens = in[1].as<int64_t>();
    for (int64_t b = 0; b < batch; ++b) {
      if (lens[b] < 0 || lens[b] > steps) {
        return invalid_argument(
            "input 1 'sequence_lens' element {} is {}, outside [0, {}] (the "
            "time dim)",
            b, lens[b], steps);
      }
    }
    const size_t run_bytes =
        static_cast<size_t>(product(std::span<const int64_t>(dims_).subspan(2))) * element_size_;
    const int64_t time_stride = axes_.time == 0 ? batch : 1;
    const int64_t batch_stride = axes_.batch == 0 ? steps : 1;
    if (run_bytes == 0) return ok_status();
    std::memcpy(out[0].data, in[0].data, run_bytes * static_cast<size_t>(batch * steps));
    parallel_for(batch, [&](int64_t b) {
      for (int64_t t = 0; t < lens[b]; ++t) {
        const int64_t to = b * batch_stride + t * time_stride;
        const int64_t from = b * batch_stride + (lens[b] - 1 - t) * time_stride;
        std::memcpy(out[0].data + static_cast<size_t>(to) * run_bytes,
                    in[0].data + static_cast<size_t>(from) * run_bytes, run_bytes);
      }
    });
    return ok_status();
  }

 private:
  ConcreteShape dims_;
  SequenceAxes axes_;
  size_t element_size_;
};

StatusOr<std::unique_ptr<Kernel>> make_reverse_sequence(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(SequenceAxes axes, sequence_axes(args.attributes));
  return std::unique_ptr<Kernel>(std::make_unique<ReverseSequenceKernel>(
      args.input_dims(0), axes, dtype_size(args.inputs[0]->dtype)));
}

}  // namespace

void register_movement_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"Dropout", infer_dropout, make_dropout});
  table.push_back(OpDef{"Expand", infer_expand, make_expand, 1u << 1});
  table.push_back(OpDef{"Flatten", infer_flatten, make_copy});
  table.push_back(OpDef{"Identity", infer_identity, make_copy});
  table.push_back(OpDef{"Reshape", infer_reshape, make_copy, 1u << 1});
  table.push_back(OpDef{"ReverseSequence", infer_reverse_sequence, make_reverse_sequence});
  table.push_back(OpDef{"Squeeze", infer_squeeze, make_copy, 1u << 1});
  table.push_back(OpDef{"Transpose", infer_transpose, make_transpose});
  table.push_back(OpDef{"Unsqueeze", infer_unsqueeze, make_copy, 1u << 1});
  register_slicing_kernels(table);
  register_layout_kernels(table);
}

}  // namespace kiln::kernels
