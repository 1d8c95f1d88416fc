// Data movement on 4- and 8-byte elements (f32, i32, u32, i64, u64, f64: bit copies) with one
// strided-copy shader (shaders/strided_copy.comp): Transpose, Concat (one launch per input),
// Slice (bounds known at prepare time: constants or values the shape program knows; negative
// steps), Split and Expand (stride 0). Gather (shaders/gather.comp) takes i32 or i64 indices from
// a constant or a computed value; an index out of range is the definition's error
// (kernels/index.cc): constant indices are checked when the dispatch is prepared (one out of range
// sends the Gather to the CPU, which reports it); computed ones by the kernel, which records the
// first bad one for the executable to report when the run ends (RunCheck).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/kernels/index_util.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/strided_copy.h"

namespace kiln::hal::vulkan {
namespace {

constexpr size_t kMaxCopyRank = 6;  // strided_copy.comp

// Index space `dims` (row-major): element i goes from src_offset + i . src_strides to
// dst_offset + i . dst_strides (element units).
struct CopyView {
  std::vector<int64_t> dims, src_strides, dst_strides;
  int64_t src_offset = 0, dst_offset = 0;
};

StatusOr<uint32_t> element_code(const KernelBuilder& b, const ValueSpec& v) {
  const size_t size = dtype_size(v.dtype);
  if (size == 4) return 0u;
  if (size == 8) return 1u;
  return unimplemented("'{}' is {}; the Vulkan data movement kernels take 4- and 8-byte dtypes",
                       v.name, dtype_name(v.dtype));
}

// Dims of size 1 dropped and neighbours that are contiguous in both source and destination merged.
CopyView simplify(const CopyView& v) {
  CopyView out;
  out.src_offset = v.src_offset;
  out.dst_offset = v.dst_offset;
  for (size_t d = 0; d < v.dims.size(); ++d) {
    if (v.dims[d] == 1) continue;
    if (!out.dims.empty() && out.src_strides.back() == v.src_strides[d] * v.dims[d] &&
        out.dst_strides.back() == v.dst_strides[d] * v.dims[d]) {
      out.dims.back() *= v.dims[d];
      out.src_strides.back() = v.src_strides[d];
      out.dst_strides.back() = v.dst_strides[d];
      continue;
    }
    out.dims.push_back(v.dims[d]);
    out.src_strides.push_back(v.src_strides[d]);
    out.dst_strides.push_back(v.dst_strides[d]);
  }
  return out;
}

Status launch_copy(KernelBuilder& b, Operand src, Operand dst, uint32_t elem8, const CopyView& raw,
                   const std::string& what) {
  for (int64_t d : raw.dims) {
    if (d == 0) return ok_status();
  }
  const CopyView v = simplify(raw);
  if (v.dims.size() > kMaxCopyRank) {
    return unimplemented("{}: a copy of rank {} (the Vulkan kernel takes up to {})", what,
                         v.dims.size(), kMaxCopyRank);
  }
  // Every index the shader forms must fit its 32-bit arithmetic (signed for the source).
  constexpr int64_t kLimit = std::numeric_limits<int32_t>::max();
  int64_t n = 1, src_lo = v.src_offset, src_hi = v.src_offset, dst_hi = v.dst_offset;
  for (size_t d = 0; d < v.dims.size(); ++d) {
    n *= v.dims[d];
    const int64_t span = (v.dims[d] - 1) * v.src_strides[d];
    (span < 0 ? src_lo : src_hi) += span;
    dst_hi += (v.dims[d] - 1) * v.dst_strides[d];
    if (n > kLimit || src_hi > kLimit || src_lo < 0 || dst_hi > kLimit) {
      return unimplemented("{}: more elements than the Vulkan copy kernel's 32-bit indices reach",
                           what);
    }
  }
  std::vector<uint32_t> params = {static_cast<uint32_t>(n), static_cast<uint32_t>(v.dims.size())};
  auto push6 = [&](const std::vector<int64_t>& values, int64_t fill) {
    for (size_t d = 0; d < kMaxCopyRank; ++d) {
      params.push_back(static_cast<uint32_t>(d < values.size() ? values[d] : fill));
    }
  };
  push6(v.dims, 1);
  push6(v.src_strides, 0);
  params.push_back(static_cast<uint32_t>(v.src_offset));
  push6(v.dst_strides, 0);
  params.push_back(static_cast<uint32_t>(v.dst_offset));
  b.describe(fmt::format("vulkan {} (strided copy of {} {}-byte elements, rank {})", what, n,
                         elem8 != 0 ? 8 : 4, v.dims.size()));
  return b.launch("strided_copy", {elem8}, static_cast<uint64_t>(n), {src, dst}, std::move(params));
}

// A contiguous row-major source `src_dims` read through `view`, written row-major.
CopyView from_view(const kernels::StridedView& view) {
  CopyView v;
  v.dims = view.dims;
  v.src_strides = view.strides;
  v.src_offset = view.offset;
  v.dst_strides = kernels::row_major_strides(view.dims);
  return v;
}

StatusOr<int64_t> axis_attribute(const KernelBuilder& b, int64_t rank, int64_t fallback) {
  KILN_ASSIGN_OR_RETURN(int64_t raw, b.attributes().get_int("axis", fallback));
  return kernels::normalize_axis(raw, rank, "attribute 'axis'");
}

}  // namespace

Status build_transpose(KernelBuilder& b) {
  KILN_ASSIGN_OR_RETURN(uint32_t elem8, element_code(b, b.input(0)));
  const ConcreteShape& dims = b.input(0).shape;
  std::vector<int64_t> perm(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) perm[i] = static_cast<int64_t>(dims.size() - 1 - i);
  KILN_ASSIGN_OR_RETURN(perm, b.attributes().get_ints("perm", perm));
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(0));
  return launch_copy(b, x, b.output_operand(0), elem8,
                     from_view(kernels::permuted_view(dims, perm)), "Transpose");
}

