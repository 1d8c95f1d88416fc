// MatMul and Gemm on f32 (shaders/matmul.comp, tiled; shaders/matmul_naive.comp, the baseline the
// benchmark compares it with). Every operand is read through element strides: Gemm's transposes,
// MatMul's 1-D operands and a broadcast batch (stride 0) need no copies. MatMul's batch dims are
// flattened into one batch index with one stride per operand, which expresses an operand whose
// batch dims equal the output's or that has a single batch; other broadcasts (A [2, 1, M, K] with
// B [1, 3, K, N]) run on the CPU.
//
// The shader is the same for every M, N and batch count (batch invariance: no size-chosen
// variant, no split-K), so row i of a product does not depend on the other rows.
//
// A MatMul's fused epilogue (passes::fuse_matmul) runs on the GPU too: kiln_scale is the shader's
// alpha and kiln_bias its C; kiln_residual, kiln_activation (GELU) and kiln_softmax are passes of
// the elementwise and softmax shaders over the product, in place, in the reference's order. With
// kiln_values (attention's probabilities times V) that product goes to a scratch buffer the
// program's kernels share (KernelBuilder::scratch), which the matmul shader then multiplies by V
// into the output.
#include <fmt/format.h>

#include <atomic>
#include <optional>

#include "kiln/hal/vulkan/broadcast.h"
#include "kiln/hal/vulkan/elementwise_launch.h"
#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/kernels/broadcast.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::vulkan {
namespace {

std::atomic<MatmulShader> g_matmul_shader{MatmulShader::kTiled};

constexpr uint32_t kTile = 64;  // matmul.comp's output tile

// One batched product: y[b] = alpha * A'[b] B'[b] (+ beta * C), element strides per operand.
struct Product {
  uint64_t batches = 1, m = 1, n = 1, k = 1;
  uint64_t a_rs = 0, a_cs = 0, a_bs = 0;
  uint64_t b_rs = 0, b_cs = 0, b_bs = 0;
  uint64_t c_rs = 0, c_cs = 0;
  float alpha = 1, beta = 1;
  bool has_c = false;
};

// Y = `y` (the dispatch's output, or a scratch buffer); `a_count` and `b_count`: the elements of
// A and B.
Status launch_product(KernelBuilder& b, const Product& p, Operand a, Operand bm, Operand c,
                      Operand y, uint64_t a_count, uint64_t b_count, const std::string& what) {
  const uint64_t total = p.batches * p.m * p.n;
  if (total == 0) return ok_status();
  if (total >= (uint64_t{1} << 32) || a_count >= (uint64_t{1} << 32) ||
      b_count >= (uint64_t{1} << 32)) {
    return unimplemented("{} has more elements than the Vulkan kernel's 32-bit indices reach",
                         what);
  }
  auto u = [](uint64_t v) { return static_cast<uint32_t>(v); };
  std::vector<uint32_t> params = {u(p.m),
                                  u(p.n),
                                  u(p.k),
                                  u(p.a_rs),
                                  u(p.a_cs),
                                  u(p.a_bs),
                                  u(p.b_rs),
                                  u(p.b_cs),
                                  u(p.b_bs),
                                  u(p.c_rs),
                                  u(p.c_cs),
                                  KernelBuilder::bits(p.alpha),
                                  KernelBuilder::bits(p.beta)};
  std::vector<Operand> operands = {a, bm, p.has_c ? c : a, std::move(y)};
  const uint32_t has_c = p.has_c ? 1 : 0;
  if (g_matmul_shader.load() == MatmulShader::kNaive) {
    params.push_back(u(total));
    b.describe(fmt::format("vulkan naive {} ({} x [{} x {}] x [{} x {}])", what, p.batches, p.m,
                           p.k, p.k, p.n));
    return b.launch("matmul_naive", {has_c}, total, std::move(operands), std::move(params));
  }
  const uint32_t groups[3] = {u((p.n + kTile - 1) / kTile), u((p.m + kTile - 1) / kTile),
                              u(p.batches)};
  b.describe(fmt::format("vulkan tiled {} ({} x [{} x {}] x [{} x {}], {}x{} tiles)", what,
                         p.batches, p.m, p.k, p.k, p.n, kTile, kTile));
  return b.launch_groups("matmul", {has_c}, groups, std::move(operands), std::move(params));
}

uint64_t product_of(const ConcreteShape& shape) {
  return static_cast<uint64_t>(kernels::product(shape));
}

// The stride of an operand's flattened batch (its batch dims, right-aligned against the
// output's): 0 for a single batch, `matrix` when its batch dims are the output's.
std::optional<uint64_t> batch_stride(const ConcreteShape& operand, const ConcreteShape& out,
                                     uint64_t matrix) {
  const uint64_t count = static_cast<uint64_t>(kernels::product(operand));
  if (count == 1) return 0;
  if (count == static_cast<uint64_t>(kernels::product(out))) {
    // Equal counts with every dim either equal or 1 against the broadcast output: the same index.
    const size_t lead = out.size() - operand.size();
    for (size_t i = 0; i < operand.size(); ++i) {
      if (operand[i] != out[lead + i]) return std::nullopt;
    }
    return matrix;
  }
  return std::nullopt;
}

}  // namespace

