#include "kiln/hal/cpu/dnnl_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace kiln::hal::cpu {

std::optional<dnnl::memory::data_type> stored_data_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return dnnl::memory::data_type::f32;
    case DType::kF16: return dnnl::memory::data_type::f16;
    case DType::kBF16: return dnnl::memory::data_type::bf16;
    default: return std::nullopt;
  }
}

dnnl_dims to_dnnl_dims(std::span<const int64_t> shape) {
  if (shape.empty()) return {1};
  return dnnl_dims(shape.begin(), shape.end());
}

dnnl_desc plain_desc(std::span<const int64_t> shape, dnnl::memory::data_type type) {
  const dnnl_dims dims = to_dnnl_dims(shape);
  dnnl_dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;)
    strides[i - 1] = strides[i] * std::max<int64_t>(dims[i], 1);
  return dnnl_desc(dims, type, strides);
}

dnnl_desc strided_desc(const dnnl_dims& dims, const dnnl_dims& strides,
                       dnnl::memory::data_type type) {
  return dnnl_desc(dims, type, strides);
}

dnnl_desc with_data_type(const dnnl_desc& desc, dnnl::memory::data_type type) {
  dnnl_desc out = desc;
  out.data.data_type = static_cast<dnnl_data_type_t>(type);
  return out;
}

bool is_plain(const dnnl_desc& desc) {
  if (desc.data.format_kind != dnnl_blocked || desc.data.ndims == 0) return false;
  return desc == plain_desc(desc.dims(), desc.data_type());
}

bool has_padding(const dnnl_desc& layout) {
  int64_t elements = 1;
  for (int64_t d : layout.dims()) elements *= d;
  return static_cast<size_t>(elements) * dnnl::memory::data_type_size(layout.data_type()) !=
         layout.get_size();
}

std::optional<dnnl_dims> dense_strides(const dnnl_desc& desc) {
  const dnnl_memory_desc_t& md = desc.data;
  if (md.format_kind != dnnl_blocked || md.ndims < 1 || md.offset0 != 0 ||
      md.format_desc.blocking.inner_nblks != 0 || has_padding(desc)) {
    return std::nullopt;
  }
  for (int i = 0; i < md.ndims; ++i) {
    if (md.padded_dims[i] != md.dims[i]) return std::nullopt;
  }
  return dnnl_dims(md.format_desc.blocking.strides, md.format_desc.blocking.strides + md.ndims);
}

namespace {

// `desc` with dim 0 set to 1, its strides kept.
dnnl_desc with_one_sample(const dnnl_desc& desc) {
  dnnl_desc one = desc;
  one.data.dims[0] = 1;
  one.data.padded_dims[0] = 1;
  return one;
}

}  // namespace

std::optional<size_t> sample_stride_bytes(const dnnl_desc& desc) {
  const dnnl_memory_desc_t& md = desc.data;
  if (md.format_kind != dnnl_blocked || md.ndims < 1 || md.offset0 != 0) return std::nullopt;
  const dnnl_blocking_desc_t& blk = md.format_desc.blocking;
  for (int i = 0; i < blk.inner_nblks; ++i) {
    if (blk.inner_idxs[i] == 0) return std::nullopt;
  }
  if (md.padded_dims[0] != md.dims[0]) return std::nullopt;
  // A sample is one contiguous block exactly when dim 0's stride covers everything else.
  const size_t sample_bytes = with_one_sample(desc).get_size();
  const size_t stride_bytes =
      static_cast<size_t>(blk.strides[0]) * dnnl_data_type_size(md.data_type);
  if (stride_bytes != sample_bytes) return std::nullopt;
  return stride_bytes;
}

std::optional<dnnl_desc> one_sample_layout(const dnnl_desc& desc) {
  if (!sample_stride_bytes(desc)) return std::nullopt;
  return with_one_sample(desc);
}

StatusOr<dnnl_desc> with_batch(const dnnl_desc& one_sample, int64_t batch) {
  if (one_sample.data.ndims < 1 || one_sample.data.dims[0] != 1 ||
      !sample_stride_bytes(one_sample)) {
    return internal_error("layout {} does not store samples contiguously", describe(one_sample));
  }
  dnnl_desc out = one_sample;
  out.data.dims[0] = batch;
  out.data.padded_dims[0] = batch;
  return out;
}

int64_t element_offset(const dnnl_desc& desc, std::span<const int64_t> index) {
  const dnnl_memory_desc_t& md = desc.data;
  const dnnl_blocking_desc_t& blk = md.format_desc.blocking;
  // Outer blocks by the strides; inside a block, the inner blocks from the innermost out (a dim
  // may be blocked more than once, e.g. 8i16o2i).
  int64_t block[DNNL_MAX_NDIMS];
  std::fill(std::begin(block), std::end(block), int64_t{1});
  for (int b = 0; b < blk.inner_nblks; ++b) block[blk.inner_idxs[b]] *= blk.inner_blks[b];
  int64_t offset = md.offset0;
  for (int d = 0; d < md.ndims; ++d) offset += index[d] / block[d] * blk.strides[d];
  int64_t below[DNNL_MAX_NDIMS];
  for (int d = 0; d < md.ndims; ++d) below[d] = 1;
  int64_t step = 1;
  for (int b = blk.inner_nblks; b-- > 0;) {
    const int d = static_cast<int>(blk.inner_idxs[b]);
    offset += index[d] / below[d] % blk.inner_blks[b] * step;
    below[d] *= blk.inner_blks[b];
    step *= blk.inner_blks[b];
  }
  return offset;
}

