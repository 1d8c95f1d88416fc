#include "kiln/hal/cpu/winograd_conv_op.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "kiln/hal/cpu/activation_step.h"
#include "kiln/hal/cpu/finite_guard.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/hal/cpu/winograd_conv.h"

namespace kiln::hal::cpu {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

winograd::Conv3x3 one_sample(const OpReader& op, const kernels::ConcreteWindow& window) {
  const ConcreteShape& x = op.input(0).shape;
  const ConcreteShape& y = op.output(0).shape;
  winograd::Conv3x3 s;
  s.channels = x[1];
  s.out_channels = y[1];
  s.in_h = x[2];
  s.in_w = x[3];
  s.out_h = y[2];
  s.out_w = y[3];
  s.pad_top = window.pads_begin[0];
  s.pad_left = window.pads_begin[1];
  return s;
}

// The layout of an activation of dims `shape` that `s` (blocked or channels last) describes on
// `isa`: nChw8c (AVX2) or nChw16c (AVX-512) blocks, or NHWC.
dnnl_desc layout(const ConcreteShape& shape, const winograd::Conv3x3& s, Isa isa) {
  const tag blocked = isa == Isa::kAvx512 ? tag::nChw16c : tag::nChw8c;
  return dnnl_desc(to_dnnl_dims(shape), dt::f32, s.channels_last ? tag::nhwc : blocked);
}

// Whether `a` runs as kiln's ActivationStep after the Winograd step rather than in its epilogue
// (winograd_transforms.h has no SiLU or Mish): the step writes the pre-activation values and the
// activation follows over the whole output, as after oneDNN's direct conv, with the same bits; a
// residual added after the activation then follows it as a step of its own (add_sum_into).
bool activation_after_step(const kernels::FusedActivation& a) {
  return a.kind == kernels::FusedActivation::Kind::kSilu ||
         a.kind == kernels::FusedActivation::Kind::kMish;
}

// The largest input magnitude F(4x4)'s transforms and products take without overflow: the bound
// of finite_guard.h's conv_input_bound (2^120 / max over output channels of sum |w|) over 2^16.
// (B^T d B is at most 100 times max |d|, each transformed weight at most the sum of its 3x3 taps'
// |w|, and A^T M A at most 361 times max |M|: 36100 < 2^16.) nullopt where a weight is not
// finite.
std::optional<float> f4x4_input_bound(const Tensor& weights) {
  const std::optional<float> bound = conv_input_bound(weights, nullptr);
  if (!bound) return std::nullopt;
  return std::ldexp(*bound, -16);
}

// Runs the kernel over the whole batch. With F(4x4) it first checks that every input value is
// finite and within f4x4_input_bound: F(4x4)'s transforms mix a patch's values, so a NaN or an
// infinity would reach outputs whose window does not hold it (and a huge value could overflow
// where the direct sum does not). When some value is not, each sample runs alone: by F(4x4)
// where its own values pass, by F(2x2) (whose additions keep a NaN within the outputs that read
// it) where not. Each image's bits do not depend on the batch (winograd_conv.h), so a NaN in one
// sample leaves every other sample's bits as they are.
class WinogradConvStep : public Step {
 public:
  struct Buffers {
    BufferRef src, weights, fallback_weights, bias, dst, workspace;
  };
  WinogradConvStep(std::string label, winograd::Conv3x3 shape, std::optional<float> input_bound,
                   int64_t batch, Isa isa, int threads, Buffers buffers, bool has_bias,
                   bool accumulate, bool accumulate_after_activation,
                   kernels::FusedActivation activation)
      : label_(std::move(label)),
        shape_(shape),
        input_bound_(input_bound),
        batch_(batch),
        isa_(isa),
        threads_(threads),
        buffers_(buffers),
        has_bias_(has_bias),
        accumulate_(accumulate),
        accumulate_after_activation_(accumulate_after_activation),
        activation_(activation) {}

