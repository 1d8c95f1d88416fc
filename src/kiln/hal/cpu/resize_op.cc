// Resize on f32 [N, C, spatial...] that maps samples and channels to themselves (scales 1 on N
// and C: every upsampling and downsampling of a CNN), in the layout its input already has:
// channels-last (a convolution's output on AVX-512), blocked (nChw8c / nChw16c on AVX2) or plain.
// The portable path would first reorder the input to plain and the output back.
//
// The taps and weights are the definition's own (kernels/resize_plan.h: every mode,
// coordinate_transformation_mode and nearest_mode it supports), and each output element is the
// definition's f32 arithmetic in its order: nearest copies the source element; linear and cubic
// compute acc = sum over the outer axes' taps i of w_i * (sum over the last axis's taps t of
// w_t * x), every sum from 0 in tap order, multiplications and additions rounded one by one (no
// fused multiply-add), w_i the product of the outer axes' weights from 1 in axis order. So the
// output is the portable kernel's bit for bit, whatever the layout, batch or thread count.
// tf_crop_and_resize with a crop that leaves the input (extrapolation), other dtypes and Resize
// over N or C take the portable path.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/resize_plan.h"

namespace kiln::hal::cpu {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

constexpr size_t kMaxSpatial = 3;

// Where element (n, channel block cb, lane, pixel p) of a layout lies: n * sample + cb * block +
// p * pixel + lane, p the row-major index over the spatial dims, `lanes` channels per block (C for
// channels-last: one block; 1 for plain; 8 or 16 for blocked layouts, padded).
struct ChannelBlocks {
  int64_t lanes = 1, blocks = 1;
  int64_t sample = 0, block = 0, pixel = 0;
};

// The channel blocks of `layout` (dims [N, C, spatial...]), or nullopt for other layouts.
std::optional<ChannelBlocks> channel_blocks(const dnnl_desc& layout) {
  const dnnl_memory_desc_t& md = layout.data;
  if (md.format_kind != dnnl_blocked || md.offset0 != 0 || md.ndims < 3) return std::nullopt;
  const auto& bk = md.format_desc.blocking;
  const int r = md.ndims;
  ChannelBlocks c;
  if (bk.inner_nblks == 1 && bk.inner_idxs[0] == 1) {
    c.lanes = bk.inner_blks[0];
    c.blocks = md.padded_dims[1] / c.lanes;
    c.block = bk.strides[1];
    c.pixel = c.lanes;
  } else if (bk.inner_nblks == 0 && !is_plain(layout) && (bk.strides[1] == 1 || md.dims[1] == 1)) {
    // Channels-last. (A plain layout of single pixels has channel stride 1 too: it counts as
    // plain, the kind its resized output gets.)
    c.lanes = md.dims[1];
    c.pixel = md.dims[1];
  } else if (bk.inner_nblks == 0) {
    c.blocks = md.dims[1];
    c.block = bk.strides[1];
    c.pixel = 1;
  } else {
    return std::nullopt;
  }
  for (int a = 0; a < r; ++a) {
    if (a != 1 && md.padded_dims[a] != md.dims[a]) return std::nullopt;
  }
  // Spatial dims row-major with `pixel` as the last one's stride; no channel block inside a pixel
  // run but the lanes.
  int64_t stride = c.pixel, pixels = 1;
  for (int a = r - 1; a >= 2; --a) {
    if (md.dims[a] > 1 && bk.strides[a] != stride) return std::nullopt;
    stride *= md.dims[a];
    pixels *= md.dims[a];
  }
  if (c.blocks > 1 && c.block < pixels * c.pixel) return std::nullopt;
  c.sample = bk.strides[0];
  if (md.dims[0] > 1 && c.sample < std::max(c.block * c.blocks, pixels * c.pixel)) {
    return std::nullopt;
  }
  return c;
}

// The layout of the same kind as `in` (plain, channels-last or blocked by 8 or 16 channels) for
// `dims`; nullopt for other kinds.
std::optional<dnnl_desc> same_kind(const dnnl_desc& in, const dnnl_dims& dims) {
  static constexpr std::array<tag, 3> kLast = {tag::acb, tag::acdb, tag::acdeb};
  const size_t r = dims.size();
  if (r < 3 || r > 5) return std::nullopt;
  if (is_plain(in)) return plain_desc(std::vector<int64_t>(dims.begin(), dims.end()), dt::f32);
  const auto& bk = in.data.format_desc.blocking;
  if (bk.inner_nblks == 0 && bk.strides[1] == 1) return dnnl_desc(dims, dt::f32, kLast[r - 3]);
  return alike_blocked(in, dims);
}

// The constant values of input i as doubles; nullopt when absent or empty.
StatusOr<std::optional<std::vector<double>>> constant_floats(const OpReader& op, size_t i) {
  if (!op.has_input(i)) return std::optional<std::vector<double>>();
  auto values = constant_doubles(op.input(i));
  if (!values.ok()) return std::move(values).status().with_note(fmt::format("input {}", i));
  return values;
}

// The definition's plan, where this path runs it.
StatusOr<kernels::ResizePlan> plan(const OpReader& op) {
  KILN_RETURN_IF_ERROR(op.expect_input_dtype(0, DType::kF32));
  KILN_RETURN_IF_ERROR(op.expect_input_rank(0, 3, 2 + kMaxSpatial));
  const ConcreteShape& in = op.input(0).shape;
  const ConcreteShape& out = op.output(0).shape;
  KILN_ASSIGN_OR_RETURN(auto scales, constant_floats(op, kernels::kResizeScales));
  std::optional<std::vector<double>> roi;
  KILN_ASSIGN_OR_RETURN(std::string coord,
                        op.attributes().get_string("coordinate_transformation_mode", ""));
  if (coord == "tf_crop_and_resize") {
    KILN_ASSIGN_OR_RETURN(roi, constant_floats(op, kernels::kResizeRoi));
  }
  KILN_ASSIGN_OR_RETURN(kernels::ResizePlan p,
                        kernels::plan_resize(op.attributes(), in, out, scales, roi));
  for (size_t a = 0; a < p.axes.size(); ++a) {
    const kernels::ResizeAxisTaps& ax = p.axes[a];
    if (std::any_of(ax.outside.begin(), ax.outside.end(), [](uint8_t o) { return o != 0; })) {
      return unimplemented(
          "tf_crop_and_resize reaching outside the input runs on the portable path");
    }
    if (a >= 2) continue;
    // Samples and channels map to themselves: one tap of weight 1 at the same index.
    const int64_t stride = kernels::product(std::span<const int64_t>(in).subspan(a + 1));
    bool identity = in[a] == out[a] && ax.taps == 1;
    for (int64_t o = 0; identity && o < out[a]; ++o) {
      identity = ax.offset[o] == o * stride && ax.weight_f[o] == 1.0f;
    }
    if (!identity) return unimplemented("Resize over dim {} runs on the portable path", a);
  }
  return p;
}

// One spatial axis's taps as input indices (the plan's offsets divided by the axis's row-major
// stride) and f32 weights.
struct AxisTaps {
  int64_t taps = 1;
  std::vector<int64_t> index;
  std::vector<float> weight;
};

class ResizeStep : public Step {
 public:
  ResizeStep(std::string label, bool nearest, std::vector<AxisTaps> axes, ConcreteShape in,
             ConcreteShape out, ChannelBlocks x_layout, ChannelBlocks y_layout, BufferRef x,
             BufferRef y)
      : label_(std::move(label)),
        nearest_(nearest),
        axes_(std::move(axes)),
        in_(std::move(in)),
        out_(std::move(out)),
        xl_(x_layout),
        yl_(y_layout),
        x_(x),
        y_(y) {}

