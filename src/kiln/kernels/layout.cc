// Tile, Pad, DepthToSpace, SpaceToDepth and Trilu: data movement with a per-op index rule. Tile,
// DepthToSpace and SpaceToDepth are strided views (strided_copy.h); Pad maps each output index to
// a source index per dim; Trilu copies and zeroes a triangle. All work on bytes, for every dtype.
#include <algorithm>
#include <cstring>

#include "kiln/kernels/movement_util.h"
#include "kiln/kernels/strided_copy.h"

namespace kiln::kernels {
namespace {

// ---- Tile ----

Status infer_tile(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  KILN_ASSIGN_OR_RETURN(ValueType repeats_type, required_input(args, 1, "repeats"));
  KILN_RETURN_IF_ERROR(check_dtype(repeats_type, 1, "repeats", {DType::kI64}));
  KILN_RETURN_IF_ERROR(check_rank(repeats_type, 1, "repeats", 1));
  KILN_ASSIGN_OR_RETURN(const std::vector<DimExpr> repeats,
                        required_dim_values(args, 1, "repeats"));
  if (repeats.size() != x.shape.size()) {
    return invalid_argument("input 1 'repeats' has {} elements for input 0 'input' of rank {}",
                            repeats.size(), x.shape.size());
  }
  Shape out;
  for (size_t i = 0; i < repeats.size(); ++i) {
    auto r = repeats[i].constant_value();
    if (r && *r < 0)
      return invalid_argument("input 1 'repeats' element {} is negative ({})", i, *r);
    auto d = x.shape[i].constant_value();
    if (r && d && !checked_mul(*r, *d)) {
      return invalid_argument("dim {} of the output ({} x {}) overflows int64", i, *d, *r);
    }
    out.push_back(x.shape[i] * repeats[i]);
  }
  KILN_RETURN_IF_ERROR(check_element_count(out, "the output"));
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

// Output dim i of size r_i * d_i is the pair (repeat, index) with source strides (0, s_i).
StatusOr<std::unique_ptr<Kernel>> make_tile(const MakeArgs& args) {
  const ConcreteShape in = args.input_dims(0);
  const ConcreteShape out = args.output_dims(0);
  const std::vector<int64_t> strides = row_major_strides(in);
  StridedView view;
  for (size_t i = 0; i < in.size(); ++i) {
    view.dims.push_back(in[i] == 0 ? 0 : out[i] / in[i]);
    view.strides.push_back(0);
    view.dims.push_back(in[i]);
    view.strides.push_back(strides[i]);
  }
  return make_view_kernel(std::move(view));
}

// ---- Pad ----

enum class PadMode { kConstant, kReflect, kEdge };

struct PadSpec {
  PadMode mode = PadMode::kConstant;
  std::vector<DimExpr> begin;  // per axis, may be negative (a crop)
  Shape out;
};

StatusOr<PadSpec> pad_spec(const InferArgs& args, const ValueType& x) {
  PadSpec spec;
  KILN_ASSIGN_OR_RETURN(std::string mode, args.attributes.get_string("mode", "constant"));
  if (mode == "constant") {
    spec.mode = PadMode::kConstant;
  } else if (mode == "reflect") {
    spec.mode = PadMode::kReflect;
  } else if (mode == "edge") {
    spec.mode = PadMode::kEdge;
  } else {
    return unimplemented("attribute 'mode' = '{}' is not supported (constant, reflect, edge)",
                         mode);
  }
  KILN_ASSIGN_OR_RETURN(ValueType pads_type, required_input(args, 1, "pads"));
  KILN_RETURN_IF_ERROR(check_dtype(pads_type, 1, "pads", {DType::kI64}));
  KILN_RETURN_IF_ERROR(check_rank(pads_type, 1, "pads", 1));
  KILN_ASSIGN_OR_RETURN(const std::vector<DimExpr> pads, required_dim_values(args, 1, "pads"));
  const size_t rank = x.shape.size();
  if (pads.size() != 2 * rank) {
    return invalid_argument("input 1 'pads' has {} elements; input 0 'data' of rank {} needs {}",
                            pads.size(), rank, 2 * rank);
  }
  for (size_t i = 0; i < rank; ++i) {
    const DimExpr& d = x.shape[i];
    const DimExpr& b = pads[i];
    const DimExpr& e = pads[i + rank];
    auto dv = d.constant_value(), bv = b.constant_value(), ev = e.constant_value();
    if (dv && bv && ev) {
      auto sum = checked_add(*dv, *bv);
      if (sum) sum = checked_add(*sum, *ev);
      if (!sum || *sum < 0) {
        return invalid_argument("padding dim {} of input 0 'data' ({}) by {} and {} gives {}", i,
                                *dv, *bv, *ev, sum ? fmt::format("{}", *sum) : "an overflow");
      }
      if (spec.mode != PadMode::kConstant && *dv == 0 && *sum > 0) {
        return invalid_argument("dim {} of input 0 'data' is empty; mode '{}' cannot pad it", i,
                                mode);
      }
    }
    spec.begin.push_back(b);
    spec.out.push_back(d + b + e);
  }
  KILN_RETURN_IF_ERROR(check_element_count(spec.out, "the output"));
  return spec;
}

Status infer_pad(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"mode"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "data"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "data", all_dtypes()));
  if (const ValueType* value = optional_input(args, 2)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*value, 2, "constant_value", x.dtype, "input 0 'data'"));
    if (!value->shape.empty() && !(value->shape.size() == 1 && value->shape[0] == DimExpr(1))) {
      return invalid_argument("input 2 'constant_value' must be a scalar, got shape {}",
                              shape_to_string(value->shape));
    }
  }
  KILN_ASSIGN_OR_RETURN(PadSpec spec, pad_spec(args, x));
  args.outputs = {ValueType{x.dtype, spec.out}};
  return ok_status();
}