  Status run(const ExecContext& ctx) override {
    const auto* src = reinterpret_cast<const float*>(ctx.resolve(buffers_.src));
    const auto* weights = reinterpret_cast<const float*>(ctx.resolve(buffers_.weights));
    auto* dst = reinterpret_cast<float*>(ctx.resolve(buffers_.dst));
    std::byte* workspace = ctx.resolve(buffers_.workspace);
    winograd::Epilogue epilogue;
    epilogue.bias =
        has_bias_ ? reinterpret_cast<const float*>(ctx.resolve(buffers_.bias)) : nullptr;
    epilogue.accumulate = accumulate_;
    epilogue.accumulate_after_activation = accumulate_after_activation_;
    epilogue.activation = activation_;
    const int64_t image = shape_.channels * shape_.in_h * shape_.in_w;
    if (!input_bound_ || all_within(src, batch_ * image, *input_bound_)) {
      winograd::run(shape_, batch_, src, weights, epilogue, dst, workspace, isa_, threads_);
      return ok_status();
    }
    const auto* fallback_weights =
        reinterpret_cast<const float*>(ctx.resolve(buffers_.fallback_weights));
    winograd::Conv3x3 fallback = shape_;
    fallback.tile = 2;
    const int64_t out_image = shape_.out_channels * shape_.out_h * shape_.out_w;
    for (int64_t n = 0; n < batch_; ++n) {
      const float* x = src + n * image;
      const bool passes = all_within(x, image, *input_bound_);
      winograd::run(passes ? shape_ : fallback, 1, x, passes ? weights : fallback_weights, epilogue,
                    dst + n * out_image, workspace, isa_, threads_);
    }
    return ok_status();
  }
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  winograd::Conv3x3 shape_;
  std::optional<float> input_bound_;  // F(4x4)'s (f4x4_input_bound); nullopt for F(2x2)
  int64_t batch_;
  Isa isa_;
  int threads_;  // the dispatch's team size (thread_policy.h), which sized the workspace
  Buffers buffers_;
  bool has_bias_, accumulate_, accumulate_after_activation_;
  kernels::FusedActivation activation_;
};

// The packed layout of `shape`'s transformed weights, [planes][M/16][C][16].
dnnl_desc transformed_layout(const winograd::Conv3x3& shape) {
  return dnnl_desc({winograd::plane_count(shape.tile), shape.out_channels / 16, shape.channels, 16},
                   dt::f32, tag::abcd);
}

// Value `v` (OIHW weights of `w` dims) transformed for `shape`'s tile edge, once per plan.
StatusOr<BufferRef> transformed_weights(ProgramBuilder& b, int32_t v, const ConcreteShape& w,
                                        const winograd::Conv3x3& shape) {
  return b.constant_transformed(
      v, plain_desc(w), transformed_layout(shape), [shape](const std::byte* oihw, std::byte* u) {
        winograd::transform_weights(shape, reinterpret_cast<const float*>(oihw),
                                    reinterpret_cast<float*>(u));
      });
}

}  // namespace

std::optional<winograd::Conv3x3> winograd_shape(
    const ProgramBuilder& b, const ConvParams& p,
    const dnnl::convolution_forward::primitive_desc& direct) {
  const OpReader& op = b.op();
  const kernels::ConcreteWindow& w = p.window;
  const std::vector<int64_t> ones{1, 1};
  if (w.kernel != std::vector<int64_t>{3, 3} || w.strides != ones || w.dilations != ones ||
      p.group != 1 || w.pads_end.size() != 2 || w.pads_end[0] > 2 || w.pads_end[1] > 2) {
    return std::nullopt;
  }
  const Isa isa = best_isa();
  if (b.constant(op.input_index(1)) == nullptr || !cpu_has(isa)) return std::nullopt;
  // oneDNN's direct kernel of that ISA: AVX2's jit kernel, AVX-512's jit or brgconv kernel.
  const std::string impl = impl_name(direct);
  if (isa == Isa::kAvx512 ? impl != "jit:avx512_core" && impl != "brgconv:avx512_core"
                          : impl != "jit:avx2") {
    return std::nullopt;
  }
  winograd::Conv3x3 s = one_sample(op, w);
  s.tile = winograd::preferred_tile(s);
  if (winograd::unsupported_reason(s, isa) != nullptr) return std::nullopt;
  ConcreteShape x_one = op.input(0).shape, y_one = op.output(0).shape;
  x_one[0] = y_one[0] = 1;
  for (bool channels_last : {false, true}) {
    s.channels_last = channels_last;
    if (direct.src_desc() == layout(x_one, s, isa) && direct.dst_desc() == layout(y_one, s, isa)) {
      return s;
    }
  }
  return std::nullopt;
}

