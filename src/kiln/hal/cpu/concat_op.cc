// Concat of f32 values in the layout its first input already has, so that a U-Net's or an FPN's
// skip connection between convolutions costs one copy of each input instead of reorders to plain
// and back around the portable kernel: any dense permutation of the dims (plain, channels-last
// as a convolution leaves it on AVX-512), or, along the channels, nChw8c / nChw16c where every
// input's channel count fills whole blocks (a convolution's output on AVX2). Inputs stored
// otherwise are reordered to that layout first. In such a layout each input's bytes for one index
// of the dims stored outside the axis are one contiguous run, and the output's run is theirs in
// input order: the step copies runs. A copy changes no bit.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::hal::cpu {
namespace {

using dt = dnnl::memory::data_type;

StatusOr<int64_t> concat_axis(const OpReader& op) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, op.attributes().get_int("axis", 0));
  const auto rank = static_cast<int64_t>(op.output(0).shape.size());
  return axis < 0 ? axis + rank : axis;
}

// Each input's run and the output's: `outer` runs of `bytes[i]` from each input make the
// output's runs of their sum.
struct Runs {
  int64_t outer = 1;
  std::vector<size_t> bytes;
};

// A dense permutation layout for `dims` with the dims in the same order of strides as `like`.
dnnl_desc same_order(const dnnl_dims& like_strides, const dnnl_dims& dims) {
  std::vector<size_t> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  // Outermost first; equal strides (dims of size 1) keep their dim order.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return like_strides[a] > like_strides[b]; });
  dnnl_dims strides(dims.size());
  int64_t s = 1;
  for (size_t i = order.size(); i-- > 0;) {
    strides[order[i]] = s;
    s *= dims[order[i]];
  }
  return strided_desc(dims, strides);
}

// Runs of a dense permutation layout: the dims stored inside the axis make one input's run
// (with the axis itself), the ones outside count the runs.
Runs permutation_runs(const dnnl_dims& strides, const std::vector<ConcreteShape>& inputs,
                      size_t axis) {
  Runs r;
  const ConcreteShape& first = inputs[0];
  int64_t inner = 1;
  for (size_t d = 0; d < first.size(); ++d) {
    if (d == axis) continue;
    // Stored inside the axis: smaller stride, or equal (a dim of size 1) and later.
    const bool inside = strides[d] < strides[axis] || (strides[d] == strides[axis] && d > axis);
    (inside ? inner : r.outer) *= first[d];
  }
  for (const ConcreteShape& s : inputs) {
    r.bytes.push_back(static_cast<size_t>(s[axis] * inner) * sizeof(float));
  }
  return r;
}

class ConcatStep : public Step {
 public:
  ConcatStep(std::string label, Runs runs, std::vector<BufferRef> inputs, BufferRef out)
      : label_(std::move(label)), runs_(std::move(runs)), inputs_(std::move(inputs)), out_(out) {
    total_ = std::accumulate(runs_.bytes.begin(), runs_.bytes.end(), size_t{0});
  }

  Status run(const ExecContext& ctx) override {
    std::byte* out = ctx.resolve(out_);
    const int64_t outer = runs_.outer;
#pragma omp parallel for schedule(static) if (static_cast <size_t>(outer) * total_ >= \
                                              (size_t{1} << 18))
    for (int64_t o = 0; o < outer; ++o) {
      std::byte* dst = out + static_cast<size_t>(o) * total_;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        const size_t bytes = runs_.bytes[i];
        std::memcpy(dst, ctx.resolve(inputs_[i]) + static_cast<size_t>(o) * bytes, bytes);
        dst += bytes;
      }
    }
    return ok_status();
  }
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  Runs runs_;
  std::vector<BufferRef> inputs_;
  BufferRef out_;
  size_t total_ = 0;
};

}  // namespace

Status check_concat(const OpReader& op) {
  for (size_t i = 0; i < op.input_count(); ++i) {
    if (!op.has_input(i)) return unimplemented("absent input {}", i);
    KILN_RETURN_IF_ERROR(op.expect_input_dtype(i, DType::kF32));
  }
  KILN_RETURN_IF_ERROR(op.expect_output_dtype(0, DType::kF32));
  if (op.output(0).shape.empty()) return unimplemented("Concat of scalars");
  return concat_axis(op).status();
}

Status build_concat(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(int64_t axis_value, concat_axis(op));
  const auto axis = static_cast<size_t>(axis_value);
  const size_t count = op.input_count();
  std::vector<ConcreteShape> shapes;
  for (size_t i = 0; i < count; ++i) shapes.push_back(op.input(i).shape);
  const dnnl_dims out_dims = to_dnnl_dims(op.output(0).shape);

  // The layout family: blocked by channels that every input fills whole, along the channels;
  // else input 0's order of dims when it is a dense permutation; else plain.
  const dnnl_desc& first = b.layout(op.input_index(0));
  const auto& bk = first.data.format_desc.blocking;
  const int64_t block =
      first.data.format_kind == dnnl_blocked && bk.inner_nblks == 1 ? bk.inner_blks[0] : 0;
  bool blocked = axis == 1 && alike_blocked(first, out_dims).has_value();
  for (const ConcreteShape& s : shapes) blocked = blocked && s[1] % block == 0;
  std::vector<dnnl_desc> layouts;
  dnnl_desc out_layout;
  Runs runs;
  if (blocked) {
    // [N][C/B][spatial][B]: a sample's channels are one run.
    runs.outer = shapes[0][0];
    for (const ConcreteShape& s : shapes) {
      layouts.push_back(*alike_blocked(first, to_dnnl_dims(s)));
      runs.bytes.push_back(static_cast<size_t>(kernels::product(s) / std::max<int64_t>(1, s[0])) *
                           sizeof(float));
    }
    out_layout = *alike_blocked(first, out_dims);
  } else {
    const std::optional<dnnl_dims> strides = dense_strides(first);
    const dnnl_dims order = strides ? *strides : *dense_strides(plain_desc(shapes[0]));
    for (const ConcreteShape& s : shapes) layouts.push_back(same_order(order, to_dnnl_dims(s)));
    out_layout = same_order(order, out_dims);
    runs = permutation_runs(order, shapes, axis);
  }

  std::vector<BufferRef> inputs;
  for (size_t i = 0; i < count; ++i) {
    KILN_ASSIGN_OR_RETURN(BufferRef in, b.input_as(op.input_index(i), layouts[i]));
    inputs.push_back(in);
  }
  KILN_ASSIGN_OR_RETURN(BufferRef out, b.output(op.output_index(0), out_layout));
  if (kernels::product(op.output(0).shape) == 0) return ok_status();
  b.add(std::make_unique<ConcatStep>(b.label(fmt::format("concat kiln {} inputs along dim {}, {}",
                                                         count, axis, describe(out_layout))),
                                     std::move(runs), std::move(inputs), out));
  return ok_status();
}

}  // namespace kiln::hal::cpu
