// Gemm (alpha * op(A) @ op(B) + beta * C, C unidirectionally broadcast to [M, N]) and MatMul
// (numpy matmul: 1-D operands are promoted and the added dim dropped; batch dims broadcast).
#include "kiln/kernels/broadcast.h"
#include "kiln/ops/families.h"
#include "kiln/ops/op_util.h"

namespace kiln::ops {
namespace {

StatusOr<bool> flag_attribute(const Attributes& attributes, const char* name) {
  KILN_ASSIGN_OR_RETURN(int64_t v, attributes.get_int(name, 0));
  if (v != 0 && v != 1) return invalid_argument("attribute '{}' must be 0 or 1, got {}", name, v);
  return v == 1;
}

Status infer_gemm(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 3, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType a, required_input(ctx, 0, "A"));
  KILN_RETURN_IF_ERROR(check_dtype(a, 0, "A", {DType::kF32, DType::kF64}));
  KILN_RETURN_IF_ERROR(check_rank(a, 0, "A", 2));
  KILN_ASSIGN_OR_RETURN(ValueType b, required_input(ctx, 1, "B"));
  KILN_RETURN_IF_ERROR(check_same_dtype(b, 1, "B", a.dtype, "input 0 'A'"));
  KILN_RETURN_IF_ERROR(check_rank(b, 1, "B", 2));
  KILN_ASSIGN_OR_RETURN(bool trans_a, flag_attribute(ctx.node.attributes, "transA"));
  KILN_ASSIGN_OR_RETURN(bool trans_b, flag_attribute(ctx.node.attributes, "transB"));
  KILN_RETURN_IF_ERROR(ctx.node.attributes.get_float("alpha", 1.0).status());
  KILN_RETURN_IF_ERROR(ctx.node.attributes.get_float("beta", 1.0).status());
  const DimExpr& m = a.shape[trans_a ? 1 : 0];
  const DimExpr& k = a.shape[trans_a ? 0 : 1];
  const DimExpr& n = b.shape[trans_b ? 0 : 1];
  KILN_RETURN_IF_ERROR(check_dims_equal(
      b.shape[trans_b ? 1 : 0], k,
      fmt::format("input 1 'B' dim {} (K, the inner dim of input 0 'A' {} with transA={})",
                  trans_b ? 1 : 0, shape_to_string(a.shape), trans_a ? 1 : 0)));
  Shape out{m, n};
  if (const ValueType* c = optional_input(ctx, 2)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*c, 2, "C", a.dtype, "input 0 'A'"));
    KILN_RETURN_IF_ERROR(check_rank_range(*c, 2, "C", 0, 2));
    size_t offset = 2 - c->shape.size();
    for (size_t i = 0; i < c->shape.size(); ++i) {
      if (c->shape[i] == DimExpr(1)) continue;
      KILN_RETURN_IF_ERROR(check_dims_equal(
          c->shape[i], out[offset + i],
          fmt::format("input 2 'C' dim {} (must broadcast to the output [M, N] = {})", i,
                      shape_to_string(out))));
    }
  }
  ctx.outputs = {ValueType{a.dtype, std::move(out)}};
  return ok_status();
}

Status gemm_kernel(const ir::Node& node, std::span<const Tensor> in, std::span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(bool trans_a, flag_attribute(node.attributes, "transA"));
  KILN_ASSIGN_OR_RETURN(bool trans_b, flag_attribute(node.attributes, "transB"));
  KILN_ASSIGN_OR_RETURN(double alpha, node.attributes.get_float("alpha", 1.0));
  KILN_ASSIGN_OR_RETURN(double beta, node.attributes.get_float("beta", 1.0));
  const int64_t m = out[0].shape()[0];
  const int64_t n = out[0].shape()[1];
  const int64_t k = in[0].shape()[trans_a ? 0 : 1];
  const std::vector<double> a = to_doubles(in[0]);
  const std::vector<double> b_raw = to_doubles(in[1]);
  // B as [K, N] so that the inner loop runs along contiguous output columns.
  std::vector<double> b(b_raw.size());
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t j = 0; j < n; ++j) b[kk * n + j] = trans_b ? b_raw[j * k + kk] : b_raw[kk * n + j];
  }
  std::vector<double> c;
  std::vector<int64_t> c_map;
  if (in.size() > 2 && !in[2].empty_storage()) {
    c = to_doubles(in[2]);
    c_map = broadcast_index_map(in[2].shape(), out[0].shape());
  }
  std::vector<double> y(static_cast<size_t>(m * n), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    double* row = y.data() + i * n;
    for (int64_t kk = 0; kk < k; ++kk) {
      const double av = trans_a ? a[kk * m + i] : a[i * k + kk];
      const double* br = b.data() + kk * n;
      for (int64_t j = 0; j < n; ++j) row[j] += av * br[j];
    }
    for (int64_t j = 0; j < n; ++j) {
      row[j] *= alpha;
      if (!c.empty()) row[j] += beta * c[c_map[i * n + j]];
    }
  }
  store_doubles(y, out[0]);
  return ok_status();
}

