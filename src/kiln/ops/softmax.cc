// Softmax. Opset 13 normalizes along `axis` (default -1). Opsets 1-12 coerce the input to 2-D
// [prod(dims before axis), prod(dims from axis)] (default axis 1) and normalize each row.
#include <cmath>

#include "kiln/ops/families.h"
#include "kiln/ops/op_util.h"

namespace kiln::ops {
namespace {

Status infer_softmax(InferContext& ctx, int64_t default_axis) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(ctx, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", {DType::kF32, DType::kF64}));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ctx.node.attributes.get_int("axis", default_axis));
  KILN_RETURN_IF_ERROR(normalize_axis(axis, static_cast<int64_t>(x.shape.size()), "axis").status());
  ctx.outputs = {x};
  return ok_status();
}

// `coerce_2d`: opset < 13 semantics.
KernelFn softmax_kernel(int64_t default_axis, bool coerce_2d) {
  return [=](const ir::Node& node, std::span<const Tensor> in, std::span<Tensor> out) -> Status {
    const ConcreteShape& dims = in[0].shape();
    KILN_ASSIGN_OR_RETURN(int64_t raw_axis, node.attributes.get_int("axis", default_axis));
    KILN_ASSIGN_OR_RETURN(int64_t axis,
                          normalize_axis(raw_axis, static_cast<int64_t>(dims.size()), "axis"));
    int64_t outer = 1, length = 1, inner = 1;
    for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
      if (i < axis) {
        outer *= dims[i];
      } else if (i == axis || coerce_2d) {
        length *= dims[i];
      } else {
        inner *= dims[i];
      }
    }
    const std::vector<double> x = to_doubles(in[0]);
    std::vector<double> y(x.size());
#pragma omp parallel for schedule(static)
    for (int64_t job = 0; job < outer * inner; ++job) {
      const int64_t base = (job / inner) * length * inner + job % inner;
      double max = -INFINITY;
      for (int64_t l = 0; l < length; ++l) max = std::fmax(max, x[base + l * inner]);
      double sum = 0;
      for (int64_t l = 0; l < length; ++l) {
        double e = std::exp(x[base + l * inner] - max);
        y[base + l * inner] = e;
        sum += e;
      }
      for (int64_t l = 0; l < length; ++l) y[base + l * inner] /= sum;
    }
    store_doubles(y, out[0]);
    return ok_status();
  };
}

}  // namespace

void register_softmax_ops(Registry& registry) {
  registry.add(make_op(
      "Softmax", [](InferContext& ctx) { return infer_softmax(ctx, 1); },
      softmax_kernel(1, /*coerce_2d=*/true), /*since_version=*/1));
  registry.add(make_op(
      "Softmax", [](InferContext& ctx) { return infer_softmax(ctx, -1); },
      softmax_kernel(-1, /*coerce_2d=*/false), /*since_version=*/13));
}

}  // namespace kiln::ops