  Status run(const ExecContext& ctx) override {
    const auto* x = reinterpret_cast<const float*>(ctx.resolve(x_));
    auto* y = reinterpret_cast<float*>(ctx.resolve(y_));
    const size_t spatial = axes_.size();
    const int64_t width = out_.back();
    int64_t rows = out_[0];  // (sample, outer spatial coordinates)
    for (size_t a = 0; a + 1 < spatial; ++a) rows *= out_[2 + a];
    const int64_t per_job = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, width * xl_.lanes));
    const int64_t jobs = (rows + per_job - 1) / per_job;
#pragma omp parallel for schedule(static) if (jobs > 1)
    for (int64_t j = 0; j < jobs; ++j) {
      for (int64_t r = j * per_job; r < std::min(rows, (j + 1) * per_job); ++r) row(x, y, r);
    }
    return ok_status();
  }
  std::string describe() const override { return label_; }

 private:
  // Output row r: sample n and the outer spatial coordinates, all of the last spatial axis.
  void row(const float* x, float* y, int64_t r) const {
    const size_t spatial = axes_.size();
    std::array<int64_t, kMaxSpatial> coord{};
    for (size_t a = spatial - 1; a-- > 0;) {
      coord[a] = r % out_[2 + a];
      r /= out_[2 + a];
    }
    const int64_t n = r;
    // The outer axes' taps as one list, axis order, the first axis most significant: the input
    // pixel of the row's start and the weight (products from 1, left to right).
    std::array<int64_t, 64> base{};
    std::array<float, 64> w{};
    int64_t count = 1;
    base[0] = 0;
    w[0] = 1.0f;
    int64_t out_pixel_row = 0;
    for (size_t a = 0; a + 1 < spatial; ++a) {
      const AxisTaps& ax = axes_[a];
      int64_t stride = 1;
      for (size_t b = a + 1; b < spatial; ++b) stride *= in_[2 + b];
      for (int64_t i = count; i-- > 0;) {
        for (int64_t t = ax.taps; t-- > 0;) {
          base[i * ax.taps + t] = base[i] + ax.index[coord[a] * ax.taps + t] * stride;
          w[i * ax.taps + t] = w[i] * ax.weight[coord[a] * ax.taps + t];
        }
      }
      count *= ax.taps;
      out_pixel_row = out_pixel_row * out_[2 + a] + coord[a];
    }
    const int64_t width = out_.back();
    const AxisTaps& last = axes_.back();
    const int64_t lanes = xl_.lanes;
    const float* xs = x + n * xl_.sample;
    float* ys = y + n * yl_.sample + out_pixel_row * width * yl_.pixel;
    for (int64_t cb = 0; cb < xl_.blocks; ++cb) {
      const float* xb = xs + cb * xl_.block;
      float* yb = ys + cb * yl_.block;
      for (int64_t o = 0; o < width; ++o) {
        float* out = yb + o * yl_.pixel;
        const int64_t* lo = &last.index[o * last.taps];
        const float* lw = &last.weight[o * last.taps];
        if (nearest_) {
          const float* src = xb + (base[0] + lo[0]) * xl_.pixel;
          std::copy(src, src + lanes, out);
          continue;
        }
        std::fill(out, out + lanes, 0.0f);
        for (int64_t i = 0; i < count; ++i) {
          const float wi = w[i];
          const float* row_in = xb + base[i] * xl_.pixel;
          if (last.taps == 2) {
            const float* x0 = row_in + lo[0] * xl_.pixel;
            const float* x1 = row_in + lo[1] * xl_.pixel;
            for (int64_t l = 0; l < lanes; ++l) {
              float s = 0.0f;
              s += lw[0] * x0[l];
              s += lw[1] * x1[l];
              out[l] += wi * s;
            }
            continue;
          }
          for (int64_t l = 0; l < lanes; ++l) {
            float s = 0.0f;
            for (int64_t t = 0; t < last.taps; ++t) s += lw[t] * row_in[lo[t] * xl_.pixel + l];
            out[l] += wi * s;
          }
        }
      }
    }
  }

  std::string label_;
  bool nearest_;
  std::vector<AxisTaps> axes_;
  ConcreteShape in_, out_;
  ChannelBlocks xl_, yl_;
  BufferRef x_, y_;
};

}  // namespace

