// kiln's f32 MaxPool over two spatial dims in channels-last layout (acdb of [N, C, H, W]), on
// AVX2 or AVX-512: one pass that also makes a window holding a NaN NaN, where oneDNN's max skips a
// NaN and so needed two more passes over the windows after it (pool_op.cc). ResNet-50's max pool
// (64 channels, 112x112 -> 56x56, 3x3 stride 2) ran at 1.73 ms at batch 8 on oneDNN's jit kernel
// and 0.12 ms at batch 1 (Intel Xeon, AVX-512, 2 threads, in the model).
//
// Each output element is the element-wise max over its window's taps inside the input, in the
// order the reference kernel takes them (kiln::kernels MaxPool: rows of the window, then columns):
// a tap replaces the max only when it is greater, so of equal values (+0 and -0) the first stays;
// the first NaN tap makes the element that NaN (its payload kept); a window with no tap inside the
// input gives the lowest finite float, as the reference gives. So the bits are the reference
// kernel's, on both ISAs, and an element depends on its window's values only (not on the batch, the
// thread count or the ISA: docs/architecture.md invariant 4).
//
// Vouching (finite_guard.h): the kernel also compares each value it writes with a bound, in
// registers, and says whether every one was finite and within it; MaxPoolStep marks its output so.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/hal/cpu/cpu_isa.h"
#include "kiln/hal/cpu/step.h"

namespace kiln::hal::cpu {

// X [n, h, w, c] and Y [n, out_h, out_w, c], dense, channels innermost; window dims [0] along h,
// [1] along w; `pads` the padding before each (the padding after only shapes out_h and out_w).
struct MaxPoolShape {
  int64_t n = 0, h = 0, w = 0, c = 0, out_h = 0, out_w = 0;
  int64_t kernel[2] = {1, 1}, strides[2] = {1, 1}, dilations[2] = {1, 1}, pads[2] = {0, 0};
};

// Y = MaxPool(X) as the header says, on the calling thread's OpenMP team with `isa`'s code (AVX2's
// where the CPU lacks AVX-512F). Returns whether every value written is finite with |y| <= bound.
// Call only where the CPU has AVX2 + FMA (cpu_has(Isa::kAvx2)).
bool max_pool_channels_last(const MaxPoolShape& shape, const float* x, float* y, float bound,
                            Isa isa = best_isa());

class MaxPoolStep : public Step {
 public:
  // With `vouches` >= 0 (the value Y is), marks it in ExecContext::vouched when every value
  // written was finite within `bound`, and clears the mark otherwise.
  MaxPoolStep(std::string label, MaxPoolShape shape, BufferRef x, BufferRef y, float bound,
              int32_t vouches)
      : label_(std::move(label)), shape_(shape), x_(x), y_(y), bound_(bound), vouches_(vouches) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  MaxPoolShape shape_;
  BufferRef x_, y_;
  float bound_;
  int32_t vouches_;
};

namespace detail {
// Output rows [first, last) (row r: sample r / out_h, output row r % out_h) on one thread; call
// each only where the CPU has its ISA.
bool max_pool_rows_avx2(const MaxPoolShape& s, const float* x, float* y, int64_t first,
                        int64_t last, float bound);
bool max_pool_rows_avx512(const MaxPoolShape& s, const float* x, float* y, int64_t first,
                          int64_t last, float bound);
}  // namespace detail

}  // namespace kiln::hal::cpu
