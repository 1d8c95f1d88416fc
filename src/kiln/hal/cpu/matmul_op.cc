// Gemm and MatMul. On AVX2 + FMA hosts both run kiln's own kernel (gemm_kernel.h): B packed in
// panels (once at prepare time for a constant, shared by every plan of the device), A read in
// place, every batch matrix of a batched MatMul one product, and a MatMul whose B is one matrix
// for all of A's leading dims one product of all their rows.
//
// Batch invariance: that kernel computes each element of the result by one fixed sequence of
// operations (gemm_kernel.h), so a row of A gets the same bits whatever the number of rows
// around it, and a batch matrix whatever the number of matrices: a sample's output matches the
// sample run alone whichever leading dim of A (or of both operands) is its batch dim. oneDNN
// 2.6's gemm-based matmul (x64:gemm:jit on AVX2) does not: a row's sums depend on the row count
// (a gemv at 1 row, other kernels above about 260 rows), on its position in a block of 6 rows
// (a block of 1-3 rows sums even and odd k apart) and on the thread split (k split over
// threads when rows and columns are few). Running it per sample of dim 0 only protects a batch
// in dim 0; a sequence-first [T,N,K] x [K,M] (PyTorch's MultiheadAttention) still gave each
// sample's rows a gemm of N rows.
//
// Without AVX2 + FMA, and for f16 and bf16 data, oneDNN matmul runs instead. Transposes are strided
// views (no copies); constant weights are reordered once into the layout the kernel prefers; Gemm's
// alpha is an output scale and beta * C a sum post-op over a destination pre-filled with broadcast
// C. A gemm-based implementation runs one sample (a row of a 2-D product, dim 0 of a batched one)
// per call with a primitive made for one sample, which keeps a batch in dim 0 invariant.
//
// f16 and bf16 products compute in their own type where oneDNN has a kernel for it on this CPU
// (bf16 on AVX-512 with bf16 instructions; oneDNN 2.6 has no f16 matmul on CPUs without AVX-512
// FP16), else in f32 with A and B converted on the way in (a constant B once). The destination is
// f32 either way (oneDNN's low-precision kernels accumulate in f32): Gemm's alpha and beta * C
// apply in f32, and one conversion rounds the result to the output's type, as ONNX Runtime's
// f32-computing f16 MatMul rounds it. The choice depends on the dtype and the machine only.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "kiln/hal/cpu/activation_step.h"
#include "kiln/hal/cpu/gemm_kernel.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/plain_kernels.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/broadcast.h"
#include "kiln/kernels/op_attributes.h"

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
  dnnl::memory::data_type data = dt::f32;  // A, B, C and Y as stored
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
  // A and B in `compute`, Y in f32.
  dt compute = dt::f32;
  auto make_pd = [&](bool split) {
    const dnnl_desc src = strided_desc(one_sample(p.src, split), p.src_strides, compute);
    const dnnl_dims wei_dims = one_sample(p.wei, split && p.b_sample != 0);
    const dnnl_desc wei = p.weights_constant ? dnnl_desc(wei_dims, compute, tag::any)
                                             : strided_desc(wei_dims, p.wei_strides, compute);
    const dnnl_desc dst = plain_desc(one_sample(p.dst, split));
    dnnl::matmul::desc desc(src, wei, dst);
    return dnnl::matmul::primitive_desc(desc, p.attr, b.engine());
  };
  if (p.data != dt::f32) {
    compute = p.data;
    try {
      if (is_reference_impl(impl_name(make_pd(false)))) compute = dt::f32;
    } catch (const dnnl::error&) {
      compute = dt::f32;  // no kernel for this data type here
    }
  }
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
  const dnnl_desc src_view = strided_desc(p.src, p.src_strides, compute);
  const dnnl_desc wei_view = strided_desc(p.wei, p.wei_strides, compute);
  KILN_ASSIGN_OR_RETURN(BufferRef src, b.input_as(p.a, src_view, src_view));
  BufferRef wei;
  if (p.weights_constant) {
    KILN_ASSIGN_OR_RETURN(wei, b.input_as(p.b, pd.weights_desc(), wei_view));
  } else {
    KILN_ASSIGN_OR_RETURN(wei, b.input_as(p.b, wei_view, wei_view));
  }
  // f16/bf16 results are summed in an f32 temporary and converted at the end.
  const dnnl_desc dst_plain = plain_desc(p.dst);
  BufferRef dst;
  if (p.data == dt::f32) {
    KILN_ASSIGN_OR_RETURN(dst, b.output(p.y, dst_plain));
  } else {
    dst = b.temp(dst_plain.get_size());
  }
  if (prefill_c) {
    const int32_t c = *prefill_c;
    KILN_ASSIGN_OR_RETURN(
        BroadcastPlan plan,
        make_broadcast_plan(b.value(p.y).shape, b.value(c).shape, b.value(p.y).shape));
    KILN_ASSIGN_OR_RETURN(BufferRef c_ref, b.input_as(c, plain_desc(b.value(c).shape)));
    b.add(std::make_unique<BroadcastStep>(b.op().dispatch().name, BinaryOp::kAdd, true,
                                          std::move(plan), c_ref, c_ref, dst));
  }
  const std::string types = p.data == dt::f32 ? ""
                                              : fmt::format(" {} as {}", describe_data_type(p.data),
                                                            describe_data_type(compute));
  PrimitiveStep& step = b.add_primitive(
      b.label(fmt::format("{} {} {}x{}x{}{}{}", what, impl_name(pd), p.dst[p.dst.size() - 2],
                          p.src.back(), p.dst.back(), types,
                          split ? fmt::format(" per sample x{}", repeat) : "")),
      pd, dnnl::matmul(pd), repeat);
  const size_t in_size = dnnl::memory::data_type_size(compute);
  step.bind(DNNL_ARG_SRC, pd.src_desc(), src, split ? p.a_sample * in_size : 0);
  step.bind(DNNL_ARG_WEIGHTS, pd.weights_desc(), wei, split ? p.b_sample * in_size : 0);
  step.bind(DNNL_ARG_DST, pd.dst_desc(), dst, split ? p.y_sample * sizeof(float) : 0);
  if (p.data != dt::f32) {
    const dnnl_desc stored = plain_desc(p.dst, p.data);
    KILN_ASSIGN_OR_RETURN(BufferRef y, b.output(p.y, stored));
    b.add_reorder(dst, dst_plain, y, stored);
  }
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

