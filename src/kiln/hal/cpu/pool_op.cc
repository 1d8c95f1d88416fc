// MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool on oneDNN pooling_v2 (dilations),
// reading the input in whatever layout its producer chose and writing the same kind of layout.
// ceil_mode becomes extra end padding: oneDNN ignores padding for max and, with
// avg_exclude_padding, for the average's divisor. oneDNN's max skips a NaN in the window; a second
// pooling by average marks those windows and MaxPoolNanStep makes their max NaN, as PyTorch and
// kiln's portable kernel give, reading the taps of a window whose max is +inf (activation_step.h).
#include <fmt/format.h>

#include "kiln/hal/cpu/activation_step.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"

namespace kiln::hal::cpu {
namespace {

struct PoolParams {
  Window window;  // pads_end already extended for ceil_mode
  dnnl::algorithm algorithm = dnnl::algorithm::pooling_max;
};

StatusOr<PoolParams> read_pool(const OpReader& op) {
  const std::string& type = op.dispatch().op_type;
  const bool global = type == "GlobalAveragePool" || type == "GlobalMaxPool";
  const bool max = type == "MaxPool" || type == "GlobalMaxPool";
  if (global) {
    KILN_RETURN_IF_ERROR(op.expect_attributes({}));
  } else if (max) {
    KILN_RETURN_IF_ERROR(op.expect_attributes({"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                               "pads", "storage_order", "strides"}));
  } else {
    KILN_RETURN_IF_ERROR(op.expect_attributes({"auto_pad", "ceil_mode", "count_include_pad",
                                               "dilations", "kernel_shape", "pads", "strides"}));
  }
  KILN_RETURN_IF_ERROR(op.expect_inputs(1, 1));
  if (op.output_count() > 1) {
    return unimplemented("output 1 (Indices) is not supported");
  }
  KILN_RETURN_IF_ERROR(op.expect_outputs(1, 1));
  KILN_RETURN_IF_ERROR(op.expect_input_dtype(0, DType::kF32));
  KILN_RETURN_IF_ERROR(op.expect_output_dtype(0, DType::kF32));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(0, 3, 5));
  const ConcreteShape& x = op.input(0).shape;
  const ConcreteShape& y = op.output(0).shape;
  const size_t r = x.size() - 2;
  PoolParams p;
  bool ceil_mode = false;
  bool include_pad = false;
  if (global) {
    p.window.kernel.assign(x.begin() + 2, x.end());
    p.window.strides.assign(r, 1);
    p.window.dilations.assign(r, 1);
    p.window.pads_begin.assign(r, 0);
    p.window.pads_end.assign(r, 0);
  } else {
    KILN_ASSIGN_OR_RETURN(p.window,
                          read_window(op, std::span(x).subspan(2), {}, /*allow_dilations=*/true));
    KILN_ASSIGN_OR_RETURN(int64_t ceil, op.get_int("ceil_mode", 0));
    if (ceil != 0 && ceil != 1) return invalid_argument("attribute 'ceil_mode' must be 0 or 1");
    ceil_mode = ceil == 1;
    if (max) {
      KILN_ASSIGN_OR_RETURN(int64_t order, op.get_int("storage_order", 0));
      if (order != 0) return unimplemented("attribute 'storage_order' {} is not supported", order);
    } else {
      KILN_ASSIGN_OR_RETURN(int64_t include, op.get_int("count_include_pad", 0));
      if (include != 0 && include != 1) {
        return invalid_argument("attribute 'count_include_pad' must be 0 or 1");
      }
      include_pad = include == 1;
    }
  }
  ConcreteShape expected{x[0], x[1]};
  for (size_t i = 0; i < r; ++i) {
    const Window& w = p.window;
    const int64_t out = window_output_size(x[2 + i], w.kernel[i], w.strides[i], w.dilations[i],
                                           w.pads_begin[i], w.pads_end[i], ceil_mode);
    if (out < 1) return invalid_argument("the window does not fit spatial dim {}", i);
    expected.push_back(out);
  }
  if (y != expected) {
    return invalid_argument("output is [{}], but input [{}] gives [{}]", fmt::join(y, ","),
                            fmt::join(x, ","), fmt::join(expected, ","));
  }
  for (size_t i = 0; i < r; ++i) {
    Window& w = p.window;
    const int64_t extent = w.dilations[i] * (w.kernel[i] - 1) + 1;
    const int64_t needed = (y[2 + i] - 1) * w.strides[i] + extent - x[2 + i] - w.pads_begin[i];
    if (needed > w.pads_end[i]) {
      // The reference divides by the taps inside the padded input; oneDNN would count the
      // overhang too.
      if (include_pad) {
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
  if (max) {
    p.algorithm = dnnl::algorithm::pooling_max;
  } else {
    p.algorithm = include_pad ? dnnl::algorithm::pooling_avg_include_padding
                              : dnnl::algorithm::pooling_avg_exclude_padding;
  }
  return p;
}

}  // namespace

Status check_pool(const OpReader& op) { return read_pool(op).status(); }

Status build_pool(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(PoolParams p, read_pool(op));
  const size_t r = p.window.kernel.size();
  dnnl_dims dilation(r);
  for (size_t i = 0; i < r; ++i) dilation[i] = p.window.dilations[i] - 1;
  const int32_t x = op.input_index(0);
  const dnnl_desc src = b.layout(x);
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
  KILN_ASSIGN_OR_RETURN(BufferRef dst_ref, b.output(op.output_index(0), pd.dst_desc()));
  PrimitiveStep& step =
      b.add_primitive(b.label(fmt::format("pool {} {} -> {}", impl_name(pd), describe(src),
                                          describe(pd.dst_desc()))),
                      pd, dnnl::pooling_v2_forward(pd));
  step.bind(DNNL_ARG_SRC, src, src_ref);
  step.bind(DNNL_ARG_DST, pd.dst_desc(), dst_ref);
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
  }
  return ok_status();
}

}  // namespace kiln::hal::cpu
