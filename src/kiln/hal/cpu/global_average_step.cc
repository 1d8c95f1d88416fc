#include "kiln/hal/cpu/global_average_step.h"

#include <algorithm>

#include "kiln/hal/cpu/cpu_isa.h"

namespace kiln::hal::cpu {
namespace {

constexpr int64_t kChunkFloats = 16384;  // about one chunk of pixels, over all channels
constexpr int64_t kPlainGroup = 16;      // plain runs summed side by side

// acc[j] = the sum of base[p * pixel_stride + j * channel_stride] over p < pixels, in order, for
// j < count: one lane per channel, which the compiler vectorizes across channels (for the
// function's target) where they are contiguous, without reordering any channel's sum.
template <int64_t ChannelStride>
inline __attribute__((always_inline)) void sum_pixels(const float* base, int64_t pixels,
                                                      int64_t pixel_stride, int64_t channel_stride,
                                                      int64_t count, float* acc) {
  const int64_t cs = ChannelStride > 0 ? ChannelStride : channel_stride;
  std::fill(acc, acc + count, 0.0f);
  for (int64_t p = 0; p < pixels; ++p) {
    const float* row = base + p * pixel_stride;
    for (int64_t j = 0; j < count; ++j) acc[j] += row[j * cs];
  }
}

using SumFn = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, float*);

template <int64_t ChannelStride>
__attribute__((target("avx512f,avx2"))) void sum_avx512(const float* base, int64_t pixels,
                                                        int64_t pixel_stride,
                                                        int64_t channel_stride, int64_t count,
                                                        float* acc) {
  sum_pixels<ChannelStride>(base, pixels, pixel_stride, channel_stride, count, acc);
}

template <int64_t ChannelStride>
__attribute__((target("avx2"))) void sum_avx2(const float* base, int64_t pixels,
                                              int64_t pixel_stride, int64_t channel_stride,
                                              int64_t count, float* acc) {
  sum_pixels<ChannelStride>(base, pixels, pixel_stride, channel_stride, count, acc);
}

// The kernel for channels `channel_stride` apart (1: side by side; else plain runs).
SumFn sum_function(int64_t channel_stride) {
  static const bool avx512 = best_isa() == Isa::kAvx512;
  if (channel_stride == 1) return avx512 ? sum_avx512<1> : sum_avx2<1>;
  return avx512 ? sum_avx512<0> : sum_avx2<0>;
}

}  // namespace

std::optional<PlaneWalk> plane_walk(const dnnl_desc& layout) {
  const dnnl_memory_desc_t& md = layout.data;
  const int rank = md.ndims;
  if (md.format_kind != dnnl_blocked || rank < 3 || md.offset0 != 0 ||
      layout.data_type() != dnnl::memory::data_type::f32) {
    return std::nullopt;
  }
  const dnnl_blocking_desc_t& blocking = md.format_desc.blocking;
  const dnnl_dim_t* strides = blocking.strides;
  PlaneWalk w;
  w.samples = md.dims[0];
  w.channels = md.dims[1];
  w.pixels = 1;
  for (int d = 2; d < rank; ++d) w.pixels *= md.dims[d];
  // The spatial dims in order and dense among themselves.
  for (int d = 2; d + 1 < rank; ++d) {
    if (md.padded_dims[d] != md.dims[d] || strides[d] != strides[d + 1] * md.dims[d + 1]) {
      return std::nullopt;
    }
  }
  if (md.padded_dims[rank - 1] != md.dims[rank - 1] || md.padded_dims[0] != md.dims[0]) {
    return std::nullopt;
  }
  w.pixel_stride = strides[rank - 1];
  w.sample_stride = strides[0];
  if (blocking.inner_nblks == 1 && blocking.inner_idxs[0] == 1) {
    // Blocked by channels: blocks of `group` channels side by side at each pixel.
    w.group = blocking.inner_blks[0];
    if (w.pixel_stride != w.group || strides[1] != w.pixels * w.group) return std::nullopt;
    w.group_stride = strides[1];
    w.channel_stride = 1;
    return w;
  }
  if (blocking.inner_nblks != 0 || md.padded_dims[1] != md.dims[1]) return std::nullopt;
  if (strides[1] == 1 && w.pixel_stride == w.channels) {  // channels last
    w.group = std::max<int64_t>(1, w.channels);
    w.group_stride = 0;
    w.channel_stride = 1;
    return w;
  }
  if (w.pixel_stride == 1 && strides[1] == w.pixels) {  // plain
    w.group = kPlainGroup;
    w.channel_stride = w.pixels;
    w.group_stride = kPlainGroup * w.pixels;
    return w;
  }
  return std::nullopt;
}

int64_t GlobalAverageStep::chunk_pixels(int64_t channels) {
  return std::max<int64_t>(1, kChunkFloats / std::max<int64_t>(1, channels));
}

int64_t GlobalAverageStep::partial_floats(const PlaneWalk& w) {
  const int64_t chunk = chunk_pixels(w.channels);
  return w.samples * ((w.pixels + chunk - 1) / chunk) * w.channels;
}

Status GlobalAverageStep::run(const ExecContext& ctx) {
  const PlaneWalk& w = walk_;
  if (w.samples <= 0 || w.channels <= 0 || w.pixels <= 0) return ok_status();
  const auto* x = reinterpret_cast<const float*>(ctx.resolve(x_));
  auto* partials = reinterpret_cast<float*>(ctx.resolve(partials_));
  auto* y = reinterpret_cast<float*>(ctx.resolve(y_));
  const int64_t chunk = chunk_pixels(w.channels), chunks = (w.pixels + chunk - 1) / chunk;
  const int64_t groups = (w.channels + w.group - 1) / w.group;
  const int64_t jobs = w.samples * groups * chunks;
  const SumFn sum = sum_function(w.channel_stride);
  // Jobs in order of sample, then group, then chunk: a team's threads take neighbouring pixels.
#pragma omp parallel for schedule(static) if (jobs > 1)
  for (int64_t j = 0; j < jobs; ++j) {
    const int64_t n = j / (groups * chunks), g = j / chunks % groups, k = j % chunks;
    const int64_t first = k * chunk, c0 = g * w.group;
    sum(x + n * w.sample_stride + g * w.group_stride + first * w.pixel_stride,
        std::min(chunk, w.pixels - first), w.pixel_stride, w.channel_stride,
        std::min(w.group, w.channels - c0), partials + (n * chunks + k) * w.channels + c0);
  }
  const float divisor = static_cast<float>(w.pixels);
  for (int64_t n = 0; n < w.samples; ++n) {
    const float* first = partials + n * chunks * w.channels;
    float* out = y + n * w.channels;
    std::copy(first, first + w.channels, out);
    for (int64_t k = 1; k < chunks; ++k) {
      const float* part = first + k * w.channels;
      for (int64_t c = 0; c < w.channels; ++c) out[c] += part[c];
    }
    for (int64_t c = 0; c < w.channels; ++c) out[c] /= divisor;
  }
  return ok_status();
}

}  // namespace kiln::hal::cpu
