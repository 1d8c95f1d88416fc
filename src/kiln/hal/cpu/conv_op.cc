// Conv on oneDNN convolution_forward (direct algorithm), with format_tag::any so oneDNN picks
// blocked layouts, or, for f32 3x3 stride-1 convs where oneDNN would run its AVX2 kernel, kiln's
// Winograd kernel (winograd_conv_op.h), or, for f32 1x1 convs on single pixels or on small
// channels-last images (pointwise_channels_last), kiln's gemm (build_conv_as_product).
//
// f16 and bf16 convs compute in their own type where oneDNN has a kernel for it on this CPU
// (bf16 on AVX-512 with bf16 instructions; f16 on AVX-512 FP16, which oneDNN 2.6 has no conv
// for), else in f32: X and W are converted on the way in (W once, with the reordered weights).
// Either way the destination is f32 (oneDNN's low-precision kernels accumulate in f32), and the
// result is rounded to f16/bf16 once, after bias, residual and activation (conv_common.h), as
// ONNX Runtime's f32-computing f16 conv rounds it. The choice depends on the dtype and the
// machine only. Bias and kiln's residual (a sum post-op over the destination pre-filled with the
// residual) are fused; the activation (relu, clip, leaky relu, SiLU or Mish) runs as kiln's
// ActivationStep right after, in place: oneDNN's eltwise post-op maps a NaN to the lower bound
// (activation_step.h), and its swish post-op cost more than kiln's SiLU pass
// (vector_map_kernels.h). An f32 conv's relu, clip or leaky relu runs as the post-op instead on
// every run whose input rules out a NaN (finite_guard.h: a GuardedStep with both paths). When
// nothing reads the residual afterwards and it is stored in the destination's layout, the
// destination offers to take over its bytes, and the pre-fill copy then does nothing.
#include <fmt/format.h>

#include <optional>

#include "kiln/hal/cpu/activation_step.h"
#include "kiln/hal/cpu/conv_batch_probe.h"
#include "kiln/hal/cpu/conv_common.h"
#include "kiln/hal/cpu/conv_guard.h"
#include "kiln/hal/cpu/finite_guard.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/hal/cpu/winograd_conv_op.h"

namespace kiln::hal::cpu {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// What this fast path runs: f32, f16 or bf16 throughout and 1 to 3 spatial dims. Conv's
// definition has checked the rest (select_path).
StatusOr<ConvParams> read_conv(const OpReader& op) {
  const DType dtype = op.input(0).dtype;
  const std::optional<dt> data = stored_data_type(dtype);
  if (!data) {
    return unimplemented("input 0 '{}' must be f32, f16 or bf16, got {}", op.input(0).name,
                         dtype_name(dtype));
  }
  for (size_t i = 1; i < 4; ++i) {
    if (op.has_input(i)) KILN_RETURN_IF_ERROR(op.expect_input_dtype(i, dtype));
  }
  KILN_RETURN_IF_ERROR(op.expect_output_dtype(0, dtype));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(0, 3, 5));
  ConvParams p;
  p.data = *data;
  KILN_ASSIGN_OR_RETURN(
      static_cast<kernels::ConvAttributes&>(p),
      kernels::read_conv_attributes(op.attributes(), op.input(0).shape, op.input(1).shape));
  p.has_bias = op.has_input(2);
  p.has_residual = op.has_input(3);
  if (p.residual_after_activation && p.data != dt::f32) {
    // passes::fuse_conv adds it after the activation in f32 only.
    return unimplemented("a residual added after the activation needs f32, got {}",
                         dtype_name(dtype));
  }
  return p;
}

dnnl_dims with_dim0(dnnl_dims dims, int64_t n) {
  dims[0] = n;
  return dims;
}

// Whether the conv is 1x1 with a stride above 1 and no padding, in f32: it reads only every
// stride-th pixel, which kiln copies out first (one reorder from a strided view of the stored
// input) so that oneDNN's stride-1 kernel runs on them. oneDNN's strided 1x1 kernel ran ResNet-50
// v1's stage-3 projection (512 -> 1024, 28x28 -> 14x14) at batch 1 at ~245 GFLOP/s, its stride-1
// kernel on the copied pixels at ~350-380, and the copy is a few microseconds. The choice depends
// on the conv only, never the batch (invariant: the same kernel for every sample at any batch).
bool subsamples(const ConvParams& p, const ConcreteShape& w) {
  if (p.data != dnnl::memory::data_type::f32) return false;
  bool strided = false;
  for (size_t i = 0; i < p.window.strides.size(); ++i) {
    if (w[2 + i] != 1 || p.window.pads_begin[i] != 0 || p.window.pads_end[i] != 0) return false;
    strided = strided || p.window.strides[i] > 1;
  }
  return strided;
}