Status infer_matmul(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 2, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType a, required_input(ctx, 0, "A"));
  KILN_RETURN_IF_ERROR(check_dtype(a, 0, "A", {DType::kF32, DType::kF64}));
  KILN_ASSIGN_OR_RETURN(ValueType b, required_input(ctx, 1, "B"));
  KILN_RETURN_IF_ERROR(check_same_dtype(b, 1, "B", a.dtype, "input 0 'A'"));
  if (a.shape.empty()) return invalid_argument("input 0 'A' must have rank >= 1, got a scalar");
  if (b.shape.empty()) return invalid_argument("input 1 'B' must have rank >= 1, got a scalar");
  Shape as = a.shape;
  Shape bs = b.shape;
  if (as.size() == 1) as.insert(as.begin(), DimExpr(1));
  if (bs.size() == 1) bs.push_back(DimExpr(1));
  KILN_RETURN_IF_ERROR(
      check_dims_equal(bs[bs.size() - 2], as.back(),
                       fmt::format("input 1 'B' {} contracted dim (K = last dim of input 0 'A' {})",
                                   shape_to_string(b.shape), shape_to_string(a.shape))));
  std::vector<Shape> batches{Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2)};
  std::vector<std::string> labels{"input 0 'A' batch dims", "input 1 'B' batch dims"};
  KILN_ASSIGN_OR_RETURN(Shape out, broadcast_shapes(batches, labels));
  if (a.shape.size() > 1) out.push_back(as[as.size() - 2]);
  if (b.shape.size() > 1) out.push_back(bs.back());
  ctx.outputs = {ValueType{a.dtype, std::move(out)}};
  return ok_status();
}

Status matmul_kernel(const ir::Node&, std::span<const Tensor> in, std::span<Tensor> out) {
  ConcreteShape as = in[0].shape();
  ConcreteShape bs = in[1].shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2];
  const int64_t k = as.back();
  const int64_t n = bs.back();
  ConcreteShape a_batch(as.begin(), as.end() - 2);
  ConcreteShape b_batch(bs.begin(), bs.end() - 2);
  ConcreteShape batch(std::max(a_batch.size(), b_batch.size()), 1);
  for (size_t i = 0; i < batch.size(); ++i) {
    size_t from_end = batch.size() - i;
    int64_t da = from_end <= a_batch.size() ? a_batch[a_batch.size() - from_end] : 1;
    int64_t db = from_end <= b_batch.size() ? b_batch[b_batch.size() - from_end] : 1;
    batch[i] = da == 1 ? db : da;
  }
  const std::vector<int64_t> a_map = broadcast_index_map(a_batch, batch);
  const std::vector<int64_t> b_map = broadcast_index_map(b_batch, batch);
  const auto batches = static_cast<int64_t>(a_map.size());
  const std::vector<double> a = to_doubles(in[0]);
  const std::vector<double> b = to_doubles(in[1]);
  std::vector<double> y(static_cast<size_t>(out[0].element_count()), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t job = 0; job < batches * m; ++job) {
    const int64_t bi = job / m;
    const int64_t i = job % m;
    const double* ar = a.data() + a_map[bi] * m * k + i * k;
    const double* bm = b.data() + b_map[bi] * k * n;
    double* row = y.data() + job * n;
    for (int64_t kk = 0; kk < k; ++kk) {
      const double av = ar[kk];
      for (int64_t j = 0; j < n; ++j) row[j] += av * bm[kk * n + j];
    }
  }
  store_doubles(y, out[0]);
  return ok_status();
}

}  // namespace

void register_linear_ops(Registry& registry) {
  registry.add(make_op("Gemm", infer_gemm, gemm_kernel));
  registry.add(make_op("MatMul", infer_matmul, matmul_kernel));
}

}  // namespace kiln::ops