namespace {

// All inputs and the output have input 0's dtype, one oneDNN stores (f32, f16, bf16).
Status check_stored_dtype(const OpReader& op) {
  const DType dtype = op.input(0).dtype;
  if (!stored_data_type(dtype)) {
    return unimplemented("input 0 '{}' must be f32, f16 or bf16, got {}", op.input(0).name,
                         dtype_name(dtype));
  }
  for (size_t i = 1; i < op.input_count(); ++i) {
    // A kiln_residual without a kiln_bias leaves input 2 absent.
    if (!op.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(op.expect_input_dtype(i, dtype));
  }
  return op.expect_output_dtype(0, dtype);
}

}  // namespace

// What the Gemm fast path runs: f32, f16 or bf16, and a C that the broadcast steps can spread
// over Y. The definition has checked the rest (select_path).
Status check_gemm(const OpReader& op) {
  KILN_RETURN_IF_ERROR(check_stored_dtype(op));
  if (op.has_input(2)) {
    const ConcreteShape& y = op.output(0).shape;
    KILN_RETURN_IF_ERROR(make_broadcast_plan(y, op.input(2).shape, y).status());
  }
  return ok_status();
}

namespace {

// Gemm's attributes and the product's sizes: Y[m, n] = alpha * A'[m, k] B'[k, n] + beta * C.
struct GemmParams {
  int64_t trans_a = 0, trans_b = 0;
  double alpha = 1.0, beta = 1.0;
  int64_t m = 0, k = 0, n = 0;
};

StatusOr<GemmParams> read_gemm(const OpReader& op) {
  KILN_ASSIGN_OR_RETURN(kernels::GemmAttributes a,
                        kernels::read_gemm_attributes(op.attributes(), op.input(0).dtype));
  GemmParams g;
  g.trans_a = a.trans_a;
  g.trans_b = a.trans_b;
  g.alpha = a.alpha;
  g.beta = a.beta;
  const ConcreteShape& as = op.input(0).shape;
  const ConcreteShape& bs = op.input(1).shape;
  g.m = g.trans_a ? as[1] : as[0];
  g.k = g.trans_a ? as[0] : as[1];
  g.n = g.trans_b ? bs[0] : bs[1];
  return g;
}

Status build_gemm_dnnl(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(const GemmParams g, read_gemm(op));
  const int64_t ta = g.trans_a, tb = g.trans_b, m = g.m, k = g.k, n = g.n;
  const double alpha = g.alpha, beta = g.beta;
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
  p.data = *stored_data_type(op.input(0).dtype);
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

}  // namespace

namespace {

// kiln's kernel computes f32 only.
bool use_kiln_kernel(const OpReader& op) {
  return op.input(0).dtype == DType::kF32 && gemm::cpu_supported();
}

// The GELU form a fused MatMul ends with (kiln_activation), as kiln's kernel names it.
StatusOr<gemm::Activation> matmul_activation(const OpReader& op) {
  KILN_ASSIGN_OR_RETURN(kernels::FusedActivation a,
                        kernels::read_matmul_activation(op.attributes(), op.input(0).dtype));
  switch (a.kind) {
    case kernels::FusedActivation::Kind::kGelu: return gemm::Activation::kGelu;
    case kernels::FusedActivation::Kind::kGeluTanh: return gemm::Activation::kGeluTanh;
    default: return gemm::Activation::kNone;  // read_matmul_activation allows no other
  }
}

}  // namespace

// What the MatMul fast path runs: f32, f16 or bf16 operands of rank 1 to 6 whose batch dims it
// can broadcast (matmul_shapes), and a kiln_scale, kiln_bias, kiln_residual, kiln_values (inputs
// 2, 3, 4), kiln_activation or kiln_softmax on kiln's kernel only. The definition has checked
// the rest (select_path).
Status check_matmul(const OpReader& op) {
  KILN_ASSIGN_OR_RETURN(gemm::Activation activation, matmul_activation(op));
  if ((op.has_input(2) || op.has_input(3) || op.has_input(4) ||
       activation != gemm::Activation::kNone ||
       op.attributes().has(kernels::kMatmulScaleAttribute) ||
       op.attributes().has(kernels::kMatmulSoftmaxAttribute)) &&
      !use_kiln_kernel(op)) {
    return unimplemented(
        "MatMul's kiln_scale, kiln_bias, kiln_residual, kiln_activation, kiln_softmax and "
        "kiln_values run on kiln's f32 kernel only (AVX2 + FMA)");
  }
  KILN_RETURN_IF_ERROR(check_stored_dtype(op));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(0, 1, 6));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(1, 1, 6));
  return matmul_shapes(op.input(0).shape, op.input(1).shape).status();
}

