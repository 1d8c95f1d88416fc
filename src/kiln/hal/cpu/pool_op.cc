// MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool on oneDNN pooling_v2 (dilations),
// reading the input in whatever layout its producer chose and writing the same kind of layout;
// an f32 GlobalAveragePool on kiln's GlobalAverageStep instead (global_average_step.h), written
// plain, as is an f32 ReduceMean over the spatial dims of [N, C, ...] or of a channels-last
// [N, ..., C] (the portable kernel summed those a scalar double at a time: 55 us for a tf2onnx
// squeeze-and-excitation's mean over 28x28x256 at batch 1, 13 us on this kernel).
// ceil_mode becomes extra end padding: oneDNN ignores padding for max and, with
// avg_exclude_padding, for the average's divisor. oneDNN's max skips a NaN in the window; a second
// pooling by average marks those windows and MaxPoolNanStep makes their max NaN, as PyTorch and
// kiln's portable kernel give, reading the taps of a window whose max is +inf (activation_step.h).
// An f32 MaxPool over two spatial dims stored channels last (after a conv) runs kiln's one-pass
// kernel instead (max_pool_step.h), NaN windows included. Elsewhere, an f32 max needs those two
// passes only where the input holds a NaN: a GuardedStep
// (finite_guard.h) runs the max alone when every input value is finite, which the producer's vouch
// (a guarded conv's relu or clip, or another such max) tells without a read, else one vectorized
// read; the max alone gives the bits of the three steps on such an input, being their first.
// f16 and bf16 pool in f32 (oneDNN 2.6 has no f16 pooling, and kiln's NaN step reads f32): the
// input is converted into an f32 temporary in its own layout and the result converted back; max
// and average then round once, as the portable kernel does.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "kiln/hal/cpu/activation_step.h"
#include "kiln/hal/cpu/finite_guard.h"
#include "kiln/hal/cpu/global_average_step.h"
#include "kiln/hal/cpu/max_pool_step.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::cpu {
namespace {

struct PoolParams {
  kernels::ConcreteWindow window;  // pads_end already extended for ceil_mode
  dnnl::algorithm algorithm = dnnl::algorithm::pooling_max;
  dnnl::memory::data_type data = dnnl::memory::data_type::f32;  // X and Y as stored
};

// What this fast path runs: f32, f16 or bf16, 1 to 3 spatial dims, no Indices output, and windows
// whose pads stay inside the window (oneDNN's limits). The op's definition has checked the rest
// (select_path).
StatusOr<PoolParams> read_pool(const OpReader& op) {
  if (op.output_count() > 1) return unimplemented("output 1 (Indices) is not supported");
  const DType dtype = op.input(0).dtype;
  const std::optional<dnnl::memory::data_type> data = stored_data_type(dtype);
  if (!data) {
    return unimplemented("input 0 '{}' must be f32, f16 or bf16, got {}", op.input(0).name,
                         dtype_name(dtype));
  }
  KILN_RETURN_IF_ERROR(op.expect_output_dtype(0, dtype));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(0, 3, 5));
  const ConcreteShape& x = op.input(0).shape;
  const ConcreteShape& y = op.output(0).shape;
  KILN_ASSIGN_OR_RETURN(kernels::PoolAttributes a,
                        kernels::read_pool_attributes(op.dispatch().op_type, op.attributes(), x));
  PoolParams p{std::move(a.window), dnnl::algorithm::pooling_max, *data};
  kernels::ConcreteWindow& w = p.window;
  for (size_t i = 0; i < w.spatial_rank(); ++i) {
    const int64_t extent = w.effective_kernel(i);
    // ceil_mode becomes extra end padding, as far as the last window reaches.
    const int64_t needed = (y[2 + i] - 1) * w.strides[i] + extent - x[2 + i] - w.pads_begin[i];
    if (needed > w.pads_end[i]) {
      // The reference divides by the taps inside the padded input; oneDNN would count the
      // overhang too.
      if (a.count_include_pad) {
        return unimplemented(
            "ceil_mode windows that overhang the end padding with count_include_pad=1 are not "
            "supported");
      }
      w.pads_end[i] = needed;
    }
    if (w.pads_begin[i] >= extent || w.pads_end[i] >= extent) {
      return unimplemented("pads of {}/{} on spatial dim {} reach past the window ({})",
                           w.pads_begin[i], w.pads_end[i], i, extent);
    }
  }
  if (!a.max) {
    p.algorithm = a.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                      : dnnl::algorithm::pooling_avg_exclude_padding;
  }
  return p;
}