bool winograd_layout_in(std::string_view steps) {
  const Isa isa = best_isa();
  if (!cpu_has(isa)) return false;
  const ConcreteShape shape{1, 16, 1, 1};
  for (bool channels_last : {false, true}) {
    winograd::Conv3x3 s;
    s.channels_last = channels_last;
    const std::string name = describe(layout(shape, s, isa));
    if (steps.find(name.substr(0, name.find(' '))) != std::string_view::npos) return true;
  }
  return false;
}

Status build_winograd_conv(ProgramBuilder& b, const ConvParams& p,
                           const winograd::Conv3x3& preferred) {
  const OpReader& op = b.op();
  const ConcreteShape& x = op.input(0).shape;
  const ConcreteShape& w = op.input(1).shape;
  const ConcreteShape& y = op.output(0).shape;
  const Isa isa = best_isa();
  winograd::Conv3x3 shape = preferred;
  winograd::Conv3x3 fallback = shape;
  fallback.tile = 2;
  std::optional<float> input_bound;
  if (shape.tile == 4) {
    input_bound = f4x4_input_bound(*b.constant(op.input_index(1)));
    if (!input_bound) shape = fallback;
  }
  const dnnl_desc src_layout = layout(x, shape, isa), dst_layout = layout(y, shape, isa);

  WinogradConvStep::Buffers buffers;
  KILN_ASSIGN_OR_RETURN(buffers.src, b.input_as(op.input_index(0), src_layout));
  KILN_ASSIGN_OR_RETURN(buffers.weights, transformed_weights(b, op.input_index(1), w, shape));
  if (input_bound) {
    KILN_ASSIGN_OR_RETURN(buffers.fallback_weights,
                          transformed_weights(b, op.input_index(1), w, fallback));
  }
  if (p.has_bias) {
    KILN_ASSIGN_OR_RETURN(buffers.bias,
                          b.input_as(op.input_index(2), plain_desc(op.input(2).shape)));
  }
  KILN_ASSIGN_OR_RETURN(ConvDestination dst, conv_destination(b, p, dst_layout));
  const bool after = activation_after_step(p.activation);
  // With a residual after the activation, the destination holds the residual: the step writes
  // into a temporary, activated there and then added to it (a YOLO bottleneck's x + SiLU(conv)).
  const bool sum_after = after && p.residual_after_activation;
  buffers.dst = sum_after ? b.temp(dst_layout.get_size()) : dst.buffer;
  const int threads = omp_get_max_threads();  // the dispatch's team size while it is built
  size_t workspace = winograd::workspace_bytes(shape, x[0], isa, threads);
  if (input_bound) {  // one sample at a time by either tile edge
    workspace = std::max({workspace, winograd::workspace_bytes(shape, 1, isa, threads),
                          winograd::workspace_bytes(fallback, 1, isa, threads)});
  }
  buffers.workspace = b.temp(workspace);
  std::string what =
      fmt::format("conv winograd_{0}x{0}_3x3:{1} {2} -> {3}{4}{5}", shape.tile, isa_name(isa),
                  describe(src_layout), describe(dst_layout), dst.suffix,
                  input_bound ? " (a sample with a value not finite or beyond "
                                "the bound: winograd_2x2_3x3)"
                              : "");
  b.add(std::make_unique<WinogradConvStep>(b.label(what), shape, input_bound, x[0], isa, threads,
                                           buffers, p.has_bias, p.has_residual && !sum_after,
                                           p.residual_after_activation && !sum_after,
                                           after ? kernels::FusedActivation{} : p.activation));
  if (after) add_activation(b, buffers.dst, dst_layout, p.activation);
  if (sum_after) add_sum_into(b, buffers.dst, dst.buffer, dst_layout);
  return ok_status();
}

}  // namespace kiln::hal::cpu