Status check_resize(const OpReader& op) {
  KILN_ASSIGN_OR_RETURN(kernels::ResizePlan p, plan(op));
  int64_t outer_taps = 1;
  for (size_t a = 2; a + 1 < p.axes.size(); ++a) outer_taps *= p.axes[a].taps;
  if (outer_taps > 64) return unimplemented("more than 64 outer taps run on the portable path");
  return ok_status();
}

Status build_resize(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(kernels::ResizePlan p, plan(op));
  const ConcreteShape& in = op.input(0).shape;
  const ConcreteShape& out = op.output(0).shape;
  const int32_t x = op.input_index(0), y = op.output_index(0);
  // The input as it is stored where that layout has channel blocks, else plain.
  dnnl_desc x_layout = b.layout(x);
  std::optional<ChannelBlocks> xl = channel_blocks(x_layout);
  std::optional<dnnl_desc> y_layout = xl ? same_kind(x_layout, to_dnnl_dims(out)) : std::nullopt;
  if (!xl || !y_layout) {
    x_layout = plain_desc(in);
    xl = channel_blocks(x_layout);
    y_layout = plain_desc(out);
  }
  const std::optional<ChannelBlocks> yl = channel_blocks(*y_layout);
  if (!xl || !yl || xl->lanes != yl->lanes || xl->blocks != yl->blocks) {
    return internal_error("Resize: no channel blocks for layout {}", describe(x_layout));
  }
  KILN_ASSIGN_OR_RETURN(BufferRef xr, b.input_as(x, x_layout));
  KILN_ASSIGN_OR_RETURN(BufferRef yr, b.output(y, *y_layout));
  if (kernels::product(out) == 0) return ok_status();
  std::vector<AxisTaps> axes;
  for (size_t a = 2; a < in.size(); ++a) {
    const kernels::ResizeAxisTaps& t = p.axes[a];
    const int64_t stride = kernels::product(std::span<const int64_t>(in).subspan(a + 1));
    AxisTaps ax;
    ax.taps = t.taps;
    ax.index.resize(t.offset.size());
    for (size_t i = 0; i < t.offset.size(); ++i) ax.index[i] = t.offset[i] / stride;
    ax.weight = t.weight_f;
    axes.push_back(std::move(ax));
  }
  const bool nearest = p.mode == kernels::ResizeMode::kNearest;
  b.add(std::make_unique<ResizeStep>(
      b.label(fmt::format("resize kiln {} {} -> {}", nearest ? "nearest" : "weighted",
                          describe(x_layout), describe(*y_layout))),
      nearest, std::move(axes), in, out, *xl, *yl, xr, yr));
  return ok_status();
}

}  // namespace kiln::hal::cpu