// Which spatial dims an f32 ReduceMean averages, as a GlobalAveragePool does: dims [2, rank)
// of [N, C, ...] (PyTorch's x.mean((2, 3))), or dims [1, rank - 1) of a channels-last
// [N, ..., C] (the mean over H and W of a tf2onnx squeeze-and-excitation block or a Keras
// global pooling). Other axes, computed axes and empty tensors are left to the portable kernel.
enum class SpatialMean : uint8_t { kChannelsSecond, kChannelsLast };

StatusOr<SpatialMean> read_spatial_mean(const OpReader& op) {
  if (op.input(0).dtype != DType::kF32) {
    return unimplemented("{} data runs on the portable path", dtype_name(op.input(0).dtype));
  }
  const ConcreteShape& dims = op.input(0).shape;
  const auto rank = static_cast<int64_t>(dims.size());
  if (rank < 3 || std::find(dims.begin(), dims.end(), 0) != dims.end()) {
    return unimplemented("ReduceMean of a {} input runs on the portable path",
                         shape_to_string(dims));
  }
  std::vector<int64_t> raw;
  std::string what = "attribute 'axes'";
  if (op.has_input(1)) {
    const ValueSpec& axes = op.input(1);
    const Tensor* known = axes.constant != nullptr       ? axes.constant
                          : axes.known_value.has_value() ? &*axes.known_value
                                                         : nullptr;
    if (known == nullptr) {
      return unimplemented("ReduceMean's axes '{}' are computed at run time", axes.name);
    }
    for (int64_t i = 0; i < known->element_count(); ++i) {
      raw.push_back(element_as_int64(*known, i));
    }
    what = "input 1 'axes'";
  } else {
    KILN_ASSIGN_OR_RETURN(raw, op.attributes().get_ints("axes", {}));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, kernels::normalize_axes(raw, rank, what));
  std::sort(axes.begin(), axes.end());
  auto dims_from = [&](int64_t first, int64_t end) {
    std::vector<int64_t> range;
    for (int64_t d = first; d < end; ++d) range.push_back(d);
    return range;
  };
  if (axes == dims_from(2, rank)) return SpatialMean::kChannelsSecond;
  if (axes == dims_from(1, rank - 1)) return SpatialMean::kChannelsLast;
  return unimplemented("ReduceMean over axes {} of a {} input runs on the portable path",
                       fmt::join(axes, ","), shape_to_string(dims));
}

// The average over the pixels of x, whose bytes `layout` describes as [N, C, spatial...] and
// plane_walk reads (`walk`): kiln's GlobalAverageStep (its header says why), writing the output
// plain (its N x C values in that order, whatever 1s its shape holds).
Status add_global_average(ProgramBuilder& b, const BufferRef& x, const dnnl_desc& layout,
                          const PlaneWalk& walk) {
  const OpReader& op = b.op();
  const size_t partials = static_cast<size_t>(GlobalAverageStep::partial_floats(walk));
  const BufferRef workspace = b.temp(std::max<size_t>(1, partials) * sizeof(float));
  const dnnl_desc out = plain_desc(op.output(0).shape);
  KILN_ASSIGN_OR_RETURN(BufferRef y, b.output(op.output_index(0), out));
  b.add(std::make_unique<GlobalAverageStep>(
      b.label(fmt::format("global average kiln {} -> {}", describe(layout), describe(out))), walk,
      x, workspace, y));
  return ok_status();
}

// The shape of an f32 MaxPool over two spatial dims whose input is stored channels last, dense
// (acdb), for kiln's one-pass kernel (max_pool_step.h); nullopt for others, and where the CPU
// lacks AVX2.
std::optional<MaxPoolShape> channels_last_max_pool(const OpReader& op, const PoolParams& p,
                                                   const dnnl_desc& stored) {
  const ConcreteShape& x = op.input(0).shape;
  const ConcreteShape& y = op.output(0).shape;
  if (op.dispatch().op_type != "MaxPool" || p.data != dnnl::memory::data_type::f32 ||
      x.size() != 4 || !cpu_has(Isa::kAvx2) ||
      stored != dnnl_desc(to_dnnl_dims(x), dnnl::memory::data_type::f32,
                          dnnl::memory::format_tag::acdb)) {
    return std::nullopt;
  }
  MaxPoolShape s;
  s.n = x[0], s.c = x[1], s.h = x[2], s.w = x[3], s.out_h = y[2], s.out_w = y[3];
  for (size_t i = 0; i < 2; ++i) {
    s.kernel[i] = p.window.kernel[i];
    s.strides[i] = p.window.strides[i];
    s.dilations[i] = p.window.dilations[i];
    s.pads[i] = p.window.pads_begin[i];
  }
  return s;
}

