// Gemm and MatMul on oneDNN matmul. Transposes are strided views (no copies); constant weights
// are reordered once into the layout the kernel prefers; Gemm's alpha is an output scale and
// beta * C a sum post-op over a destination pre-filled with broadcast C.
//
// Batch invariance: gemm-based matmul kernels (oneDNN's x64:gemm:jit on AVX2) round differently
// at M=8 than at M=1, so such a kernel runs one sample (a row of a 2-D product, dim 0 of a
// batched one) per call with a primitive made for one sample.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/plain_kernels.h"
#include "kiln/hal/cpu/program_builder.h"

namespace kiln::hal::cpu {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

int64_t product(const dnnl_dims& dims, size_t from) {
  return std::accumulate(dims.begin() + static_cast<ptrdiff_t>(from), dims.end(), int64_t{1},
                         std::multiplies<>());
}

// One matmul problem in oneDNN terms, plus how to split it into samples.
struct MatmulProblem {
  dnnl_dims src, wei, dst;             // full dims
  dnnl_dims src_strides, wei_strides;  // element strides of the (possibly transposed) views
  int32_t a = -1, b = -1, y = -1;      // values
  bool weights_constant = false;
  dnnl::primitive_attr attr;
  // Per-sample split: sample count and element strides of one sample in A, B and Y (0 for an
  // operand shared by all samples).
  int64_t samples = 1;
  int64_t a_sample = 0, b_sample = 0, y_sample = 0;
};

dnnl_dims row_major_strides(const dnnl_dims& dims) {
  dnnl_dims s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * std::max<int64_t>(dims[i], 1);
  return s;
}

dnnl_dims one_sample(dnnl_dims dims, bool split) {
  if (split) dims[0] = 1;
  return dims;
}

Status build_matmul_problem(ProgramBuilder& b, MatmulProblem& p, const std::string& what,
                            const std::optional<int32_t>& prefill_c) {
  auto make_pd = [&](bool split) {
    const dnnl_desc src = strided_desc(one_sample(p.src, split), p.src_strides);
    const dnnl_dims wei_dims = one_sample(p.wei, split && p.b_sample != 0);
    const dnnl_desc wei = p.weights_constant ? dnnl_desc(wei_dims, dt::f32, tag::any)
                                             : strided_desc(wei_dims, p.wei_strides);
    const dnnl_desc dst = plain_desc(one_sample(p.dst, split));
    dnnl::matmul::desc desc(src, wei, dst);
    return dnnl::matmul::primitive_desc(desc, p.attr, b.engine());
  };
  dnnl::matmul::primitive_desc pd = make_pd(false);
  int64_t repeat = 1;
  if (p.samples > 1) {
    dnnl::matmul::primitive_desc one = make_pd(true);
    const std::string impl = impl_name(pd);
    if (impl != impl_name(one) || reduction_may_depend_on_batch(impl)) {
      pd = one;
      repeat = p.samples;
    }
  }
  const bool split = repeat > 1;
  const dnnl_desc src_view = strided_desc(p.src, p.src_strides);
  const dnnl_desc wei_view = strided_desc(p.wei, p.wei_strides);
  KILN_ASSIGN_OR_RETURN(BufferRef src, b.input_as(p.a, src_view, src_view));
  BufferRef wei;
  if (p.weights_constant) {
    KILN_ASSIGN_OR_RETURN(wei, b.input_as(p.b, pd.weights_desc(), wei_view));
  } else {
    KILN_ASSIGN_OR_RETURN(wei, b.input_as(p.b, wei_view, wei_view));
  }
  KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(p.y, plain_desc(p.dst)));
  if (prefill_c) {
    const int32_t c = *prefill_c;
    KILN_ASSIGN_OR_RETURN(
        BroadcastPlan plan,
        make_broadcast_plan(b.value(p.y).shape, b.value(c).shape, b.value(p.y).shape));
    KILN_ASSIGN_OR_RETURN(BufferRef c_ref, b.input_as(c, plain_desc(b.value(c).shape)));
    b.add(std::make_unique<BroadcastStep>(b.op().dispatch().name, BinaryOp::kAdd, true,
                                          std::move(plan), c_ref, c_ref, dst));
  }
  PrimitiveStep& step =
      b.add_primitive(b.label(fmt::format("{} {} {}x{}x{}{}", what, impl_name(pd),
                                          p.dst[p.dst.size() - 2], p.src.back(), p.dst.back(),
                                          split ? fmt::format(" per sample x{}", repeat) : "")),
                      pd, dnnl::matmul(pd), repeat);
  step.bind(DNNL_ARG_SRC, pd.src_desc(), src, split ? p.a_sample * sizeof(float) : 0);
  step.bind(DNNL_ARG_WEIGHTS, pd.weights_desc(), wei, split ? p.b_sample * sizeof(float) : 0);
  step.bind(DNNL_ARG_DST, pd.dst_desc(), dst, split ? p.y_sample * sizeof(float) : 0);
  return ok_status();
}

