#include "kiln/hal/cpu/step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string_view>

namespace kiln::hal::cpu {
namespace {

bool kind_gives_same_bits_at_any_team_size(const dnnl::primitive& primitive) {
  using kind = dnnl::primitive::kind;
  switch (primitive.get_kind()) {
    case kind::reorder:
    case kind::concat:
    case kind::sum:
    case kind::eltwise:
    case kind::binary:
    case kind::pooling:
    case kind::softmax:
    case kind::softmax_v2:
    case kind::logsoftmax:
    case kind::pooling_v2:
    case kind::layer_normalization:
    case kind::batch_normalization:
    case kind::lrn:
    case kind::shuffle:
    case kind::resampling:
    case kind::prelu: return true;
    case kind::convolution: {
      const char* impl = nullptr;
      if (dnnl_primitive_desc_query(primitive.get_primitive_desc(), dnnl_query_impl_info_str, 0,
                                    &impl) != dnnl_success ||
          impl == nullptr) {
        return false;
      }
      return std::string_view(impl).find("gemm") == std::string_view::npos;
    }
    default: return false;
  }
}

}  // namespace

PrimitiveStep::PrimitiveStep(std::string label, const dnnl::engine& engine,
                             dnnl::primitive primitive, int64_t repeat)
    : label_(std::move(label)),
      engine_(engine),
      primitive_(std::move(primitive)),
      repeat_(repeat),
      same_bits_at_any_team_size_(kind_gives_same_bits_at_any_team_size(primitive_)) {}

void PrimitiveStep::bind(int arg, const dnnl::memory::desc& desc, const BufferRef& ref,
                         size_t sample_stride_bytes) {
  dnnl::memory memory(
      desc, engine_,
      ref.kind == BufferRef::Kind::kFixed ? static_cast<void*>(ref.fixed) : DNNL_MEMORY_NONE);
  const dnnl_memory_desc_t& md = desc.data;
  bool padded = md.offset0 != 0;
  for (int i = 0; i < md.ndims; ++i) padded |= md.padded_dims[i] != md.dims[i];
  args_.push_back(dnnl_exec_arg_t{arg, memory.get()});
  bindings_.push_back(Binding{std::move(memory), ref, sample_stride_bytes, padded, nullptr});
}

Status PrimitiveStep::run(const ExecContext& ctx) {
  for (int64_t r = 0; r < repeat_; ++r) {
    for (Binding& b : bindings_) {
      // A fixed buffer stays bound, unless it advances per sample (a batched constant B that
      // was converted into the weight cache).
      if (b.ref.kind == BufferRef::Kind::kFixed && b.sample_stride == 0) continue;
      std::byte* p = ctx.resolve(b.ref) + static_cast<size_t>(r) * b.sample_stride;
      if (p == b.bound && !b.padded) continue;
      if (dnnl_memory_set_data_handle_v2(b.memory.get(), p, ctx.stream) != dnnl_success) {
        return internal_error("{}: oneDNN could not bind a buffer", label_);
      }
      b.bound = p;
    }
    dnnl_status_t status = dnnl_primitive_execute(primitive_.get(), ctx.stream,
                                                  static_cast<int>(args_.size()), args_.data());
    if (status != dnnl_success) {
      return internal_error("{}: oneDNN execution failed (status {})", label_,
                            static_cast<int>(status));
    }
  }
  return ok_status();
}

Status CopyStep::run(const ExecContext& ctx) {
  const std::byte* from = ctx.resolve(from_);
  std::byte* to = ctx.resolve(to_);
  if (from == to) return ok_status();
  // Chunks of at least 256 KiB per thread; small copies stay on one thread.
  constexpr size_t kChunk = size_t{1} << 18;
  const int64_t chunks = static_cast<int64_t>((bytes_ + kChunk - 1) / kChunk);
  if (chunks <= 1) {
    std::memcpy(to, from, bytes_);
    return ok_status();
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t begin = static_cast<size_t>(c) * kChunk;
    std::memcpy(to + begin, from + begin, std::min(kChunk, bytes_ - begin));
  }
  return ok_status();
}

Status FillStep::run(const ExecContext& ctx) {
  std::memset(ctx.resolve(to_), static_cast<int>(value_), bytes_);
  return ok_status();
}

}  // namespace kiln::hal::cpu
