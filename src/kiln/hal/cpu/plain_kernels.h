// kiln's own kernels on plain (row-major) f32 data, for what oneDNN does not cover directly:
// elementwise arithmetic with full numpy broadcasting on both operands. OpenMP-parallel; each
// output element is computed by the same expression whatever the shape, so results do not depend
// on the batch size or thread count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/cpu/step.h"

namespace kiln::hal::cpu {

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv };

// Output dims and per-operand element strides (0 along broadcast dims), with adjacent dims merged
// where every operand allows it.
struct BroadcastPlan {
  std::vector<int64_t> dims;
  std::vector<int64_t> stride_a;
  std::vector<int64_t> stride_b;
  int64_t count = 0;
};

// Plan for out = f(a, b) where a and b broadcast (numpy rules, right-aligned) to `out`. Error
// when an operand does not broadcast to `out`.
StatusOr<BroadcastPlan> make_broadcast_plan(std::span<const int64_t> out,
                                            std::span<const int64_t> a, std::span<const int64_t> b);

// out[i] = a[...] op b[...]; `out` may alias `a` or `b` when that operand is not broadcast.
void broadcast_binary(BinaryOp op, const BroadcastPlan& plan, const float* a, const float* b,
                      float* out);
// out[i] = a[...] (b is ignored; plan made with b == out).
void broadcast_copy(const BroadcastPlan& plan, const float* a, float* out);

// Step running broadcast_binary (or broadcast_copy when `copy` is set) on plain buffers.
class BroadcastStep : public Step {
 public:
  BroadcastStep(std::string label, BinaryOp op, bool copy, BroadcastPlan plan, BufferRef a,
                BufferRef b, BufferRef out)
      : label_(std::move(label)),
        op_(op),
        copy_(copy),
        plan_(std::move(plan)),
        a_(a),
        b_(b),
        out_(out) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override;

 private:
  std::string label_;
  BinaryOp op_;
  bool copy_;
  BroadcastPlan plan_;
  BufferRef a_, b_, out_;
};

}  // namespace kiln::hal::cpu