// The pixels a subsampling conv reads, as a view of its input stored in `stored` (a blocked-kind
// layout without offset: plain, channels-last or nChw16c): dims `dims`, each spatial stride times
// the conv's.
dnnl_desc subsampled_view(const dnnl_desc& stored, const dnnl_dims& dims,
                          const std::vector<int64_t>& strides) {
  dnnl_desc view = stored;
  dnnl_memory_desc_t& md = view.data;
  for (size_t i = 0; i < strides.size(); ++i) {
    md.dims[2 + i] = md.padded_dims[2 + i] = dims[2 + i];
    md.format_desc.blocking.strides[2 + i] *= strides[i];
  }
  return view;
}

// Appends the reorder that copies the pixels a subsampling conv reads from its input value
// `input` (stored in `stored`) into a new temporary of `layout`, which it returns.
BufferRef copy_subsampled_pixels(ProgramBuilder& b, int32_t input, const dnnl_desc& stored,
                                 const dnnl_desc& layout, const std::vector<int64_t>& strides) {
  const BufferRef pixels = b.temp(layout.get_size());
  b.add_reorder(BufferRef::of_value(input), subsampled_view(stored, layout.dims(), strides), pixels,
                layout);
  return pixels;
}

// Whether the conv may run as kiln's gemm over its pixels (build_conv_as_product, channels last):
// f32, group 1, 1x1 kernels, no padding, stride 1 or `subsample` (the pixels it reads copied out
// first, subsamples above), in two spatial dims of at most kMaxTeamInvariantPixels output pixels
// (build_conv takes it up to kMaxPointwisePixels, or past that where brgconv's bits depend on the
// team), no activation or relu (which the product's epilogue applies; oneDNN fuses the others where
// kiln's gemm would need a pass of its own), where oneDNN's one-sample primitive `one` keeps source
// and destination channels last, so that the product reads and writes the layout the neighbours
// use. The choice depends on the per-sample shapes and the machine only.
//
// Measured on Zen 5 (AVX-512, 2 threads), ResNet-50 v1 in the model against oneDNN's
// brgconv_1x1: its 7x7 stage's 1x1 convs (49 pixels, 512 <-> 2048 channels) 8-11% faster at batch
// 1 and 10-12% at batch 8, the whole model 2-4% faster at batch 8 (151-153 against 154-159 ms)
// and the same at batch 1; but the 14x14 stage's 5-13% slower, the 28x28 and 56x56 stages' 12-27%
// slower, and with a residual twice as slow there (kiln's gemm reads the residual from its own
// buffer, where oneDNN adds into the destination that holds it).
//
// The strided ones on copied pixels too (ResNet-50 v1's stage-4 entry, 1024 -> 512 and
// 1024 -> 2048 from 14x14 onto 7x7: 0.22 -> 0.21 and 0.74 -> 0.68 ms at batch 1).
constexpr int64_t kMaxPointwisePixels = 64;

// Up to this many pixels, a conv without a residual also runs as kiln's gemm where brgconv's
// one-sample bits depend on the team size (bits_depend_on_team in build_conv): a one-thread plan
// would otherwise keep that dispatch's full-team steps (conv_gives_full_team_bits) and wait for
// the busy machine's second thread on every run, where kiln's gemm gives the same bits at any
// team size. ResNet-50 v1's stage-3 entry (512 -> 256, 28x28 -> 14x14, stride 2) is one: on
// kiln's gemm 0.204 -> 0.214-0.222 ms at batch 1 on 2 threads (Zen 5), and a one-thread plan of
// the model then opens no parallel region of 2 threads.
constexpr int64_t kMaxTeamInvariantPixels = 196;

