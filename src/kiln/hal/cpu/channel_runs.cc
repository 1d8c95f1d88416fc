#include "kiln/hal/cpu/channel_runs.h"

namespace kiln::hal::cpu {

std::optional<ChannelRuns> channel_runs(const dnnl_desc& layout) {
  const std::optional<dnnl_dims> strides = dense_strides(layout);
  const dnnl_dims dims = layout.dims();
  if (!strides || dims.size() < 2 || layout.data_type() != dnnl::memory::data_type::f32) {
    return std::nullopt;
  }
  int64_t total = 1, inner = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    total *= dims[d];
    if (d >= 2) inner *= dims[d];
  }
  // dense_strides promises a permutation of the dims without gaps.
  if (total == 0 || static_cast<int64_t>(layout.get_size()) != total * 4) return std::nullopt;
  const int64_t channels = dims[1];
  // Each sample's elements one contiguous block, samples in order.
  if (dims[0] != 1 && (*strides)[0] != total / dims[0]) return std::nullopt;
  if (channels == 1) return ChannelRuns{ChannelRuns::Order::kChannelOuter, 1, dims[0], inner};
  if ((*strides)[1] == 1) {
    return ChannelRuns{ChannelRuns::Order::kChannelInnermost, channels, total / channels, channels};
  }
  // Each channel's remaining dims contiguous.
  if ((*strides)[1] == inner) {
    return ChannelRuns{ChannelRuns::Order::kChannelOuter, channels, total / inner, inner};
  }
  return std::nullopt;
}

}  // namespace kiln::hal::cpu