// MatMul operand shapes after numpy's 1-D promotion, right-aligned to a common rank.
struct MatmulShapes {
  dnnl_dims a, b, y;  // y: the promoted output (with the unit dims 1-D inputs add)
};

StatusOr<MatmulShapes> matmul_shapes(const ConcreteShape& a_in, const ConcreteShape& b_in) {
  if (a_in.empty() || b_in.empty()) return invalid_argument("MatMul inputs must have rank >= 1");
  const size_t r = std::max<size_t>({a_in.size(), b_in.size(), 2});
  // Right-aligned into rank r with leading 1s; a 1-D A is a row [1,K], a 1-D B a column [K,1].
  dnnl_dims a(r, 1), b(r, 1);
  if (a_in.size() == 1) {
    a[r - 1] = a_in[0];
  } else {
    std::copy(a_in.begin(), a_in.end(), a.end() - static_cast<ptrdiff_t>(a_in.size()));
  }
  if (b_in.size() == 1) {
    b[r - 2] = b_in[0];
  } else {
    std::copy(b_in.begin(), b_in.end(), b.end() - static_cast<ptrdiff_t>(b_in.size()));
  }
  if (a[r - 1] != b[r - 2]) {
    return invalid_argument("inner dims differ: A [{}] and B [{}]", fmt::join(a_in, ","),
                            fmt::join(b_in, ","));
  }
  MatmulShapes s{a, b, dnnl_dims(r)};
  for (size_t i = 0; i + 2 < r; ++i) {
    if (a[i] != b[i] && a[i] != 1 && b[i] != 1) {
      return invalid_argument("batch dim {} does not broadcast: A [{}] and B [{}]", i,
                              fmt::join(a_in, ","), fmt::join(b_in, ","));
    }
    s.y[i] = std::max(a[i], b[i]);
  }
  s.y[r - 2] = a[r - 2];
  s.y[r - 1] = b[r - 1];
  return s;
}

}  // namespace

Status check_gemm(const OpReader& op) {
  KILN_RETURN_IF_ERROR(op.expect_attributes({"alpha", "beta", "transA", "transB"}));
  KILN_RETURN_IF_ERROR(op.expect_inputs(2, 3));
  KILN_RETURN_IF_ERROR(op.expect_outputs(1, 1));
  for (size_t i = 0; i < op.input_count(); ++i) {
    KILN_RETURN_IF_ERROR(op.expect_input_dtype(i, DType::kF32));
  }
  KILN_RETURN_IF_ERROR(op.expect_output_dtype(0, DType::kF32));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(0, 2, 2));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(1, 2, 2));
  KILN_ASSIGN_OR_RETURN(int64_t ta, op.get_int("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t tb, op.get_int("transB", 0));
  KILN_RETURN_IF_ERROR(op.get_float("alpha", 1.0).status());
  KILN_RETURN_IF_ERROR(op.get_float("beta", 1.0).status());
  const ConcreteShape& a = op.input(0).shape;
  const ConcreteShape& b = op.input(1).shape;
  const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb) {
    return invalid_argument("inner dims differ: A [{}] (transA={}) and B [{}] (transB={})",
                            fmt::join(a, ","), ta, fmt::join(b, ","), tb);
  }
  if (op.output(0).shape != ConcreteShape{m, n}) {
    return invalid_argument("output must be [{},{}], got [{}]", m, n,
                            fmt::join(op.output(0).shape, ","));
  }
  if (op.has_input(2)) {
    if (op.input(2).shape.size() > 2) return invalid_argument("input 2 'C' must have rank <= 2");
    const ConcreteShape y{m, n};
    KILN_RETURN_IF_ERROR(make_broadcast_plan(y, op.input(2).shape, y).status());
  }
  return ok_status();
}