void set_matmul_shader_for_testing(MatmulShader shader) { g_matmul_shader.store(shader); }

Status build_matmul(KernelBuilder& b) {
  for (size_t i = 0; i < b.input_count(); ++i) {
    if (b.has_input(i)) KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(i), DType::kF32));
  }
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.output(0), DType::kF32));
  // kiln_scale (passes::fuse_matmul): the shader's alpha, each sum times it.
  KILN_ASSIGN_OR_RETURN(const std::optional<float> scale,
                        kernels::read_matmul_scale(b.attributes(), DType::kF32));
  KILN_ASSIGN_OR_RETURN(const bool softmax,
                        kernels::read_matmul_softmax(b.attributes(), DType::kF32));
  KILN_ASSIGN_OR_RETURN(const kernels::FusedActivation activation,
                        kernels::read_matmul_activation(b.attributes(), DType::kF32));
  const bool has_bias = b.input_count() > 2 && b.has_input(2);
  const bool has_residual = b.input_count() > 3 && b.has_input(3);
  if (has_residual && b.output(0).shape.size() > kMaxBroadcastRank) {
    return unimplemented("a kiln_residual of rank {} (the Vulkan add takes up to {})",
                         b.output(0).shape.size(), kMaxBroadcastRank);
  }
  ConcreteShape as = b.input(0).shape, bs = b.input(1).shape;
  if (as.empty() || bs.empty()) return internal_error("MatMul of a scalar passed its checks");
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  Product p;
  p.m = static_cast<uint64_t>(as[as.size() - 2]);
  p.k = static_cast<uint64_t>(as.back());
  p.n = static_cast<uint64_t>(bs.back());
  p.a_rs = p.k, p.a_cs = 1;
  p.b_rs = p.n, p.b_cs = 1;
  const ConcreteShape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  const ConcreteShape batch = kernels::broadcast_concrete(a_batch, b_batch);
  p.batches = static_cast<uint64_t>(kernels::product(batch));
  const auto a_bs = batch_stride(a_batch, batch, p.m * p.k);
  const auto b_bs = batch_stride(b_batch, batch, p.k * p.n);
  if (!a_bs || !b_bs) {
    return unimplemented(
        "MatMul batch broadcast {} x {} is not one flattened batch with a stride per operand",
        shape_to_string(b.input(0).shape), shape_to_string(b.input(1).shape));
  }
  p.a_bs = *a_bs;
  p.b_bs = *b_bs;
  if (scale) p.alpha = *scale;
  if (p.batches > b.device().max_workgroup_count[2]) {
    return unimplemented("{} batches exceed the device's {} workgroups along z", p.batches,
                         b.device().max_workgroup_count[2]);
  }
  KILN_ASSIGN_OR_RETURN(Operand a, b.input_operand(0));
  KILN_ASSIGN_OR_RETURN(Operand bm, b.input_operand(1));
  // kiln_bias [N]: the shader's C, one value per column for every row and batch, beta 1.
  Operand bias = a;
  if (has_bias) {
    KILN_ASSIGN_OR_RETURN(bias, b.input_operand(2));
    p.has_c = true;
    p.c_rs = 0, p.c_cs = 1;
  }
  // kiln_values (input 4): the epilogue below goes to the scores, in the program's scratch
  // buffer, which a second product then multiplies by V into the output.
  const bool values = b.input_count() > 4 && b.has_input(4);
  std::optional<uint64_t> v_bs;
  if (values) {
    const ConcreteShape& vs = b.input(4).shape;
    v_bs = batch_stride(ConcreteShape(vs.begin(), vs.end() - 2), batch,
                        p.n * static_cast<uint64_t>(vs.back()));
    if (!v_bs) {
      return unimplemented(
          "input 4 'kiln_values' {} is not one flattened batch with a stride against the product",
          shape_to_string(vs));
    }
  }
  const uint64_t elements = p.batches * p.m * p.n;
  Operand y = b.output_operand(0);
  if (values) {
    KILN_ASSIGN_OR_RETURN(y, b.scratch(elements * sizeof(float)));
  }
  ConcreteShape scores_shape = b.output(0).shape;
  if (values) scores_shape.back() = static_cast<int64_t>(p.n);
  KILN_RETURN_IF_ERROR(launch_product(b, p, a, bm, bias, y, product_of(b.input(0).shape),
                                      product_of(b.input(1).shape),
                                      has_bias ? "matmul +bias" : "matmul"));
  if (elements == 0 && !values) return ok_status();
  // Then the rest of the epilogue in the reference's order (kernels/linalg.cc), each a pass over
  // the product in place with the shader an Add or a Gelu dispatch would run: kiln_residual, added
  // with its broadcast (attention's mask [B, 1, 1, S]); kiln_activation; kiln_softmax.
  if (has_residual && elements > 0) {
    KILN_ASSIGN_OR_RETURN(Operand residual, b.input_operand(3));
    b.describe(fmt::format("vulkan add of the residual {} to the product",
                           shape_to_string(b.input(3).shape)));
    KILN_RETURN_IF_ERROR(launch_add(b, y, residual, b.input(3).shape, y, scores_shape));
  }
  using Kind = kernels::FusedActivation::Kind;
  if (activation.kind == Kind::kGelu || activation.kind == Kind::kGeluTanh) {
    b.describe(fmt::format("vulkan unary {} of the product ({} elements)",
                           kernels::describe(activation), elements));
    KILN_RETURN_IF_ERROR(launch_unary(
        b, activation.kind == Kind::kGelu ? kUnaryGeluErf : kUnaryGeluTanh, y, y, elements));
  } else if (activation.kind != Kind::kNone) {
    return internal_error("MatMul's kiln_activation {} passed its checks",
                          kernels::describe(activation));
  }
  if (!softmax) return ok_status();
  // kiln_softmax: the softmax shader's row form over the product, in place (each invocation reads
  // its elements before it writes them), as a Softmax dispatch after the MatMul would run.
  const uint64_t rows = p.batches * p.m;
  if (elements > 0) {
    b.describe(fmt::format("vulkan softmax of the product ({} rows of {}, a workgroup per row)",
                           rows, p.n));
    KILN_RETURN_IF_ERROR(
        b.launch_rows("softmax", {0u, 1u}, rows, {y, y},
                      {static_cast<uint32_t>(rows), static_cast<uint32_t>(p.n), 1u}));
  }
  if (!values) return ok_status();
  // kiln_values: the probabilities times V, the matmul shader as MatMul(P, V) after them runs it.
  const ConcreteShape& vs = b.input(4).shape;
  Product q;
  q.batches = p.batches;
  q.m = p.m;
  q.k = p.n;
  q.n = static_cast<uint64_t>(vs.back());
  q.a_rs = q.k, q.a_cs = 1, q.a_bs = q.m * q.k;
  q.b_rs = q.n, q.b_cs = 1;
  q.b_bs = *v_bs;
  KILN_ASSIGN_OR_RETURN(Operand v, b.input_operand(4));
  return launch_product(b, q, y, v, y, b.output_operand(0), elements, product_of(vs),
                        "matmul of the probabilities and V");
}