// kiln's one-pass max (max_pool_step.h), writing channels last. It vouches for its output as the
// guarded max did: within the input's bound where a producer vouches for one, else finite.
Status build_channels_last_max_pool(ProgramBuilder& b, const MaxPoolShape& shape,
                                    const dnnl_desc& src) {
  const OpReader& op = b.op();
  const int32_t x = op.input_index(0), y = op.output_index(0);
  KILN_ASSIGN_OR_RETURN(BufferRef x_ref, b.input_as(x, src));
  const dnnl_desc dst(to_dnnl_dims(op.output(0).shape), dnnl::memory::data_type::f32,
                      dnnl::memory::format_tag::acdb);
  KILN_ASSIGN_OR_RETURN(BufferRef y_ref, b.output(y, dst));
  const float bound = b.vouched_bound(x).value_or(std::numeric_limits<float>::max());
  b.add(std::make_unique<MaxPoolStep>(
      b.label(fmt::format("max pool kiln_max_pool:{} {} -> {} (NaN windows NaN)",
                          isa_name(best_isa()), describe(src), describe(dst))),
      shape, x_ref, y_ref, bound, y));
  b.vouch(y, bound);
  return ok_status();
}

}  // namespace

Status check_pool(const OpReader& op) { return read_pool(op).status(); }

Status check_reduce_mean(const OpReader& op) { return read_spatial_mean(op).status(); }

Status build_reduce_mean(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(SpatialMean mean, read_spatial_mean(op));
  const int32_t x = op.input_index(0);
  const ConcreteShape& dims = op.input(0).shape;
  if (mean == SpatialMean::kChannelsSecond) {
    // As GlobalAveragePool: in the layout x is stored in where plane_walk reads it, else plain.
    const dnnl_desc layout = plane_walk(b.layout(x)) ? b.layout(x) : plain_desc(dims);
    KILN_ASSIGN_OR_RETURN(BufferRef in, b.input_as(x, layout));
    return add_global_average(b, in, layout, *plane_walk(layout));
  }
  // x plain [N, spatial..., C]: its bytes are [N, C, spatial...] stored channels last.
  const size_t rank = dims.size();
  dnnl_dims relabeled{dims[0], dims[rank - 1]}, strides(rank);
  int64_t stride = dims[rank - 1];
  for (size_t d = rank - 1; d-- > 1;) {
    strides[d + 1] = stride;  // spatial dim d of x is dim d + 1 of the relabeled view
    stride *= dims[d];
  }
  relabeled.insert(relabeled.end(), dims.begin() + 1, dims.end() - 1);
  strides[0] = stride;
  strides[1] = 1;
  const dnnl_desc layout = strided_desc(relabeled, strides);
  const std::optional<PlaneWalk> walk = plane_walk(layout);
  if (!walk) return internal_error("no channels-last walk for ReduceMean's input");
  KILN_ASSIGN_OR_RETURN(BufferRef in, b.input_as(x, plain_desc(dims)));
  return add_global_average(b, in, layout, *walk);
}