class PadKernel : public Kernel {
 public:
  PadKernel(PadMode mode, ConcreteShape in, ConcreteShape out, std::vector<int64_t> begin)
      : mode_(mode), in_(std::move(in)), out_(std::move(out)), begin_(std::move(begin)) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const size_t es = dtype_size(in[0].dtype);
    std::byte value[8] = {};
    if (in.size() > 2 && in[2].data != nullptr && in[2].element_count() > 0) {
      std::memcpy(value, in[2].data, es);
    }
    if (out[0].element_count() == 0) return ok_status();
    visit_element_size(es, [&]<typename U>() {
      U fill;
      std::memcpy(&fill, value, sizeof(U));
      copy(in[0].as<U>(), out[0].as<U>(), fill);
    });
    return ok_status();
  }

 private:
  // The source index of output index j along axis k; -1 for the constant.
  int64_t source(size_t k, int64_t j) const {
    const __int128 i = static_cast<__int128>(j) - begin_[k];
    const int64_t d = in_[k];
    if (i >= 0 && i < d) return static_cast<int64_t>(i);
    switch (mode_) {
      case PadMode::kConstant: return -1;
      case PadMode::kEdge: return i < 0 ? 0 : d - 1;
      case PadMode::kReflect: {
        if (d == 1) return 0;
        const __int128 period = 2 * static_cast<__int128>(d - 1);
        __int128 m = i % period;
        if (m < 0) m += period;
        return static_cast<int64_t>(m >= d ? period - m : m);
      }
    }
    return -1;
  }

  template <typename U>
  void copy(const U* src, U* dst, U fill) const {
    const size_t r = out_.size();
    if (r == 0) {
      dst[0] = src[0];
      return;
    }
    const std::vector<int64_t> in_strides = row_major_strides(in_);
    const int64_t width = out_[r - 1];
    std::vector<int64_t> inner(static_cast<size_t>(width));
    for (int64_t j = 0; j < width; ++j) inner[j] = source(r - 1, j);
    // Output indices [lo, hi) of the last axis read the source row in order.
    const int64_t lo = std::clamp<int64_t>(begin_[r - 1], 0, width);
    const int64_t hi =
        std::clamp<int64_t>(static_cast<int64_t>(std::min<__int128>(
                                static_cast<__int128>(begin_[r - 1]) + in_[r - 1], width)),
                            lo, width);
    const int64_t rows = product(std::span<const int64_t>(out_).first(r - 1));
    for_row_chunks(rows, width, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> index(r - 1, 0);
      int64_t rest = begin;
      for (size_t k = r - 1; k-- > 0;) {
        index[k] = rest % out_[k];
        rest /= out_[k];
      }
      for (int64_t row = begin; row < end; ++row) {
        U* out = dst + row * width;
        int64_t offset = 0;
        bool constant_row = false;
        for (size_t k = 0; k + 1 < r; ++k) {
          const int64_t s = source(k, index[k]);
          if (s < 0) constant_row = true;
          offset += s * in_strides[k];
        }
        if (constant_row) {
          std::fill(out, out + width, fill);
        } else {
          const U* in = src + offset;
          for (int64_t j = 0; j < lo; ++j) out[j] = inner[j] < 0 ? fill : in[inner[j]];
          if (hi > lo) std::memcpy(out + lo, in + (lo - begin_[r - 1]), (hi - lo) * sizeof(U));
          for (int64_t j = hi; j < width; ++j) out[j] = inner[j] < 0 ? fill : in[inner[j]];
        }
        for (size_t k = r - 1; k-- > 0;) {
          if (++index[k] < out_[k]) break;
          index[k] = 0;
        }
      }
    });
  }

  PadMode mode_;
  ConcreteShape in_, out_;
  std::vector<int64_t> begin_;
};

