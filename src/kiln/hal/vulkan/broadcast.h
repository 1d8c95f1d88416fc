// Numpy broadcasting for the Vulkan elementwise kernels (binary.comp, compare.comp, where.comp):
// an operand's element strides over the output's dims, aligned from the right, 0 along the dims
// it is broadcast over. The shaders take up to kMaxBroadcastRank dims.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/base/tensor.h"

namespace kiln::hal::vulkan {

inline constexpr size_t kMaxBroadcastRank = 6;

// kMaxBroadcastRank strides of `in` over `out` (entries past out's rank are 0). `in` has been
// checked broadcastable to `out` by the op definition; out.size() <= kMaxBroadcastRank.
inline std::vector<uint32_t> broadcast_strides(const ConcreteShape& in, const ConcreteShape& out) {
  std::vector<uint32_t> strides(kMaxBroadcastRank, 0);
  uint64_t stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t from_right = in.size() - 1 - k;
    const size_t d = out.size() - 1 - k;
    strides[d] = in[from_right] == 1 ? 0 : static_cast<uint32_t>(stride);
    stride *= static_cast<uint64_t>(in[from_right]);
  }
  return strides;
}

// out's dims, padded with 1 to kMaxBroadcastRank entries.
inline std::vector<uint32_t> broadcast_dims(const ConcreteShape& out) {
  std::vector<uint32_t> dims(kMaxBroadcastRank, 1);
  for (size_t d = 0; d < out.size(); ++d) dims[d] = static_cast<uint32_t>(out[d]);
  return dims;
}

}  // namespace kiln::hal::vulkan