Status build_gemm(KernelBuilder& b) {
  for (size_t i = 0; i < 2; ++i) KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(i), DType::kF32));
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.output(0), DType::kF32));
  KILN_ASSIGN_OR_RETURN(kernels::GemmAttributes g,
                        kernels::read_gemm_attributes(b.attributes(), DType::kF32));
  const ConcreteShape& as = b.input(0).shape;
  const ConcreteShape& y = b.output(0).shape;
  Product p;
  p.m = static_cast<uint64_t>(y[0]);
  p.n = static_cast<uint64_t>(y[1]);
  p.k = static_cast<uint64_t>(as[g.trans_a ? 0 : 1]);
  if (g.trans_a) {
    p.a_rs = 1, p.a_cs = p.m;
  } else {
    p.a_rs = p.k, p.a_cs = 1;
  }
  if (g.trans_b) {
    p.b_rs = 1, p.b_cs = p.k;
  } else {
    p.b_rs = p.n, p.b_cs = 1;
  }
  p.alpha = static_cast<float>(g.alpha);
  p.beta = static_cast<float>(g.beta);
  Operand c;
  if (b.has_input(2)) {
    KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(2), DType::kF32));
    const ConcreteShape& cs = b.input(2).shape;
    p.has_c = true;
    if (cs.size() == 1) {
      p.c_cs = cs[0] == 1 ? 0 : 1;
    } else if (cs.size() == 2) {
      p.c_rs = cs[0] == 1 ? 0 : static_cast<uint64_t>(cs[1]);
      p.c_cs = cs[1] == 1 ? 0 : 1;
    }
    KILN_ASSIGN_OR_RETURN(c, b.input_operand(2));
  }
  KILN_ASSIGN_OR_RETURN(Operand a, b.input_operand(0));
  KILN_ASSIGN_OR_RETURN(Operand bm, b.input_operand(1));
  return launch_product(b, p, a, bm, c, b.output_operand(0), product_of(b.input(0).shape),
                        product_of(b.input(1).shape), "gemm");
}

}  // namespace kiln::hal::vulkan