StatusOr<std::unique_ptr<Kernel>> make_pad(const MakeArgs& args) {
  InferArgs infer_args = infer_args_of(args);
  KILN_ASSIGN_OR_RETURN(PadSpec spec, pad_spec(infer_args, *args.inputs[0]));
  std::vector<int64_t> begin;
  for (const DimExpr& b : spec.begin) {
    KILN_ASSIGN_OR_RETURN(int64_t v, require_constant_dim(b, "input 1 'pads' element"));
    begin.push_back(v);
  }
  return std::unique_ptr<Kernel>(std::make_unique<PadKernel>(
      spec.mode, args.input_dims(0), args.output_dims(0), std::move(begin)));
}

// ---- DepthToSpace, SpaceToDepth ----

StatusOr<int64_t> blocksize(const Attributes& attributes) {
  if (!attributes.has("blocksize")) return invalid_argument("attribute 'blocksize' is required");
  KILN_ASSIGN_OR_RETURN(int64_t b, attributes.get_int("blocksize", 0));
  if (b <= 0 || b > (int64_t{1} << 31)) {
    return invalid_argument("attribute 'blocksize' = {} must be in [1, 2^31]", b);
  }
  return b;
}

StatusOr<bool> depth_to_space_is_crd(const Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(std::string mode, attributes.get_string("mode", "DCR"));
  if (mode != "DCR" && mode != "CRD") {
    return invalid_argument("attribute 'mode' = '{}' must be 'DCR' or 'CRD'", mode);
  }
  return mode == "CRD";
}

Status infer_depth_to_space(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"blocksize", "mode"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_rank(x, 0, "input", 4));
  KILN_ASSIGN_OR_RETURN(int64_t b, blocksize(args.attributes));
  KILN_RETURN_IF_ERROR(depth_to_space_is_crd(args.attributes).status());
  const int64_t bb = b * b;
  KILN_ASSIGN_OR_RETURN(
      DimExpr c, divide_exactly(x.shape[1], DimExpr(bb),
                                fmt::format("channels of input 0 'input' {} ({})",
                                            shape_to_string(x.shape), x.shape[1].to_string()),
                                "blocksize^2 = "));
  Shape out = {x.shape[0], c, x.shape[2] * DimExpr(b), x.shape[3] * DimExpr(b)};
  KILN_RETURN_IF_ERROR(check_element_count(out, "the output"));
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

// The output [N, C', H*b, W*b] read as [N, C', H, b, W, b] from the input [N, C, H, W] whose
// channel is (b1, b2, c') in DCR mode and (c', b1, b2) in CRD mode.
StatusOr<std::unique_ptr<Kernel>> make_depth_to_space(const MakeArgs& args) {
  const ConcreteShape in = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(int64_t b, blocksize(args.attributes));
  KILN_ASSIGN_OR_RETURN(bool crd, depth_to_space_is_crd(args.attributes));
  const int64_t n = in[0], c = in[1] / (b * b), h = in[2], w = in[3];
  const int64_t hw = h * w;
  const int64_t s_c = crd ? b * b * hw : hw;
  const int64_t s_b1 = crd ? b * hw : b * c * hw;
  const int64_t s_b2 = crd ? hw : c * hw;
  StridedView view;
  view.dims = {n, c, h, b, w, b};
  view.strides = {in[1] * hw, s_c, w, s_b1, 1, s_b2};
  return make_view_kernel(std::move(view));
}

