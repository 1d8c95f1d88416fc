#include "kiln/hal/cpu/channel_binary_step.h"

#include <algorithm>

#include "kiln/hal/cpu/cpu_isa.h"

namespace kiln::hal::cpu {
namespace {

template <BinaryOp Op>
inline float apply(float x, float s) {
  if constexpr (Op == BinaryOp::kAdd) return x + s;
  if constexpr (Op == BinaryOp::kSub) return x - s;
  if constexpr (Op == BinaryOp::kMul) return x * s;
  return x / s;
}

// n elements: y[i] = x[i] op s[i * Step] (Step 1: a row of channels; 0: one channel's run). One
// operation per element, which the compiler vectorizes for the function's target.
template <BinaryOp Op, int Step>
inline __attribute__((always_inline)) void span(const float* x, const float* s, float* y,
                                                int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = apply<Op>(x[i], s[i * Step]);
}

template <BinaryOp Op, int Step>
__attribute__((target("avx512f,avx2"))) void span_avx512(const float* x, const float* s, float* y,
                                                         int64_t n) {
  span<Op, Step>(x, s, y, n);
}

template <BinaryOp Op, int Step>
__attribute__((target("avx2"))) void span_avx2(const float* x, const float* s, float* y,
                                               int64_t n) {
  span<Op, Step>(x, s, y, n);
}

using SpanFn = void (*)(const float*, const float*, float*, int64_t);

template <BinaryOp Op, int Step>
SpanFn span_for(Isa isa) {
  return isa == Isa::kAvx512 ? span_avx512<Op, Step> : span_avx2<Op, Step>;
}

// The span functions of `op`: [0] along a row of channels, [1] along one channel's run.
std::pair<SpanFn, SpanFn> spans(BinaryOp op, Isa isa) {
  switch (op) {
    case BinaryOp::kAdd:
      return {span_for<BinaryOp::kAdd, 1>(isa), span_for<BinaryOp::kAdd, 0>(isa)};
    case BinaryOp::kSub:
      return {span_for<BinaryOp::kSub, 1>(isa), span_for<BinaryOp::kSub, 0>(isa)};
    case BinaryOp::kMul:
      return {span_for<BinaryOp::kMul, 1>(isa), span_for<BinaryOp::kMul, 0>(isa)};
    case BinaryOp::kDiv:
      return {span_for<BinaryOp::kDiv, 1>(isa), span_for<BinaryOp::kDiv, 0>(isa)};
  }
  return {nullptr, nullptr};
}

}  // namespace

Status ChannelBinaryStep::run(const ExecContext& ctx) {
  const auto* x = reinterpret_cast<const float*>(ctx.resolve(x_));
  const auto* s = reinterpret_cast<const float*>(ctx.resolve(s_));
  auto* y = reinterpret_cast<float*>(ctx.resolve(y_));
  static const Isa isa = best_isa();
  // (Not a structured binding: clang 14 cannot capture one in the lambda below.)
  const std::pair<SpanFn, SpanFn> fns = spans(op_, isa);
  const SpanFn along_row = fns.first, along_run = fns.second;
  const bool innermost = runs_.order == ChannelRuns::Order::kChannelInnermost;
  const int64_t channels = runs_.channels;
  const int64_t per_sample = runs_.runs / std::max<int64_t>(1, samples_);  // runs of one sample
  for_each_channel_span(runs_, [&](int64_t i, int64_t n, int64_t r, int64_t within) {
    const float* row = s + (per_sample_ ? r / per_sample * channels : 0);
    if (innermost) {
      along_row(x + i, row + within, y + i, n);
    } else {
      along_run(x + i, row + r % channels, y + i, n);
    }
  });
  return ok_status();
}

}  // namespace kiln::hal::cpu