Status build_gemm(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(int64_t ta, op.get_int("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t tb, op.get_int("transB", 0));
  KILN_ASSIGN_OR_RETURN(double alpha, op.get_float("alpha", 1.0));
  KILN_ASSIGN_OR_RETURN(double beta, op.get_float("beta", 1.0));
  const ConcreteShape& as = op.input(0).shape;
  const ConcreteShape& bs = op.input(1).shape;
  const int64_t m = ta ? as[1] : as[0], k = ta ? as[0] : as[1], n = tb ? bs[0] : bs[1];
  MatmulProblem p;
  p.a = op.input_index(0);
  p.b = op.input_index(1);
  p.y = op.output_index(0);
  p.src = {m, k};
  p.src_strides = ta ? dnnl_dims{1, m} : dnnl_dims{k, 1};
  p.wei = {k, n};
  p.wei_strides = tb ? dnnl_dims{1, k} : dnnl_dims{n, 1};
  p.dst = {m, n};
  p.weights_constant = b.constant(p.b) != nullptr;
  p.samples = m;
  p.a_sample = ta ? 1 : k;
  p.b_sample = 0;
  p.y_sample = n;
  p.attr = b.attr();
  if (alpha != 1.0) p.attr.set_output_scales(0, {static_cast<float>(alpha)});
  std::optional<int32_t> prefill;
  if (op.has_input(2) && beta != 0.0) {
    dnnl::post_ops post_ops;
    post_ops.append_sum(static_cast<float>(beta));
    p.attr.set_post_ops(post_ops);
    prefill = op.input_index(2);
  }
  return build_matmul_problem(b, p, "gemm", prefill);
}

Status check_matmul(const OpReader& op) {
  KILN_RETURN_IF_ERROR(op.expect_attributes({}));
  KILN_RETURN_IF_ERROR(op.expect_inputs(2, 2));
  KILN_RETURN_IF_ERROR(op.expect_outputs(1, 1));
  KILN_RETURN_IF_ERROR(op.expect_input_dtype(0, DType::kF32));
  KILN_RETURN_IF_ERROR(op.expect_input_dtype(1, DType::kF32));
  KILN_RETURN_IF_ERROR(op.expect_output_dtype(0, DType::kF32));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(0, 1, 6));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(1, 1, 6));
  KILN_ASSIGN_OR_RETURN(MatmulShapes s, matmul_shapes(op.input(0).shape, op.input(1).shape));
  ConcreteShape expected(s.y.begin(), s.y.end());
  if (op.input(1).shape.size() == 1) expected.pop_back();
  if (op.input(0).shape.size() == 1)
    expected.erase(expected.end() - (op.input(1).shape.size() == 1 ? 1 : 2));
  if (op.output(0).shape != expected) {
    return invalid_argument("output must be [{}], got [{}]", fmt::join(expected, ","),
                            fmt::join(op.output(0).shape, ","));
  }
  return ok_status();
}

Status build_matmul(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(MatmulShapes s, matmul_shapes(op.input(0).shape, op.input(1).shape));
  MatmulProblem p;
  p.a = op.input_index(0);
  p.b = op.input_index(1);
  p.y = op.output_index(0);
  p.src = s.a;
  p.wei = s.b;
  p.dst = s.y;
  p.src_strides = row_major_strides(s.a);
  p.wei_strides = row_major_strides(s.b);
  // Constant weights get oneDNN's preferred layout when they are one matrix for all samples.
  p.weights_constant =
      b.constant(p.b) != nullptr && product(s.b, 0) == product(s.b, s.b.size() - 2);
  p.attr = b.attr();
  const size_t r = s.y.size();
  if (r == 2) {
    p.samples = s.y[0];
    p.a_sample = s.a[1];
    p.y_sample = s.y[1];
  } else {
    p.samples = s.y[0];
    p.a_sample = s.a[0] == 1 ? 0 : product(s.a, 1);
    p.b_sample = s.b[0] == 1 ? 0 : product(s.b, 1);
    p.y_sample = product(s.y, 1);
  }
  return build_matmul_problem(b, p, "matmul", std::nullopt);
}

}  // namespace kiln::hal::cpu