Status infer_space_to_depth(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"blocksize"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  KILN_RETURN_IF_ERROR(check_rank(x, 0, "input", 4));
  KILN_ASSIGN_OR_RETURN(int64_t b, blocksize(args.attributes));
  Shape out = {x.shape[0], x.shape[1] * DimExpr(b * b), DimExpr(0), DimExpr(0)};
  for (size_t i = 2; i < 4; ++i) {
    KILN_ASSIGN_OR_RETURN(
        out[i], divide_exactly(x.shape[i], DimExpr(b),
                               fmt::format("dim {} of input 0 'input' {} ({})", i,
                                           shape_to_string(x.shape), x.shape[i].to_string()),
                               "blocksize "));
  }
  KILN_RETURN_IF_ERROR(check_element_count(out, "the output"));
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

// The output [N, C*b*b, H', W'] read as [N, b1, b2, C, H', W'] from the input viewed as
// [N, C, H', b1, W', b2].
StatusOr<std::unique_ptr<Kernel>> make_space_to_depth(const MakeArgs& args) {
  const ConcreteShape in = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(int64_t b, blocksize(args.attributes));
  const int64_t n = in[0], c = in[1], h = in[2], w = in[3];
  StridedView view;
  view.dims = {n, b, b, c, h / b, w / b};
  view.strides = {c * h * w, w, 1, h * w, b * w, b};
  return make_view_kernel(std::move(view));
}

// ---- Trilu ----

Status infer_trilu(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"upper"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", all_dtypes()));
  if (x.shape.size() < 2) {
    return invalid_argument("input 0 'input' must have rank >= 2, got {} (shape {})",
                            x.shape.size(), shape_to_string(x.shape));
  }
  KILN_RETURN_IF_ERROR(args.attributes.get_int("upper", 1).status());
  if (const ValueType* k = optional_input(args, 1)) {
    KILN_RETURN_IF_ERROR(check_dtype(*k, 1, "k", {DType::kI64}));
    if (!k->shape.empty() && !(k->shape.size() == 1 && k->shape[0] == DimExpr(1))) {
      return invalid_argument("input 1 'k' must be a scalar, got shape {}",
                              shape_to_string(k->shape));
    }
  }
  args.outputs = {x};
  return ok_status();
}

class TriluKernel : public Kernel {
 public:
  TriluKernel(bool upper, std::optional<int64_t> k, int64_t rows, int64_t cols)
      : upper_(upper), k_(k), rows_(rows), cols_(cols) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    int64_t k = 0;
    if (k_) {
      k = *k_;
    } else if (in.size() > 1 && in[1].data != nullptr && in[1].element_count() > 0) {
      std::memcpy(&k, in[1].data, sizeof(k));
    }
    // Beyond the matrix every k acts the same; clamping keeps i + k in range.
    const int64_t bound = rows_ + cols_ + 1;
    k = std::clamp(k, -bound, bound);
    const size_t es = dtype_size(in[0].dtype);
    const int64_t n = out[0].element_count();
    if (n == 0) return ok_status();
    const size_t row_bytes = static_cast<size_t>(cols_) * es;
    for_row_chunks(n / cols_, cols_, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t i = r % rows_;
        std::byte* dst = out[0].data + static_cast<size_t>(r) * row_bytes;
        std::memcpy(dst, in[0].data + static_cast<size_t>(r) * row_bytes, row_bytes);
        // Kept: j - i >= k (upper) or j - i <= k (lower); the rest becomes zero.
        const int64_t zero_lo = upper_ ? 0 : std::clamp<int64_t>(i + k + 1, 0, cols_);
        const int64_t zero_hi = upper_ ? std::clamp<int64_t>(i + k, 0, cols_) : cols_;
        if (zero_hi > zero_lo) {
          std::memset(dst + static_cast<size_t>(zero_lo) * es, 0,
                      static_cast<size_t>(zero_hi - zero_lo) * es);
        }
      }
    });
    return ok_status();
  }

 private:
  bool upper_;
  std::optional<int64_t> k_;
  int64_t rows_, cols_;
};

StatusOr<std::unique_ptr<Kernel>> make_trilu(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(int64_t upper, args.attributes.get_int("upper", 1));
  std::optional<int64_t> k;
  if (args.constants.size() > 1 && args.constants[1] != nullptr) {
    const Tensor& t = *args.constants[1];
    if (t.dtype() != DType::kI64 || t.element_count() != 1) {
      return invalid_argument("input 1 'k' must be one i64, got {} {}", dtype_name(t.dtype()),
                              shape_to_string(t.shape()));
    }
    k = element_as_int64(t, 0);
  }
  const ConcreteShape dims = args.input_dims(0);
  const size_t r = dims.size();
  return std::unique_ptr<Kernel>(
      std::make_unique<TriluKernel>(upper != 0, k, dims[r - 2], dims[r - 1]));
}

}  // namespace

void register_layout_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"DepthToSpace", infer_depth_to_space, make_depth_to_space});
  table.push_back(OpDef{"Pad", infer_pad, make_pad, 1u << 1});
  table.push_back(OpDef{"SpaceToDepth", infer_space_to_depth, make_space_to_depth});
  table.push_back(OpDef{"Tile", infer_tile, make_tile, 1u << 1});
  table.push_back(OpDef{"Trilu", infer_trilu, make_trilu});
}

}  // namespace kiln::kernels