Status build_expand(KernelBuilder& b) {
  KILN_ASSIGN_OR_RETURN(uint32_t elem8, element_code(b, b.input(0)));
  const ConcreteShape& in = b.input(0).shape;
  const ConcreteShape& out = b.output(0).shape;
  const std::vector<int64_t> strides = kernels::row_major_strides(in);
  kernels::StridedView view;
  view.dims = out;
  view.strides.assign(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) view.strides[lead + i] = in[i] == 1 ? 0 : strides[i];
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(0));
  return launch_copy(b, x, b.output_operand(0), elem8, from_view(view), "Expand");
}

Status build_concat(KernelBuilder& b) {
  const ValueSpec& y = b.output(0);
  KILN_ASSIGN_OR_RETURN(uint32_t elem8, element_code(b, y));
  KILN_ASSIGN_OR_RETURN(int64_t axis, axis_attribute(b, static_cast<int64_t>(y.shape.size()), 0));
  const std::vector<int64_t> out_strides = kernels::row_major_strides(y.shape);
  int64_t at = 0;
  for (size_t i = 0; i < b.input_count(); ++i) {
    const ConcreteShape& dims = b.input(i).shape;
    CopyView v;
    v.dims = dims;
    v.src_strides = kernels::row_major_strides(dims);
    v.dst_strides = out_strides;
    v.dst_offset = at * out_strides[axis];
    at += dims[axis];
    KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(i));
    KILN_RETURN_IF_ERROR(
        launch_copy(b, x, b.output_operand(0), elem8, v, fmt::format("Concat input {}", i)));
  }
  return ok_status();
}

Status build_split(KernelBuilder& b) {
  const ValueSpec& x = b.input(0);
  KILN_ASSIGN_OR_RETURN(uint32_t elem8, element_code(b, x));
  KILN_ASSIGN_OR_RETURN(int64_t axis, axis_attribute(b, static_cast<int64_t>(x.shape.size()), 0));
  const std::vector<int64_t> in_strides = kernels::row_major_strides(x.shape);
  KILN_ASSIGN_OR_RETURN(Operand src, b.input_operand(0));
  int64_t at = 0;
  for (size_t i = 0; i < b.output_count(); ++i) {
    // The parts' sizes are the outputs' dims along the axis (constant split sizes or an equal
    // split, as the definition inferred them).
    if (b.dispatch().outputs[i] < 0) return unimplemented("Split with an absent output");
    const ConcreteShape& dims = b.output(i).shape;
    CopyView v;
    v.dims = dims;
    v.src_strides = in_strides;
    v.src_offset = at * in_strides[axis];
    v.dst_strides = kernels::row_major_strides(dims);
    at += dims[axis];
    KILN_RETURN_IF_ERROR(
        launch_copy(b, src, b.output_operand(i), elem8, v, fmt::format("Split output {}", i)));
  }
  if (at != x.shape[axis]) return internal_error("Split's outputs do not add up to its input");
  return ok_status();
}