namespace {

Status build_matmul_dnnl(ProgramBuilder& b) {
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
  p.data = *stored_data_type(op.input(0).dtype);
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

// ---- kiln's kernel (gemm_kernel.h) ----

// Runs gemm::multiply on the dispatch's buffers, packing a B that is not a constant first.
class GemmStep : public Step {
 public:
  struct Buffers {
    BufferRef a, b, c, y;  // b: a B that is packed at run time; c: Gemm's C, when it counts
    BufferRef residual;    // MatMul's kiln_residual, when it has one
    BufferRef packed;      // B's packed panels: a constant's, or a temporary the step packs into
  };
  // How the step packs a B that is not constant: matrix i of the B buffer starts at
  // offsets[i] and holds element (r, c) at r * row_stride + c * col_stride.
  struct Packing {
    bool at_run_time = false;
    std::vector<int64_t> offsets;
    int64_t row_stride = 0, col_stride = 0;

    // The packed panels of `product`'s B (its k and n): `packed`, which the matrices in `source`
    // are packed into first where at_run_time says so.
    float* packed_at_run_time(const ExecContext& ctx, const gemm::Product& product,
                              const BufferRef& source, const BufferRef& packed) const {
      auto* panels = reinterpret_cast<float*>(ctx.resolve(packed));
      if (at_run_time) {
        gemm::pack(product.k, product.n, reinterpret_cast<const float*>(ctx.resolve(source)),
                   offsets, row_stride, col_stride, panels);
      }
      return panels;
    }
  };
  GemmStep(std::string label, gemm::Product product, std::vector<int64_t> a_offsets,
           std::vector<int64_t> b_offsets, int64_t y_stride, Buffers buffers, Packing packing)
      : label_(std::move(label)),
        product_(product),
        a_offsets_(std::move(a_offsets)),
        b_offsets_(std::move(b_offsets)),
        y_stride_(y_stride),
        buffers_(buffers),
        packing_(std::move(packing)) {}

  Status run(const ExecContext& ctx) override {
    float* packed = packing_.packed_at_run_time(ctx, product_, buffers_.b, buffers_.packed);
    gemm::Product p = product_;
    p.c = reinterpret_cast<const float*>(ctx.resolve(buffers_.c));  // null when there is no C
    p.residual = reinterpret_cast<const float*>(ctx.resolve(buffers_.residual));
    if (!residual_offsets_.empty()) p.residual_offsets = residual_offsets_.data();
    const auto* a = reinterpret_cast<const float*>(ctx.resolve(buffers_.a));
    auto* y = reinterpret_cast<float*>(ctx.resolve(buffers_.y));
    if (values_) {
      const float* packed_v = values_->packing.packed_at_run_time(ctx, values_->product,
                                                                  values_->source, values_->packed);
      gemm::attend(p, a, a_offsets_, packed, b_offsets_, values_->product, packed_v,
                   values_->offsets, y, y_stride_, y_offsets_);
    } else if (y_offsets_.empty()) {
      gemm::multiply(p, a, a_offsets_, packed, b_offsets_, y, y_stride_);
    } else {
      gemm::multiply(p, a, a_offsets_, packed, b_offsets_, y, y_offsets_);
    }
    return ok_status();
  }
  // Product i writes Y at y_offsets[i] instead of i * y_stride (a strided output).
  void write_at(std::vector<int64_t> y_offsets) { y_offsets_ = std::move(y_offsets); }
  // Product i reads its residual at residual_offsets[i] instead of i * y_stride (a residual
  // broadcast over products).
  void read_residual_at(std::vector<int64_t> residual_offsets) {
    residual_offsets_ = std::move(residual_offsets);
  }
  // A MatMul's kiln_values: the product's rows (which then get a softmax) times V
  // (gemm::attend), Y the output of that second product. `product` gives its sizes and Y's row
  // stride; matrix i of V is packed at `offsets[i]` of `packed`, from `source` at run time where
  // `packing` says so.
  struct Values {
    gemm::Product product;
    BufferRef packed, source;
    Packing packing;
    std::vector<int64_t> offsets;
  };
  void then_multiply_by(Values values) { values_ = std::move(values); }
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  gemm::Product product_;
  std::vector<int64_t> a_offsets_, b_offsets_;
  int64_t y_stride_;
  std::vector<int64_t> y_offsets_, residual_offsets_;
  Buffers buffers_;
  Packing packing_;
  std::optional<Values> values_;
};

// B's matrices [k, n] (`count` of them, matrix i at i * k * n in a plain buffer, or read with
// the strides given for a single transposed one) as packed panels: a constant is packed once per
// device; anything else is packed by the step into a temporary.
StatusOr<BufferRef> packed_b(ProgramBuilder& b, int32_t v, int64_t count, int64_t k, int64_t n,
                             int64_t row_stride, int64_t col_stride, GemmStep::Packing& packing,
                             BufferRef& plain) {
  std::vector<int64_t> offsets(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) offsets[static_cast<size_t>(i)] = i * k * n;
  const int64_t per_matrix = gemm::packed_floats(k, n);
  if (b.constant(v) != nullptr) {
    // The source descriptor says how the bytes are read (a transposed read has other strides),
    // the target one names this packing: [count,] panels, k, 16.
    const dnnl_desc source = count == 1 ? strided_desc({k, n}, {row_stride, col_stride})
                                        : plain_desc(ConcreteShape{count, k, n});
    const int64_t panels = gemm::panel_count(n);
    const ConcreteShape packed_dims = count == 1
                                          ? ConcreteShape{panels, k, gemm::kPanelColumns}
                                          : ConcreteShape{count, panels, k, gemm::kPanelColumns};
    return b.constant_transformed(
        v, source, plain_desc(packed_dims),
        [k, n, offsets, row_stride, col_stride](const std::byte* src, std::byte* dst) {
          gemm::pack(k, n, reinterpret_cast<const float*>(src), offsets, row_stride, col_stride,
                     reinterpret_cast<float*>(dst));
        });
  }
  KILN_ASSIGN_OR_RETURN(plain, b.input_as(v, plain_desc(b.value(v).shape)));
  packing.at_run_time = true;
  packing.offsets = std::move(offsets);
  packing.row_stride = row_stride;
  packing.col_stride = col_stride;
  return b.temp(static_cast<size_t>(count * per_matrix) * sizeof(float));
}

// A MatMul's B stored in a dense strided layout other than plain (a Transpose's view,
// transpose_op.cc), packed at run time straight from its bytes: matrix i (row-major over B's
// leading dims) from its leading strides, rows and columns by the last two. Nullopt when B is
// plain, a constant or not of the output's rank: packed_b then serves.
std::optional<BufferRef> packed_b_from_strides(ProgramBuilder& b, int32_t v, int64_t count,
                                               int64_t k, int64_t n, GemmStep::Packing& packing,
                                               BufferRef& source) {
  if (b.constant(v) != nullptr) return std::nullopt;
  const dnnl_desc& layout = b.layout(v);
  const std::optional<dnnl_dims> strides = dense_strides(layout);
  const ConcreteShape& dims = b.value(v).shape;
  const size_t r = dims.size();
  if (!strides || is_plain(layout) || r < 2 || dims[r - 2] != k || dims[r - 1] != n) {
    return std::nullopt;
  }
  packing.at_run_time = true;
  packing.offsets.assign(static_cast<size_t>(count), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, offset = 0;
    for (size_t d = r - 2; d-- > 0;) {
      offset += rest % dims[d] * (*strides)[d];
      rest /= dims[d];
    }
    packing.offsets[static_cast<size_t>(i)] = offset;
  }
  packing.row_stride = (*strides)[r - 2];
  packing.col_stride = (*strides)[r - 1];
  source = BufferRef::of_value(v);
  return b.temp(static_cast<size_t>(count * gemm::packed_floats(k, n)) * sizeof(float));
}

// A MatMul's A stored in a dense strided layout other than plain whose last dim (k) is contiguous
// (a Transpose's view that keeps the last axis, transpose_op.cc): its strides, with which the
// kernel reads each matrix's rows in place. Nullopt when A is plain, a constant, not of the
// output's rank or not contiguous along k: A is then read plain.
std::optional<dnnl_dims> strided_a(const ProgramBuilder& b, int32_t v, size_t rank) {
  if (b.constant(v) != nullptr || b.value(v).shape.size() != rank || rank < 2) return std::nullopt;
  const dnnl_desc& layout = b.layout(v);
  std::optional<dnnl_dims> strides = dense_strides(layout);
  if (!strides || is_plain(layout) || strides->back() != 1) return std::nullopt;
  return strides;
}

// Attention's head merge: where MatMul output `y` (rank r) is read only by one Transpose that
// keeps the last axis last, the strides that make that Transpose's output plain (output dim i
// of the Transpose walks y's dim perm[i]): the product writes its matrices there and the
// Transpose only relabels the bytes (transpose_op.cc). Nullopt otherwise.
std::optional<dnnl_dims> merged_output_strides(const ProgramBuilder& b, int32_t y, size_t r) {
  std::vector<int64_t> perm;
  int readers = 0;
  const bool one_transpose =
      b.readers_accept(y, [&](const OpReader& reader, const OpPath& path, size_t slot) {
        if (path.op_type != "Transpose" || slot != 0 || ++readers > 1) return false;
        auto read = kernels::read_transpose_perm(reader.attributes(), r);
        if (!read.ok() || read->back() != static_cast<int64_t>(r) - 1) return false;
        perm = *std::move(read);
        return true;
      });
  if (!one_transpose || readers != 1) return std::nullopt;
  const ConcreteShape& dims = b.value(y).shape;
  dnnl_dims strides(r);
  int64_t stride = 1;
  for (size_t i = r; i-- > 0;) {
    strides[static_cast<size_t>(perm[i])] = stride;
    stride *= std::max<int64_t>(dims[static_cast<size_t>(perm[i])], 1);
  }
  return strides;
}

std::string product_label(const char* what, const gemm::Product& p, size_t count) {
  const char* activation = p.activation == gemm::Activation::kGelu       ? " +gelu"
                           : p.activation == gemm::Activation::kGeluTanh ? " +gelu_tanh"
                           : p.activation == gemm::Activation::kRelu     ? " +relu"
                           : p.softmax                                   ? " +softmax"
                                                                         : "";
  return fmt::format("{} kiln_gemm:{} {}x{}x{}{}{}", what, gemm::isa_name(gemm::best_isa()), p.m,
                     p.k, p.n, count > 1 ? fmt::format(" x{} matrices", count) : "", activation);
}

Status build_gemm_kiln(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(const GemmParams g, read_gemm(op));
  const int64_t ta = g.trans_a, tb = g.trans_b, m = g.m, k = g.k, n = g.n;
  const double alpha = g.alpha, beta = g.beta;
  gemm::Product p = gemm::dense_product(m, k, n);
  p.alpha = static_cast<float>(alpha);
  GemmStep::Buffers buffers;
  // The kernel reads A along k: a transposed A is copied into rows first.
  const dnnl_desc a_rows = plain_desc(ConcreteShape{m, k});
  KILN_ASSIGN_OR_RETURN(buffers.a,
                        ta ? b.input_as(op.input_index(0), a_rows, strided_desc({m, k}, {1, m}))
                           : b.input_as(op.input_index(0), a_rows));
  GemmStep::Packing packing;
  KILN_ASSIGN_OR_RETURN(buffers.packed, packed_b(b, op.input_index(1), 1, k, n, tb ? 1 : n,
                                                 tb ? k : 1, packing, buffers.b));
  if (op.has_input(2) && beta != 0.0) {
    // C broadcast to [m, n] (right-aligned, rank <= 2): strides 0 along its unit dims.
    const ConcreteShape& cs = op.input(2).shape;
    const int64_t c_rows = cs.size() == 2 ? cs[0] : 1, c_cols = cs.empty() ? 1 : cs.back();
    KILN_ASSIGN_OR_RETURN(buffers.c, b.input_as(op.input_index(2), plain_desc(cs)));
    p.beta = static_cast<float>(beta);
    p.c_row_stride = c_rows > 1 ? c_cols : 0;
    p.c_col_stride = c_cols > 1 ? 1 : 0;
  }
  KILN_ASSIGN_OR_RETURN(buffers.y, b.output(op.output_index(0), plain_desc(op.output(0).shape)));
  b.add(std::make_unique<GemmStep>(b.label(product_label("gemm", p, 1)), p, std::vector<int64_t>{0},
                                   std::vector<int64_t>{0}, m * n, buffers, std::move(packing)));
  return ok_status();
}

Status build_matmul_kiln(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(MatmulShapes s, matmul_shapes(op.input(0).shape, op.input(1).shape));
  const size_t r = s.y.size();
  const int64_t m = s.a[r - 2], k = s.a[r - 1], n = s.b[r - 1];
  const int64_t a_matrices = product(dnnl_dims(s.a.begin(), s.a.end() - 2), 0);
  const int64_t b_matrices = product(dnnl_dims(s.b.begin(), s.b.end() - 2), 0);
  gemm::Product p = gemm::dense_product(0, k, n);  // m below
  // A read in place through its strides: a product per matrix, rows lda apart.
  const std::optional<dnnl_dims> a_strides = strided_a(b, op.input_index(0), r);
  if (a_strides) p.lda = (*a_strides)[r - 2];
  // kiln_values (input 4): the output is the softmaxed product (the scores) times V [..., n, dv]
  // (gemm::attend); the scores are never stored.
  const bool values = op.has_input(4);
  const int64_t dv = values ? op.output(0).shape.back() : 0;
  ConcreteShape scores_shape = op.output(0).shape;
  if (values) scores_shape.back() = n;
  // Y written strided for a head merge after it; not with a residual (read as Y is written) or a
  // softmax (over contiguous rows), unless both go to the scores (kiln_values).
  std::optional<dnnl_dims> y_strides;
  if (r > 2 &&
      (values || (!op.has_input(3) && !op.attributes().has(kernels::kMatmulSoftmaxAttribute)))) {
    y_strides = merged_output_strides(b, op.output_index(0), r);
  }
  if (y_strides && !values) p.ldy = (*y_strides)[r - 2];
  std::vector<int64_t> a_offsets, b_offsets, y_offsets, residual_offsets, v_offsets;
  // V's leading dims, right-aligned against the output's (infer_matmul: they broadcast to them).
  ConcreteShape v_lead(r - 2, 1);
  if (values) {
    const ConcreteShape& vs = op.input(4).shape;
    std::copy(vs.begin(), vs.end() - 2, v_lead.end() - static_cast<ptrdiff_t>(vs.size() - 2));
  }
  // kiln_residual broadcast over some dims of the output (attention's mask [B, 1, 1, S] against
  // [B, H, S, S]): the residual's row for each row of the output, as the reference kernel maps
  // them (the output's dims but the last, in order: product i's rows are i * m ...).
  const bool broadcast_residual = op.has_input(3) && op.input(3).shape != scores_shape;
  std::vector<int64_t> residual_rows;
  if (broadcast_residual) {
    ConcreteShape from = op.input(3).shape, to = scores_shape;
    from.pop_back();  // infer_matmul: the output's rank (>= 2 where it broadcasts) and last dim
    to.pop_back();
    residual_rows = kernels::broadcast_index_map(from, to);
  }
  const bool rows_along_dim0 =
      a_strides && r == 3 && b_matrices == 1 && !y_strides && !op.has_input(3) &&
      !op.attributes().has(kernels::kMatmulSoftmaxAttribute) && s.a[0] > s.a[1];
  if (rows_along_dim0) {
    // A [d0, d1, k] read through its strides with one B, d0 > d1 (a sequence-first view,
    // PyTorch's MultiheadAttention: [T, N, k] over the bytes of [N, T, k]): a product per index
    // of dim 1, whose rows walk dim 0, rather than d0 products of d1 rows each; it writes Y
    // [d0, d1, n] with rows d1 * n apart. Every element is the same sum either way
    // (gemm_kernel.h).
    p.m = s.a[0];
    p.lda = (*a_strides)[0];
    p.ldy = s.y[1] * n;
    for (int64_t i = 0; i < s.y[1]; ++i) {
      a_offsets.push_back(i * (*a_strides)[1]);
      b_offsets.push_back(0);
      y_offsets.push_back(i * n);
    }
  } else if (b_matrices == 1 && !a_strides && !y_strides && !broadcast_residual && !values) {
    // One B for every matrix of A (broadcast over A's leading dims, which are then the
    // output's): one product of all of A's rows.
    p.m = a_matrices * m;
    a_offsets = {0};
    b_offsets = {0};
  } else {
    // A product per output matrix, each operand's leading dims broadcast by stride 0.
    p.m = m;
    const int64_t count = product(dnnl_dims(s.y.begin(), s.y.end() - 2), 0);
    const int64_t per_packed = gemm::packed_floats(k, n);
    a_offsets.resize(static_cast<size_t>(count));
    b_offsets.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      int64_t rest = i, a_index = 0, b_index = 0, v_index = 0, a_scale = 1, b_scale = 1,
              v_scale = 1, a_offset = 0;
      int64_t y_offset = 0;
      for (size_t d = r - 2; d-- > 0;) {
        const int64_t index = rest % s.y[d];
        rest /= s.y[d];
        if (y_strides) y_offset += index * (*y_strides)[d];
        if (s.a[d] != 1) {
          a_index += index * a_scale;
          if (a_strides) a_offset += index * (*a_strides)[d];
        }
        if (s.b[d] != 1) b_index += index * b_scale;
        a_scale *= s.a[d];
        b_scale *= s.b[d];
        if (values && v_lead[d] != 1) v_index += index * v_scale;
        if (values) v_scale *= v_lead[d];
      }
      a_offsets[static_cast<size_t>(i)] = a_strides ? a_offset : a_index * m * k;
      b_offsets[static_cast<size_t>(i)] = b_index * per_packed;
      if (values) v_offsets.push_back(v_index * gemm::packed_floats(n, dv));
      if (y_strides) y_offsets.push_back(y_offset);
      // gemm::attend reads a residual of the scores at explicit offsets.
      if (op.has_input(3) && m > 0 && (broadcast_residual || values)) {
        residual_offsets.push_back(
            broadcast_residual ? residual_rows[static_cast<size_t>(i * m)] * n : i * m * n);
      }
    }
  }
  GemmStep::Buffers buffers;
  if (op.has_input(2)) {
    // kiln_bias [n]: C as one value per column, beta 1 (fma(bias, 1, sum) is sum + bias, the
    // unfused Add's bits).
    KILN_ASSIGN_OR_RETURN(buffers.c, b.input_as(op.input_index(2), plain_desc(op.input(2).shape)));
    p.beta = 1.0f;
    p.c_row_stride = 0;
    p.c_col_stride = 1;
  }
  KILN_ASSIGN_OR_RETURN(p.activation, matmul_activation(op));
  // kiln_scale: alpha, each sum times it (a Mul after the product: the same rounding).
  KILN_ASSIGN_OR_RETURN(const std::optional<float> scale,
                        kernels::read_matmul_scale(op.attributes(), op.input(0).dtype));
  if (scale) p.alpha = *scale;
  // kiln_softmax: each row's softmax, by the work item that computed the row.
  KILN_ASSIGN_OR_RETURN(p.softmax,
                        kernels::read_matmul_softmax(op.attributes(), op.input(0).dtype));
  if (op.has_input(3)) {
    // kiln_residual: the output's shape, row stride n (each product's at its Y's offset); or one
    // that broadcasts, at the offsets above, row stride 0 where its rows broadcast.
    KILN_ASSIGN_OR_RETURN(buffers.residual,
                          b.input_as(op.input_index(3), plain_desc(op.input(3).shape)));
    // Rows that broadcast read one residual row: stride 0.
    const bool rows_broadcast = broadcast_residual && m > 1 && residual_rows[1] == residual_rows[0];
    p.residual_row_stride = rows_broadcast ? 0 : n;
  }
  if (a_strides) {
    buffers.a = BufferRef::of_value(op.input_index(0));
  } else {
    KILN_ASSIGN_OR_RETURN(buffers.a, b.input_as(op.input_index(0), plain_desc(op.input(0).shape)));
  }
  GemmStep::Packing packing;
  if (auto strided =
          packed_b_from_strides(b, op.input_index(1), b_matrices, k, n, packing, buffers.b)) {
    buffers.packed = *strided;
  } else {
    KILN_ASSIGN_OR_RETURN(
        buffers.packed, packed_b(b, op.input_index(1), b_matrices, k, n, n, 1, packing, buffers.b));
  }
  const dnnl_desc y_layout = y_strides ? strided_desc(to_dnnl_dims(op.output(0).shape), *y_strides)
                                       : plain_desc(op.output(0).shape);
  KILN_ASSIGN_OR_RETURN(buffers.y, b.output(op.output_index(0), y_layout));
  const size_t count = a_offsets.size();
  std::string label = product_label("matmul", p, count);
  if (values)
    label += fmt::format(" then x V {} (its rows in cache)", shape_to_string(op.input(4).shape));
  if (y_strides) label += " (written for the transpose after it)";
  if (rows_along_dim0) label += " (rows along dim 0 of a transposed A)";
  if (broadcast_residual) {
    label += fmt::format(" +mask {} (a residual broadcast)", shape_to_string(op.input(3).shape));
  } else if (op.has_input(3)) {
    label += " +residual";
  }
  auto step =
      std::make_unique<GemmStep>(b.label(label), p, std::move(a_offsets), std::move(b_offsets),
                                 p.m * (values ? dv : n), buffers, std::move(packing));
  if (!y_offsets.empty()) step->write_at(std::move(y_offsets));
  if (!residual_offsets.empty()) step->read_residual_at(std::move(residual_offsets));
  if (values) {
    GemmStep::Values v;
    v.product = gemm::dense_product(p.m, n, dv);
    if (y_strides) v.product.ldy = (*y_strides)[r - 2];
    const int32_t vi = op.input_index(4);
    const int64_t v_matrices = product(dnnl_dims(v_lead.begin(), v_lead.end()), 0);
    if (auto strided = packed_b_from_strides(b, vi, v_matrices, n, dv, v.packing, v.source)) {
      v.packed = *strided;
    } else {
      KILN_ASSIGN_OR_RETURN(v.packed,
                            packed_b(b, vi, v_matrices, n, dv, dv, 1, v.packing, v.source));
    }
    v.offsets = std::move(v_offsets);
    step->then_multiply_by(std::move(v));
  }
  b.add(std::move(step));
  return ok_status();
}

}  // namespace

