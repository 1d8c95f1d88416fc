#include "kiln/hal/cpu/plain_kernels.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::hal::cpu {
namespace {

// Strides of `in` seen as an operand of `out`: right-aligned, 0 where broadcast.
StatusOr<std::vector<int64_t>> operand_strides(std::span<const int64_t> out,
                                               std::span<const int64_t> in, const char* name) {
  if (in.size() > out.size()) {
    return invalid_argument("operand {} has rank {}, more than the output's {}", name, in.size(),
                            out.size());
  }
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t i = in.size() - 1 - k;
    const size_t o = out.size() - 1 - k;
    if (in[i] == out[o]) {
      strides[o] = in[i] == 1 ? 0 : stride;
    } else if (in[i] != 1) {
      return invalid_argument("operand {} dim {} is {}, which does not broadcast to {}", name, i,
                              in[i], out[o]);
    }
    stride *= in[i];
  }
  return strides;
}

template <typename F>
void for_each_row(const BroadcastPlan& plan, F&& row) {
  const size_t rank = plan.dims.size();
  const int64_t inner = plan.dims[rank - 1];
  const int64_t rows = inner == 0 ? 0 : plan.count / inner;
  // Rows are spread over threads; each row's offsets come from its index, so a row's result does
  // not depend on which thread computes it.
#pragma omp parallel for schedule(static) if (plan.count > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rem = r, off_a = 0, off_b = 0;
    for (size_t d = rank - 1; d-- > 0;) {
      const int64_t i = rem % plan.dims[d];
      rem /= plan.dims[d];
      off_a += i * plan.stride_a[d];
      off_b += i * plan.stride_b[d];
    }
    row(r * inner, off_a, off_b, inner, plan.stride_a[rank - 1], plan.stride_b[rank - 1]);
  }
}

template <typename Op>
void binary_rows(const BroadcastPlan& plan, const float* a, const float* b, float* out, Op op) {
  for_each_row(plan, [&](int64_t o, int64_t oa, int64_t ob, int64_t n, int64_t sa, int64_t sb) {
    const float* pa = a + oa;
    const float* pb = b + ob;
    float* po = out + o;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], pb[i]);
    } else if (sa == 1 && sb == 0) {
      const float vb = *pb;
      for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], vb);
    } else if (sa == 0 && sb == 1) {
      const float va = *pa;
      for (int64_t i = 0; i < n; ++i) po[i] = op(va, pb[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i * sa], pb[i * sb]);
    }
  });
}

}  // namespace

StatusOr<BroadcastPlan> make_broadcast_plan(std::span<const int64_t> out,
                                            std::span<const int64_t> a,
                                            std::span<const int64_t> b) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sa, operand_strides(out, a, "A"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sb, operand_strides(out, b, "B"));
  BroadcastPlan plan;
  plan.count = 1;
  for (int64_t d : out) plan.count *= d;
  // Drop size-1 dims, then merge a dim into its inner neighbour when both operands step through
  // them as one.
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;
    if (!plan.dims.empty()) {
      const int64_t inner_dim = out[i];
      int64_t& pd = plan.dims.back();
      const bool merge_a = plan.stride_a.back() == sa[i] * inner_dim;
      const bool merge_b = plan.stride_b.back() == sb[i] * inner_dim;
      if (merge_a && merge_b) {
        pd *= inner_dim;
        plan.stride_a.back() = sa[i];
        plan.stride_b.back() = sb[i];
        continue;
      }
    }
    plan.dims.push_back(out[i]);
    plan.stride_a.push_back(sa[i]);
    plan.stride_b.push_back(sb[i]);
  }
  if (plan.dims.empty()) {
    plan.dims = {1};
    plan.stride_a = {0};
    plan.stride_b = {0};
  }
  return plan;
}

void broadcast_binary(BinaryOp op, const BroadcastPlan& plan, const float* a, const float* b,
                      float* out) {
  switch (op) {
    case BinaryOp::kAdd:
      binary_rows(plan, a, b, out, [](float x, float y) { return x + y; });
      break;
    case BinaryOp::kSub:
      binary_rows(plan, a, b, out, [](float x, float y) { return x - y; });
      break;
    case BinaryOp::kMul:
      binary_rows(plan, a, b, out, [](float x, float y) { return x * y; });
      break;
    case BinaryOp::kDiv:
      binary_rows(plan, a, b, out, [](float x, float y) { return x / y; });
      break;
  }
}

void broadcast_copy(const BroadcastPlan& plan, const float* a, float* out) {
  for_each_row(plan, [&](int64_t o, int64_t oa, int64_t, int64_t n, int64_t sa, int64_t) {
    const float* pa = a + oa;
    float* po = out + o;
    for (int64_t i = 0; i < n; ++i) po[i] = pa[i * sa];
  });
}

Status BroadcastStep::run(const ExecContext& ctx) {
  const auto* a = reinterpret_cast<const float*>(ctx.resolve(a_));
  auto* out = reinterpret_cast<float*>(ctx.resolve(out_));
  if (copy_) {
    broadcast_copy(plan_, a, out);
  } else {
    broadcast_binary(op_, plan_, a, reinterpret_cast<const float*>(ctx.resolve(b_)), out);
  }
  return ok_status();
}

std::string BroadcastStep::describe() const {
  static constexpr const char* kNames[] = {"add", "sub", "mul", "div"};
  return fmt::format("{}: kiln broadcast {} {} elements", label_,
                     copy_ ? "copy" : kNames[static_cast<int>(op_)], plan_.count);
}

}  // namespace kiln::hal::cpu