namespace {

std::string describe_layout(const dnnl_desc& desc) {
  const dnnl_memory_desc_t& md = desc.data;
  std::string dims;
  for (int i = 0; i < md.ndims; ++i) dims += fmt::format("{}{}", i ? "x" : "", md.dims[i]);
  if (md.format_kind != dnnl_blocked) return fmt::format("any {}", dims);
  if (is_plain(desc)) return fmt::format("plain {}", dims);
  const dnnl_blocking_desc_t& blk = md.format_desc.blocking;
  // Outer dims ordered by decreasing stride, then inner blocks: oneDNN's tag notation.
  std::string order;
  bool used[DNNL_MAX_NDIMS] = {};
  for (int k = 0; k < md.ndims; ++k) {
    int best = -1;
    for (int i = 0; i < md.ndims; ++i) {
      if (!used[i] && (best < 0 || blk.strides[i] > blk.strides[best])) best = i;
    }
    used[best] = true;
    bool blocked = false;
    for (int b = 0; b < blk.inner_nblks; ++b) blocked |= blk.inner_idxs[b] == best;
    order += static_cast<char>((blocked ? 'A' : 'a') + best);
  }
  for (int b = 0; b < blk.inner_nblks; ++b) {
    order += fmt::format("{}{}", blk.inner_blks[b], static_cast<char>('a' + blk.inner_idxs[b]));
  }
  return fmt::format("{} {}", order, dims);
}

}  // namespace

std::string describe_data_type(dnnl::memory::data_type type) {
  switch (type) {
    case dnnl::memory::data_type::f32: return "f32";
    case dnnl::memory::data_type::f16: return "f16";
    case dnnl::memory::data_type::bf16: return "bf16";
    case dnnl::memory::data_type::s32: return "s32";
    case dnnl::memory::data_type::s8: return "s8";
    case dnnl::memory::data_type::u8: return "u8";
    default: return fmt::format("data type {}", static_cast<int>(type));
  }
}

std::string describe(const dnnl_desc& desc) {
  if (desc.data_type() == dnnl::memory::data_type::f32) return describe_layout(desc);
  return describe_data_type(desc.data_type()) + " " + describe_layout(desc);
}

std::string impl_name(const dnnl::primitive_desc_base& pd) {
  const char* name = nullptr;
  if (dnnl_primitive_desc_query(pd.get(), dnnl_query_impl_info_str, 0, &name) != dnnl_success ||
      name == nullptr) {
    return "unknown";
  }
  return name;
}

bool sums_into_destination(const dnnl::primitive_desc_base& pd) {
  // A temporary attribute would free the post-ops the view reads (oneDNN 2.6's get_post_ops()
  // returns a non-owning handle).
  const dnnl::primitive_attr attr = pd.get_primitive_attr();
  const dnnl::post_ops ops = attr.get_post_ops();
  for (int i = 0; i < ops.len(); ++i) {
    if (ops.kind(i) == dnnl::primitive::kind::sum) return true;
  }
  return false;
}

bool reduction_may_depend_on_batch(const std::string& impl) {
  return impl.find("gemm") != std::string::npos && impl.rfind("brg", 0) != 0;
}

bool conv_blocking_may_span_images(const std::string& impl) {
  return impl.rfind("brgconv", 0) == 0;
}

bool conv_reduction_may_depend_on_batch(const std::string& impl) {
  return reduction_may_depend_on_batch(impl) || conv_blocking_may_span_images(impl);
}

bool is_reference_impl(const std::string& impl) { return impl.rfind("ref", 0) == 0; }

bool dnnl_allows_avx512() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx: return true;
    default: return false;
  }
}

// `dims` in the channel blocking `blocked` has (nChw8c, nChw16c and their 3-D/5-D kin), or nullopt
// when `blocked` is not such a layout.
std::optional<dnnl_desc> alike_blocked(const dnnl_desc& blocked, const dnnl_dims& dims) {
  using tag = dnnl::memory::format_tag;
  const size_t rank = blocked.dims().size();
  if (dims.size() != rank) return std::nullopt;
  std::vector<tag> tags;
  if (rank == 3) tags = {tag::aBc8b, tag::aBc16b};
  if (rank == 4) tags = {tag::aBcd8b, tag::aBcd16b};
  if (rank == 5) tags = {tag::aBcde8b, tag::aBcde16b};
  for (tag t : tags) {
    if (dnnl_desc(blocked.dims(), blocked.data_type(), t) == blocked) {
      return dnnl_desc(dims, blocked.data_type(), t);
    }
  }
  return std::nullopt;
}

}  // namespace kiln::hal::cpu