bool matmul_reads_in_place(const OpReader& op, size_t slot, const std::vector<int64_t>& strides) {
  // A, B or V (kiln_values) of the rank of the output: its matrices are enumerated by its own
  // leading dims. kiln's kernel packs B and V from any strides, and reads A's rows in place where
  // k is contiguous.
  if (op.dispatch().op_type != "MatMul" || (slot > 1 && slot != 4) || !use_kiln_kernel(op)) {
    return false;
  }
  const size_t rank = op.input(slot).shape.size();
  if (rank < 2 || rank != op.output(0).shape.size() || strides.size() != rank) return false;
  return slot != 0 || strides.back() == 1;
}

bool unpadded_pointwise(const OpReader& op, const kernels::ConvAttributes& conv) {
  if (!use_kiln_kernel(op) || conv.group != 1) return false;
  const ConcreteShape& w = op.input(1).shape;
  for (size_t i = 2; i < w.size(); ++i) {
    if (w[i] != 1 || conv.window.pads_begin[i - 2] != 0 || conv.window.pads_end[i - 2] != 0) {
      return false;
    }
  }
  return true;
}

bool conv_runs_as_product(const OpReader& op, const kernels::ConvAttributes& conv) {
  if (!unpadded_pointwise(op, conv)) return false;
  const ConcreteShape& x = op.input(0).shape;
  return std::all_of(x.begin() + 2, x.end(), [](int64_t d) { return d == 1; });
}