Status build_slice(KernelBuilder& b) {
  const ValueSpec& x = b.input(0);
  KILN_ASSIGN_OR_RETURN(uint32_t elem8, element_code(b, x));
  const ConcreteShape& dims = x.shape;
  const auto rank = static_cast<int64_t>(dims.size());
  std::optional<std::vector<int64_t>> operands[5];
  for (size_t i = 1; i < 5; ++i) {
    if (!b.has_input(i)) continue;
    operands[i] = known_input_ints(b, i);
    if (!operands[i]) {
      return unimplemented("Slice's input {} '{}' is computed at run time", i, b.input(i).name);
    }
  }
  if (!operands[1] || !operands[2]) return internal_error("Slice without starts or ends");
  const std::vector<int64_t>& starts = *operands[1];
  const std::vector<int64_t>& ends = *operands[2];
  const size_t n = starts.size();
  std::vector<int64_t> axes(n);
  for (size_t i = 0; i < n; ++i) axes[i] = static_cast<int64_t>(i);
  if (operands[3]) {
    KILN_ASSIGN_OR_RETURN(axes, kernels::normalize_axes(*operands[3], rank, "input 3 'axes'"));
  }
  const std::vector<int64_t> steps = operands[4] ? *operands[4] : std::vector<int64_t>(n, 1);
  if (ends.size() != n || axes.size() != n || steps.size() != n) {
    return internal_error("Slice operands differ in length");
  }
  const std::vector<int64_t> strides = kernels::row_major_strides(dims);
  CopyView v;
  v.dims = dims;
  v.src_strides = strides;
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = axes[i], step = steps[i], d = dims[a];
    if (step == 0) return internal_error("Slice step 0 passed its checks");
    int64_t s = starts[i], e = ends[i], len = 0;
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      if (e > s) len = static_cast<int64_t>((static_cast<__int128>(e) - s - 1) / step + 1);
    } else if (d == 0) {
      s = 0;
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      if (s > e) len = static_cast<int64_t>((static_cast<__int128>(s) - e - 1) / -step + 1);
    }
    v.dims[a] = len;
    // A dim of 0 or 1 never moves along its stride (which could overflow for a huge step).
    v.src_strides[a] = len <= 1 ? 0 : strides[a] * step;
    v.src_offset += s * strides[a];
  }
  if (v.dims != b.output(0).shape) {
    return internal_error("Slice: computed dims {} differ from the output's {}",
                          shape_to_string(v.dims), shape_to_string(b.output(0).shape));
  }
  v.dst_strides = kernels::row_major_strides(v.dims);
  KILN_ASSIGN_OR_RETURN(Operand src, b.input_operand(0));
  return launch_copy(b, src, b.output_operand(0), elem8, v, "Slice");
}

Status build_gather(KernelBuilder& b) {
  const ValueSpec& data = b.input(0);
  const ValueSpec& indices = b.input(1);
  KILN_ASSIGN_OR_RETURN(uint32_t elem8, element_code(b, data));
  if (indices.dtype != DType::kI32 && indices.dtype != DType::kI64) {
    return internal_error("Gather indices of {} passed its checks", dtype_name(indices.dtype));
  }
  const ConcreteShape& dims = data.shape;
  KILN_ASSIGN_OR_RETURN(int64_t axis, axis_attribute(b, static_cast<int64_t>(dims.size()), 0));
  uint64_t outer = 1, inner = 1, count = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= static_cast<uint64_t>(dims[d]);
  for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) {
    inner *= static_cast<uint64_t>(dims[d]);
  }
  for (int64_t d : indices.shape) count *= static_cast<uint64_t>(d);
  const uint64_t total = outer * count * inner;
  const int64_t axis_size = dims[axis];
  const uint64_t data_count = outer * static_cast<uint64_t>(axis_size) * inner;
  if (total >= (uint64_t{1} << 32) || data_count >= (uint64_t{1} << 32)) {
    return unimplemented("Gather: more elements than the Vulkan kernel's 32-bit indices reach");
  }
  if (count == 0) return ok_status();
  if (total == 0) {
    return unimplemented(
        "Gather with an empty output runs on the CPU, which still checks its {} "
        "indices",
        count);
  }
  KILN_ASSIGN_OR_RETURN(Operand src, b.input_operand(0));
  KILN_ASSIGN_OR_RETURN(Operand idx, b.input_operand(1));
  Operand flag = idx;  // never written when every index is known to be in range
  if (indices.role == ValueRole::kConstant) {
    // Constant indices are checked here: no flag to read back after each run.
    if (indices.constant == nullptr) {
      return invalid_argument("constant '{}' has no data", indices.name);
    }
    for (int64_t j = 0; j < indices.constant->element_count(); ++j) {
      const int64_t value = element_as_int64(*indices.constant, j);
      if (value < -axis_size || value >= axis_size) {
        return unimplemented("Gather index {} is out of range; the CPU reports it", value);
      }
    }
  } else {
    // The definition's error for the first bad index the kernel met: words (element + 1, low,
    // high).
    const ConcreteShape index_dims = indices.shape;
    KILN_ASSIGN_OR_RETURN(
        flag, b.error_flag(3, [axis_size, index_dims](std::span<const uint32_t> w) -> Status {
          const auto value = static_cast<int64_t>((uint64_t{w[2]} << 32) | w[1]);
          StatusOr<int64_t> checked =
              kernels::normalize_index(value, axis_size, 1, "indices",
                                       static_cast<int64_t>(w[0]) - 1, index_dims, "the axis");
          if (!checked.ok()) return checked.status();
          return internal_error("the Gather kernel flagged index {}, which is in range", value);
        }));
  }
  b.describe(fmt::format("vulkan Gather ({} x {} rows of {} {}-byte elements)", outer, count, inner,
                         elem8 != 0 ? 8 : 4));
  return b.launch("gather", {elem8, indices.dtype == DType::kI64 ? 1u : 0u}, total,
                  {src, idx, b.output_operand(0), flag},
                  {static_cast<uint32_t>(total), static_cast<uint32_t>(inner),
                   static_cast<uint32_t>(count), static_cast<uint32_t>(axis_size)});
}

}  // namespace kiln::hal::vulkan