bool pointwise_channels_last(const OpReader& op, const ConvParams& p, bool subsample,
                             const dnnl::convolution_forward::primitive_desc& one) {
  const ConcreteShape& y = op.output(0).shape;
  using Kind = kernels::FusedActivation::Kind;
  const bool unit_strides =
      p.window.strides.size() == 2 && p.window.strides[0] == 1 && p.window.strides[1] == 1;
  if (y.size() != 4 || op.input(1).dtype != DType::kF32 || p.residual_after_activation ||
      (p.activation.kind != Kind::kNone && p.activation.kind != Kind::kRelu) ||
      !unpadded_pointwise(op, p) || !(unit_strides || subsample) ||
      y[2] * y[3] > kMaxTeamInvariantPixels) {
    return false;
  }
  // The one-sample primitive reads the pixels the conv reads: the input's, or the subsampled ones.
  ConcreteShape read = op.input(0).shape;
  read[2] = y[2];
  read[3] = y[3];
  auto nhwc_one = [](const ConcreteShape& shape) {
    return dnnl_desc(with_dim0(to_dnnl_dims(shape), 1), dt::f32, tag::nhwc);
  };
  return one.src_desc() == nhwc_one(read) && one.dst_desc() == nhwc_one(y);
}

}  // namespace

Status check_conv(const OpReader& op) { return read_conv(op).status(); }

