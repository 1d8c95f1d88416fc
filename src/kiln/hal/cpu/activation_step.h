// kiln's own activation epilogues for the CPU backend, which keep NaN where oneDNN would hide it.
//
// oneDNN 2.6 computes relu and clip (eltwise and post-op alike, and fuse_norm_relu) with
// max(x, bound): a NaN comes out as the bound, so one NaN pixel vanished inside ResNet-50 while
// ONNX Runtime and PyTorch give NaN outputs. kiln therefore hands relu or clip to oneDNN only
// where no value can be NaN (a conv's guarded post-op, finite_guard.h): elsewhere the producer
// (conv, batch norm) writes the pre-activation value, and an ActivationStep applies the
// activation in place right after, while the data is still in cache (kernels/activation.h gives
// the rule; NaN stays NaN). A conv's fused SiLU runs there too, on kiln's vector kernel
// (vector_map_kernels.h), cheaper than oneDNN's swish post-op. Gelu, Sigmoid, Tanh, Exp and Elu
// run on oneDNN's eltwise, followed by an EltwiseEdgeStep that rewrites the non-finite inputs'
// outputs (as the exact functions and ONNX Runtime give them); Softplus and Mish on kiln's vector
// kernels in a VectorMapStep.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/cpu/cpu_isa.h"
#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/hal/cpu/step.h"
#include "kiln/hal/cpu/vector_map_kernels.h"
#include "kiln/kernels/activation.h"

namespace kiln::hal::cpu {

class ProgramBuilder;

// out[i] = activation(in[i]) for `count` floats; `in` may equal `out`. OpenMP-parallel in one
// piece a thread (parallel_pieces.h); every element gets the same expression whatever the thread
// count.
void apply_activation(const kernels::FusedActivation& activation, const float* in, float* out,
                      size_t count);

// apply_activation as a step.
class ActivationStep : public Step {
 public:
  ActivationStep(std::string label, kernels::FusedActivation activation, BufferRef in,
                 BufferRef out, size_t count)
      : label_(std::move(label)), activation_(activation), in_(in), out_(out), count_(count) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  kernels::FusedActivation activation_;
  BufferRef in_, out_;
  size_t count_;
};

// y[i] = f(x[i]) for `count` floats by one of kiln's vector kernels (vector_map_kernels.h),
// OpenMP-parallel in one piece a thread, as ActivationStep; `in` may equal `out`. The kernel
// gives every element the same bits whatever the piece it falls in.
class VectorMapStep : public Step {
 public:
  VectorMapStep(std::string label, vector_map::Function function, BufferRef in, BufferRef out,
                size_t count)
      : label_(std::move(label)), function_(function), in_(in), out_(out), count_(count) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  vector_map::Function function_;
  BufferRef in_, out_;
  size_t count_;
};

// Applies `activation` (not kNone) to `buffer`, which holds a value of the dispatch being built in
// `layout`, in place. A blocked layout's padding must stay zero: when activation(0) != 0 and the
// layout has padding, the value goes through a plain temporary and back.
void add_activation(ProgramBuilder& b, const BufferRef& buffer, const dnnl_desc& layout,
                    const kernels::FusedActivation& activation);

// Applies the activation `activation` reading `in` and writing `out`, both in `layout` (a
// standalone Relu).
void add_activation(ProgramBuilder& b, const BufferRef& in, const BufferRef& out,
                    const dnnl_desc& layout, const kernels::FusedActivation& activation);

// The value an eltwise op run on oneDNN gives at a non-finite input, where oneDNN's kernels (which
// clamp their input into a finite range) would not: NaN -> NaN always; for +inf / -inf, Gelu
// gives +inf / NaN (x * Phi(x) = -inf * 0), Sigmoid 1 / 0, Tanh 1 / -1, Exp +inf / 0, Elu +inf /
// -alpha (alpha * (e^-inf - 1)).
enum class EdgeRule { kGelu, kSigmoid, kTanh, kExp, kElu };

// For `count` floats: where in[i] is NaN or infinite, out[i] = the rule's value (`alpha`: Elu's);
// elsewhere out[i] is left as it is.
class EltwiseEdgeStep : public Step {
 public:
  EltwiseEdgeStep(std::string label, EdgeRule rule, BufferRef in, BufferRef out, size_t count,
                  float alpha = 0.0f)
      : label_(std::move(label)), rule_(rule), in_(in), out_(out), count_(count), alpha_(alpha) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  EdgeRule rule_;
  BufferRef in_, out_;
  size_t count_;
  float alpha_;
};

// MaxPool's NaN: oneDNN's max pooling skips a NaN in the window (max(acc, x) keeps acc), while
// PyTorch, numpy and kiln's portable kernel give NaN. The builder pools the same input a second
// time by average (including padding, so no window is empty) into `mask`, which is NaN exactly
// where the window holds a NaN or both infinities, and this step writes NaN there into `out`,
// except where the max is +inf: that window holds +inf and either a NaN or -inf, and only its
// taps tell which. Those (a window needs an infinity for it) the step then reads in `src`, in
// a second pass over the logical output indices, and makes NaN where a tap is NaN.
struct PoolWindows {
  dnnl_desc src_layout, dst_layout;  // dst_layout is also the mask's
  std::vector<int64_t> kernel, strides, dilations, pads_begin;
};

class MaxPoolNanStep : public Step {
 public:
  MaxPoolNanStep(std::string label, BufferRef src, BufferRef mask, BufferRef out, size_t count,
                 PoolWindows windows)
      : label_(std::move(label)),
        src_(src),
        mask_(mask),
        out_(out),
        count_(count),
        windows_(std::move(windows)) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  // The second pass: NaN where the max is +inf, the mask NaN and a tap NaN.
  void nan_taps_under_inf(const float* src, const float* mask, float* out) const;

  std::string label_;
  BufferRef src_, mask_, out_;
  size_t count_;
  PoolWindows windows_;
};

// Softmax's NaN: oneDNN 2.6's softmax along the innermost axis gives a lane (the elements
// normalized together) that holds a NaN or +inf a single NaN and zeros elsewhere, while
// exp(x - max) / sum, as kiln's portable kernel, ONNX Runtime and PyTorch compute it, is NaN in
// every element of that lane: its max is NaN or +inf, and inf - inf is NaN. So is a lane of -inf
// only (-inf - -inf). This step runs after the primitive over its plain input `in` ([outer, n,
// inner], normalized along n) and output `out` (distinct buffers): one vectorized scan of `in`
// tells whether it holds a NaN, +inf or -inf, which costs a read of the input; only when it does
// are the lanes looked at (with -inf alone, each only up to its first value above -inf) and those
// poisoned filled with NaN.
class SoftmaxNanStep : public Step {
 public:
  SoftmaxNanStep(std::string label, BufferRef in, BufferRef out, int64_t outer, int64_t n,
                 int64_t inner)
      : label_(std::move(label)), in_(in), out_(out), outer_(outer), n_(n), inner_(inner) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  BufferRef in_, out_;
  int64_t outer_, n_, inner_;
};

// Which non-finite values `count` floats hold (vectorized, parallel in one piece a thread).
struct NonFinite {
  bool nan_or_pos_inf = false;
  bool neg_inf = false;
};
NonFinite scan_non_finite(const float* x, int64_t count);

}  // namespace kiln::hal::cpu