Status build_conv_as_product(ProgramBuilder& b, const kernels::FusedActivation& activation,
                             bool channels_last, const BufferRef* pixels) {
  const OpReader& op = b.op();
  const ConcreteShape& y = op.output(0).shape;
  // The pixels read: the input's, or the copied ones at the output's spatial dims.
  ConcreteShape x = op.input(0).shape;
  if (pixels != nullptr) std::copy(y.begin() + 2, y.end(), x.begin() + 2);
  const int64_t k = x[1], n = y[1];
  int64_t rows = x[0];  // one per pixel of every sample
  for (size_t i = 2; i < x.size(); ++i) rows *= x[i];
  // Channels last (NHWC, 4-D), a pixel's channels are one row: [N, C, H, W] as [N * H * W, C].
  auto layout = [channels_last](const ConcreteShape& shape) {
    return channels_last ? dnnl_desc(to_dnnl_dims(shape), dt::f32, tag::nhwc) : plain_desc(shape);
  };
  gemm::Product p = gemm::dense_product(rows, k, n);
  GemmStep::Buffers buffers;
  if (pixels != nullptr) {
    buffers.a = *pixels;
  } else {
    KILN_ASSIGN_OR_RETURN(buffers.a, b.input_as(op.input_index(0), layout(x)));
  }
  // B[c][m] = W[m][c]: W [M, C, 1...] read along its columns.
  GemmStep::Packing packing;
  KILN_ASSIGN_OR_RETURN(buffers.packed,
                        packed_b(b, op.input_index(1), 1, k, n, 1, k, packing, buffers.b));
  if (op.has_input(2)) {
    // The bias as C, one value per column, beta 1: fma(bias, 1, sum) = sum + bias.
    KILN_ASSIGN_OR_RETURN(buffers.c, b.input_as(op.input_index(2), plain_desc(op.input(2).shape)));
    p.beta = 1.0f;
    p.c_col_stride = 1;
  }
  if (op.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(buffers.residual, b.input_as(op.input_index(3), layout(y)));
    p.residual_row_stride = n;
  }
  // Relu in the product's epilogue, while a block is in cache; another activation as kiln's step.
  const bool relu = activation.kind == kernels::FusedActivation::Kind::kRelu;
  if (relu) p.activation = gemm::Activation::kRelu;
  KILN_ASSIGN_OR_RETURN(buffers.y, b.output(op.output_index(0), layout(y)));
  const std::string label =
      fmt::format("{} ({}){}{}", product_label("conv", p, 1),
                  channels_last ? fmt::format("1x1 over channels-last pixels, {} -> {}",
                                              describe(layout(x)), describe(layout(y)))
                                : "1x1 on single pixels",
                  op.has_input(3) ? " +residual" : "",
                  activation.kind == kernels::FusedActivation::Kind::kNone || relu
                      ? ""
                      : " +" + kernels::describe(activation));
  b.add(std::make_unique<GemmStep>(b.label(label), p, std::vector<int64_t>{0},
                                   std::vector<int64_t>{0}, rows * n, buffers, std::move(packing)));
  if (activation.kind != kernels::FusedActivation::Kind::kNone && !relu && rows * n > 0) {
    add_activation(b, buffers.y, layout(y), activation);
  }
  return ok_status();
}

Status build_gemm(ProgramBuilder& b) {
  return use_kiln_kernel(b.op()) ? build_gemm_kiln(b) : build_gemm_dnnl(b);
}

Status build_matmul(ProgramBuilder& b) {
  return use_kiln_kernel(b.op()) ? build_matmul_kiln(b) : build_matmul_dnnl(b);
}

}  // namespace kiln::hal::cpu