Status build_pool(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(PoolParams p, read_pool(op));
  const size_t r = p.window.kernel.size();
  dnnl_dims dilation(r);
  for (size_t i = 0; i < r; ++i) dilation[i] = p.window.dilations[i] - 1;
  const int32_t x = op.input_index(0);
  const bool f32 = p.data == dnnl::memory::data_type::f32;
  if (f32 && op.dispatch().op_type == "GlobalAveragePool") {
    if (const std::optional<PlaneWalk> walk = plane_walk(b.layout(x))) {
      KILN_ASSIGN_OR_RETURN(BufferRef in, b.input_as(x, b.layout(x)));
      return add_global_average(b, in, b.layout(x), *walk);
    }
  }
  const dnnl_desc src = with_data_type(b.layout(x), dnnl::memory::data_type::f32);
  if (const std::optional<MaxPoolShape> shape = channels_last_max_pool(op, p, b.layout(x))) {
    return build_channels_last_max_pool(b, *shape, src);
  }
  dnnl::pooling_v2_forward::desc desc(
      dnnl::prop_kind::forward_inference, p.algorithm, src,
      dnnl_desc(to_dnnl_dims(op.output(0).shape), dnnl::memory::data_type::f32,
                dnnl::memory::format_tag::any),
      dnnl_dims(p.window.strides.begin(), p.window.strides.end()),
      dnnl_dims(p.window.kernel.begin(), p.window.kernel.end()), dilation,
      dnnl_dims(p.window.pads_begin.begin(), p.window.pads_begin.end()),
      dnnl_dims(p.window.pads_end.begin(), p.window.pads_end.end()));
  dnnl::pooling_v2_forward::primitive_desc pd(desc, b.attr(), b.engine());
  KILN_ASSIGN_OR_RETURN(BufferRef src_ref, b.input_as(x, src));
  BufferRef dst_ref;
  if (f32) {
    KILN_ASSIGN_OR_RETURN(dst_ref, b.output(op.output_index(0), pd.dst_desc()));
  } else {
    dst_ref = b.temp(pd.dst_desc().get_size());
  }
  const size_t first_step = b.step_count();
  auto add_pool = [&] {
    PrimitiveStep& step =
        b.add_primitive(b.label(fmt::format("pool {} {} -> {}", impl_name(pd), describe(src),
                                            describe(pd.dst_desc()))),
                        pd, dnnl::pooling_v2_forward(pd));
    step.bind(DNNL_ARG_SRC, src, src_ref);
    step.bind(DNNL_ARG_DST, pd.dst_desc(), dst_ref);
  };
  add_pool();
  if (p.algorithm == dnnl::algorithm::pooling_max) {
    // oneDNN's max skips NaN: an average over the same windows finds them (activation_step.h).
    dnnl::pooling_v2_forward::desc mask_desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_avg_include_padding, src,
        pd.dst_desc(), dnnl_dims(p.window.strides.begin(), p.window.strides.end()),
        dnnl_dims(p.window.kernel.begin(), p.window.kernel.end()), dilation,
        dnnl_dims(p.window.pads_begin.begin(), p.window.pads_begin.end()),
        dnnl_dims(p.window.pads_end.begin(), p.window.pads_end.end()));
    dnnl::pooling_v2_forward::primitive_desc mask_pd(mask_desc, b.attr(), b.engine());
    const BufferRef mask = b.temp(pd.dst_desc().get_size());
    PrimitiveStep& mask_step =
        b.add_primitive(b.label(fmt::format("pool {} (NaN windows)", impl_name(mask_pd))), mask_pd,
                        dnnl::pooling_v2_forward(mask_pd));
    mask_step.bind(DNNL_ARG_SRC, src, src_ref);
    mask_step.bind(DNNL_ARG_DST, pd.dst_desc(), mask);
    PoolWindows windows{src,
                        pd.dst_desc(),
                        p.window.kernel,
                        p.window.strides,
                        p.window.dilations,
                        p.window.pads_begin};
    b.add(std::make_unique<MaxPoolNanStep>(b.label("max of NaN windows is NaN (kiln)"), src_ref,
                                           mask, dst_ref, pd.dst_desc().get_size() / sizeof(float),
                                           std::move(windows)));
    if (f32) {
      // The max alone while the input is finite; its output then is too, within the input's
      // bound where that is vouched for.
      std::vector<std::unique_ptr<Step>> fallback = b.take_steps(first_step);
      add_pool();
      const std::optional<float> known = b.vouched_bound(x);
      const float bound = known.value_or(std::numeric_limits<float>::max());
      const int32_t y = op.output_index(0);
      b.vouch(y, bound);
      b.add(std::make_unique<GuardedStep>(
          std::vector<FiniteBound>{
              {src_ref, src.get_size() / sizeof(float), bound, known ? x : -1}},
          b.take_steps(first_step), std::move(fallback), "oneDNN's max and kiln's NaN windows", y));
    }
  }
  if (!f32) {
    const int32_t y = op.output_index(0);
    const dnnl_desc stored = b.requires_plain(y) ? plain_desc(op.output(0).shape, p.data)
                                                 : with_data_type(pd.dst_desc(), p.data);
    KILN_ASSIGN_OR_RETURN(BufferRef y_ref, b.output(y, stored));
    b.add_reorder(dst_ref, pd.dst_desc(), y_ref, stored);
  }
  return ok_status();
}

}  // namespace kiln::hal::cpu