Status build_conv(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(ConvParams p, read_conv(op));
  // kiln's gemm adds a residual before its activation only.
  if (!p.residual_after_activation && conv_runs_as_product(op, p)) {
    return build_conv_as_product(b, p.activation);
  }
  const ConcreteShape& x = op.input(0).shape;
  const ConcreteShape& w = op.input(1).shape;
  const ConcreteShape& y = op.output(0).shape;
  const size_t r = x.size() - 2;
  const int64_t batch = x[0];

  dnnl_dims src_dims = to_dnnl_dims(x), dst_dims = to_dnnl_dims(y), wei_dims;
  if (p.group > 1) {
    wei_dims = {p.group, w[0] / p.group, w[1]};
    wei_dims.insert(wei_dims.end(), w.begin() + 2, w.end());
  } else {
    wei_dims = to_dnnl_dims(w);
  }
  // A subsampling conv reads its copied pixels with stride 1 (subsamples above).
  const dnnl_desc& stored = b.layout(op.input_index(0));
  const bool subsample =
      subsamples(p, w) && stored.data.format_kind == dnnl_blocked && stored.data.offset0 == 0;
  if (subsample) {
    for (size_t i = 0; i < r; ++i) src_dims[2 + i] = dst_dims[2 + i];
  }
  dnnl_dims strides(p.window.strides.begin(), p.window.strides.end());
  if (subsample) std::fill(strides.begin(), strides.end(), 1);
  dnnl_dims dilates(r), pad_l(p.window.pads_begin.begin(), p.window.pads_begin.end()),
      pad_r(p.window.pads_end.begin(), p.window.pads_end.end());
  for (size_t i = 0; i < r; ++i) dilates[i] = p.window.dilations[i] - 1;
  const dnnl_desc bias_desc = p.has_bias ? dnnl_desc({w[0]}, dt::f32, tag::a) : dnnl_desc();

  // The residual: a sum post-op into the destination, which holds it (conv_common.h); after the
  // activation, only a fused primitive may sum (below), and the plain one's output is activated
  // and added to it by kiln's steps. Each list is built anew (a copy of a dnnl::post_ops shares
  // its handle).
  auto attr_with = [&](bool activation, bool sum_after) {
    dnnl::post_ops ops;
    if (p.residual_before_activation()) ops.append_sum(1.0f);
    if (activation) append_activation_post_op(ops, p.activation);
    if (sum_after) ops.append_sum(1.0f);
    dnnl::primitive_attr with = b.attr();
    with.set_post_ops(ops);
    return with;
  };
  const dnnl::primitive_attr attr = attr_with(false, false);

  // X and W in `compute`, B and Y in f32.
  dt compute = dt::f32;
  auto make_pd_with = [&](int64_t n, const dnnl::primitive_attr& with) {
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        dnnl_desc(with_dim0(src_dims, n), compute, tag::any),
        dnnl_desc(wei_dims, compute, tag::any), bias_desc,
        dnnl_desc(with_dim0(dst_dims, n), dt::f32, tag::any), strides, dilates, pad_l, pad_r);
    return dnnl::convolution_forward::primitive_desc(desc, with, b.engine());
  };
  auto make_pd = [&](int64_t n) { return make_pd_with(n, attr); };
  if (p.data != dt::f32) {
    compute = p.data;
    try {
      if (is_reference_impl(impl_name(make_pd(1)))) compute = dt::f32;
    } catch (const dnnl::error&) {
      compute = dt::f32;  // no kernel for this data type here
    }
  }

  // Batch invariance: the whole batch runs in one call only when that kernel reduces in the same
  // order as the one-sample kernel; otherwise the one-sample primitive runs per sample.
  dnnl::convolution_forward::primitive_desc pd = make_pd(1);
  if (r == 2 && p.data == dt::f32) {
    if (auto shape = winograd_shape(b, p, pd)) return build_winograd_conv(b, p, *shape);
  }
  // brgconv's one-sample primitive made under one thread sums in another order than made under
  // the full team (the one-thread plan's probe below, on one sample, so that both plans choose
  // alike at any batch).
  auto bits_depend_on_team = [&] {
    if (b.full_team() <= 1) return false;
    const CallerThreads restore;
    use_threads(b.full_team());
    const auto full = make_pd(1);
    use_threads(1);
    const auto one = make_pd(1);
    return impl_name(one) != impl_name(full) ||
           !conv_gives_full_team_bits(b.engine(), one, full, b.full_team(), p.has_bias);
  };
  // Past kMaxPointwisePixels only without a residual (which kiln's gemm reads from its own buffer).
  if (pointwise_channels_last(op, p, subsample, pd) &&
      (y[2] * y[3] <= kMaxPointwisePixels || (!p.has_residual && bits_depend_on_team()))) {
    if (!subsample) return build_conv_as_product(b, p.activation, /*channels_last=*/true);
    const BufferRef pixels = copy_subsampled_pixels(
        b, op.input_index(0), stored, dnnl_desc(with_dim0(src_dims, batch), dt::f32, tag::nhwc),
        p.window.strides);
    return build_conv_as_product(b, p.activation, /*channels_last=*/true, &pixels);
  }
  int64_t repeat = 1;
  dnnl_desc src_layout = pd.src_desc(), dst_layout = pd.dst_desc();
  size_t src_stride = 0, dst_stride = 0;
  if (batch > 1) {
    dnnl::convolution_forward::primitive_desc batched = make_pd(batch);
    const std::string impl = impl_name(batched);
    auto src_one = sample_stride_bytes(pd.src_desc());
    auto dst_one = sample_stride_bytes(pd.dst_desc());
    // brgconv's blocking may span images (conv_batch_probe.h): the batched primitive serves when
    // running both once shows every sample gets the one-sample bits. Layouts without a sample
    // stride cannot run per sample: the batched primitive serves, unprobed.
    const bool batched_serves =
        !src_one || !dst_one ||
        (impl == impl_name(pd) &&
         (!conv_reduction_may_depend_on_batch(impl) ||
          (conv_blocking_may_span_images(impl) &&
           batched_conv_matches_per_sample(b.engine(), pd, batched, batch, p.has_bias))));
    if (batched_serves) {
      pd = batched;
      src_layout = pd.src_desc();
      dst_layout = pd.dst_desc();
    } else {
      repeat = batch;
      src_stride = *src_one;
      dst_stride = *dst_one;
      KILN_ASSIGN_OR_RETURN(src_layout, with_batch(pd.src_desc(), batch));
      KILN_ASSIGN_OR_RETURN(dst_layout, with_batch(pd.dst_desc(), batch));
    }
  }

  BufferRef src;
  if (subsample) {
    src = copy_subsampled_pixels(b, op.input_index(0), stored, src_layout, p.window.strides);
  } else {
    KILN_ASSIGN_OR_RETURN(src, b.input_as(op.input_index(0), src_layout));
  }
  KILN_ASSIGN_OR_RETURN(BufferRef wei, b.input_as(op.input_index(1), pd.weights_desc()));
  BufferRef bias;
  if (p.has_bias) {
    KILN_ASSIGN_OR_RETURN(bias, b.input_as(op.input_index(2), bias_desc));
  }
  // The activation inside the primitive where the input allows (finite_guard.h).
  // A residual after the activation joins the post-ops as a sum after it where the kernel takes
  // that order (brgconv; not AVX2's jit kernels); else the fused primitive writes the activated
  // values to the temporary, and kiln's sum step adds them, as on the plain path.
  auto fused_candidate =
      [&](bool sum_after) -> std::optional<dnnl::convolution_forward::primitive_desc> {
    const auto candidate = make_pd_with(pd.src_desc().dims()[0], attr_with(true, sum_after));
    if (impl_name(candidate) != impl_name(pd) ||
        !fused_activation_matches(b.engine(), pd, candidate, p.has_bias, p.activation, sum_after)) {
      return std::nullopt;
    }
    return candidate;
  };
  std::optional<dnnl::convolution_forward::primitive_desc> fused;
  bool fused_sums_after = false;
  const std::optional<InputGuard> guard = input_guard(b, p, src_layout, dst_layout);
  if (guard) {
    fused_sums_after = p.residual_after_activation;
    fused = fused_candidate(fused_sums_after);
    if (!fused && fused_sums_after) {
      fused_sums_after = false;
      fused = fused_candidate(false);
    }
  }

  KILN_ASSIGN_OR_RETURN(ConvDestination dst, conv_destination(b, p, dst_layout));
  const size_t first_step = b.step_count();
  auto bind = [&](PrimitiveStep& step, const dnnl::convolution_forward::primitive_desc& with,
                  const BufferRef& into) {
    step.bind(DNNL_ARG_SRC, with.src_desc(), src, src_stride);
    step.bind(DNNL_ARG_WEIGHTS, with.weights_desc(), wei);
    if (p.has_bias) step.bind(DNNL_ARG_BIAS, bias_desc, bias);
    step.bind(DNNL_ARG_DST, with.dst_desc(), into, dst_stride);
  };
  // The plain primitive's output: the destination, or where the residual comes after the
  // activation, a temporary that kiln's steps activate and add to the destination.
  const BufferRef plain_out =
      p.residual_after_activation ? b.temp(dst_layout.get_size()) : dst.buffer;
  std::string what =
      fmt::format("conv {} {} -> {}{}{}", impl_name(pd), describe(src_layout), describe(dst_layout),
                  dst.suffix, repeat > 1 ? fmt::format(" per sample x{}", repeat) : "");
  PrimitiveStep& step = b.add_primitive(b.label(what), pd, dnnl::convolution_forward(pd), repeat);
  // In a one-thread plan: the full plan's primitive, made under its team size, must give these
  // bits (brgconv blocks its work by the team size), or the dispatch keeps its full-team steps.
  if (b.team() < b.full_team()) {
    const CallerThreads restore;
    use_threads(b.full_team());
    const auto full = repeat > 1 ? make_pd(1) : make_pd(batch);
    use_threads(b.team());
    if (impl_name(full) != impl_name(pd) ||
        !conv_gives_full_team_bits(b.engine(), pd, full, b.full_team(), p.has_bias)) {
      step.mark_team_dependent();
    }
  }
  bind(step, pd, plain_out);
  if (p.residual_after_activation) {
    add_activation(b, plain_out, dst_layout, p.activation);
    add_sum_into(b, plain_out, dst.buffer, dst_layout);
  } else {
    KILN_RETURN_IF_ERROR(finish_conv(b, p, dst, dst_layout));
  }
  if (!fused) return ok_status();

  // The plain primitive and kiln's pass become the fallback of a GuardedStep.
  const bool team_dependent = !step.same_bits_at_any_team_size();
  std::vector<std::unique_ptr<Step>> fallback = b.take_steps(first_step);
  PrimitiveStep& fused_step = b.add_primitive(b.label(what + " fused while finite"), *fused,
                                              dnnl::convolution_forward(*fused), repeat);
  if (team_dependent) fused_step.mark_team_dependent();
  const bool sum_step = p.residual_after_activation && !fused_sums_after;
  bind(fused_step, *fused, sum_step ? plain_out : dst.buffer);
  if (sum_step) add_sum_into(b, plain_out, dst.buffer, dst_layout);
  std::vector<FiniteBound> checks{
      {src, src_layout.get_size() / sizeof(float), guard->bound, guard->vouched_by}};
  if (p.residual_before_activation()) {
    // The destination holds the residual when the step runs (conv_common.h).
    checks.push_back({dst.buffer, dst_layout.get_size() / sizeof(float), kResidualBound});
  }
  const int32_t out = op.output_index(0);
  // A residual after the activation leaves the output unbounded.
  const std::optional<float> keeps =
      p.residual_after_activation ? std::nullopt : output_bound(p.activation);
  if (keeps) b.vouch(out, *keeps);
  b.add(std::make_unique<GuardedStep>(
      std::move(checks), b.take_steps(first_step), std::move(fallback),
      fmt::format("the plain conv and kiln's {}{}", kernels::describe(p.activation),
                  p.residual_after_activation ? ", then the residual's sum" : ""),
      keeps ? out : -1));
  return ok_status();
}

}  // namespace kiln::hal::cpu
