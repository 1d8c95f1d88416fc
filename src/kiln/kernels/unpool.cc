// MaxUnpool (opset 11): the partial inverse of MaxPool. Each element of X goes to the position
// of the unpooled output that its index in I names; every other position is 0. Indices are flat
// row-major positions in the default output shape, [N, C, (in - 1) * stride - pad_begin - pad_end
// + kernel, ...] (MaxPool's Indices output). With the optional output_shape input the output
// has that shape, each dim at least the default one, and the unpooled values keep their
// coordinates (the extra rows and columns at the end are 0): the semantics of the ONNX reference
// implementation and test data. (ONNX Runtime 1.30 differs: it reads the indices as flat
// positions in the output_shape tensor.) An index outside the default shape is an error naming
// the element; when two elements name one position, the later one wins.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {
namespace {

struct UnpoolWindow {
  std::vector<int64_t> kernel, strides, pads;  // pads: begins then ends
};

StatusOr<UnpoolWindow> read_unpool_window(const Attributes& a, size_t spatial) {
  UnpoolWindow w;
  if (!a.has("kernel_shape")) return invalid_argument("attribute 'kernel_shape' is required");
  KILN_ASSIGN_OR_RETURN(w.kernel, a.get_ints("kernel_shape", {}));
  KILN_ASSIGN_OR_RETURN(w.strides, a.get_ints("strides", std::vector<int64_t>(spatial, 1)));
  KILN_ASSIGN_OR_RETURN(w.pads, a.get_ints("pads", std::vector<int64_t>(2 * spatial, 0)));
  if (w.kernel.size() != spatial || w.strides.size() != spatial || w.pads.size() != 2 * spatial) {
    return invalid_argument(
        "attributes 'kernel_shape', 'strides' and 'pads' must have {}, {} and {} values for {} "
        "spatial dims, got {}, {} and {}",
        spatial, spatial, 2 * spatial, spatial, w.kernel.size(), w.strides.size(), w.pads.size());
  }
  for (size_t i = 0; i < spatial; ++i) {
    if (w.kernel[i] < 1 || w.strides[i] < 1 || w.pads[i] < 0 || w.pads[i + spatial] < 0 ||
        w.kernel[i] > (int64_t{1} << 31) || w.strides[i] > (int64_t{1} << 31) ||
        w.pads[i] > (int64_t{1} << 31) || w.pads[i + spatial] > (int64_t{1} << 31)) {
      return invalid_argument(
          "spatial dim {}: 'kernel_shape' {} and 'strides' {} must be >= 1 and 'pads' {}, {} >= 0 "
          "(and below 2^31)",
          i, w.kernel[i], w.strides[i], w.pads[i], w.pads[i + spatial]);
    }
  }
  return w;
}

// The default output shape for input dims `x`.
Shape default_unpooled(const Shape& x, const UnpoolWindow& w) {
  Shape out = x;
  const size_t spatial = w.kernel.size();
  for (size_t i = 0; i < spatial; ++i) {
    out[i + 2] = (x[i + 2] - DimExpr(1)) * DimExpr(w.strides[i]) -
                 DimExpr(w.pads[i] + w.pads[i + spatial]) + DimExpr(w.kernel[i]);
  }
  return out;
}

Status infer_max_unpool(InferArgs& args) {
  KILN_RETURN_IF_ERROR(
      check_known_attributes(args.attributes, {"kernel_shape", "strides", "pads"}));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_ASSIGN_OR_RETURN(ValueType indices, required_input(args, 1, "I"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", float_dtypes()));
  KILN_RETURN_IF_ERROR(check_dtype(indices, 1, "I", {DType::kI64}));
  KILN_RETURN_IF_ERROR(check_rank_range(x, 0, "X", 3, 10));
  KILN_RETURN_IF_ERROR(check_rank(indices, 1, "I", static_cast<int64_t>(x.shape.size())));
  for (size_t d = 0; d < x.shape.size(); ++d) {
    KILN_RETURN_IF_ERROR(
        check_dims_equal(indices.shape[d], x.shape[d], fmt::format("input 1 'I' dim {}", d)));
  }
  KILN_ASSIGN_OR_RETURN(UnpoolWindow w, read_unpool_window(args.attributes, x.shape.size() - 2));
  Shape out = default_unpooled(x.shape, w);
  for (size_t d = 2; d < out.size(); ++d) {
    KILN_RETURN_IF_ERROR(
        assume_nonnegative(out[d], fmt::format("unpooled dim {} ({})", d, out[d].to_string())));
  }
  KILN_ASSIGN_OR_RETURN(auto shape, input_dim_values(args, 2, "output_shape"));
  if (shape) {
    if (shape->size() != out.size()) {
      return invalid_argument("input 2 'output_shape' must have {} values (the rank of X), got {}",
                              out.size(), shape->size());
    }
    for (size_t d = 0; d < out.size(); ++d) {
      const std::string what = fmt::format("input 2 'output_shape' element {}", d);
      if (d < 2) {
        KILN_RETURN_IF_ERROR(check_dims_equal((*shape)[d], out[d], what));
      } else {
        KILN_RETURN_IF_ERROR(assume_nonnegative(
            (*shape)[d] - out[d],
            fmt::format("{} minus the default unpooled dim {}", what, out[d].to_string())));
      }
    }
    out = Shape(shape->begin(), shape->end());
    out[0] = x.shape[0];
    out[1] = x.shape[1];
  }
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

class MaxUnpoolKernel : public Kernel {
 public:
  MaxUnpoolKernel(ConcreteShape unpooled, ConcreteShape out)
      : unpooled_(std::move(unpooled)), out_(std::move(out)) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t size = product(unpooled_);
    const std::vector<int64_t> out_strides = row_major_strides(out_);
    const int64_t n = in[0].element_count();
    const int64_t* indices = in[1].as<int64_t>();
    std::memset(out[0].data, 0,
                static_cast<size_t>(out[0].element_count()) * dtype_size(out[0].dtype));
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      const T* x = in[0].as<T>();
      T* y = out[0].as<T>();
      for (int64_t i = 0; i < n; ++i) {
        int64_t flat = indices[i];
        if (flat < 0 || flat >= size) {
          return invalid_argument("input 1 'I' element {} = {} is out of range [0, {}]", i, flat,
                                  size - 1);
        }
        int64_t pos = 0;  // the same coordinates in the output shape
        for (size_t d = unpooled_.size(); d-- > 0;) {
          pos += (flat % unpooled_[d]) * out_strides[d];
          flat /= unpooled_[d];
        }
        y[pos] = x[i];
      }
      return ok_status();
    });
  }

 private:
  ConcreteShape unpooled_, out_;
};

StatusOr<std::unique_ptr<Kernel>> make_max_unpool(const MakeArgs& args) {
  const ConcreteShape x = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(UnpoolWindow w, read_unpool_window(args.attributes, x.size() - 2));
  ConcreteShape unpooled = x;
  const size_t spatial = w.kernel.size();
  for (size_t i = 0; i < spatial; ++i) {
    unpooled[i + 2] =
        (x[i + 2] - 1) * w.strides[i] - (w.pads[i] + w.pads[i + spatial]) + w.kernel[i];
  }
  ConcreteShape out = args.output_dims(0);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] < unpooled[d]) {
      return invalid_argument(
          "input 2 'output_shape' element {} = {} is below the default unpooled dim {}", d, out[d],
          unpooled[d]);
    }
  }
  return std::unique_ptr<Kernel>(std::make_unique<MaxUnpoolKernel>(unpooled, out));
}

}  // namespace

void register_unpool_kernels(std::vector<OpDef>& table) {
  // output_shape: input 2.
  table.push_back(OpDef{.op_type = "MaxUnpool",
                        .infer = infer_max_unpool,
                        .make = make_max_unpool,
                        .compile_time_inputs = 0b100,
                        .since_version = 11});
}

}  // namespace kiln::kernels
