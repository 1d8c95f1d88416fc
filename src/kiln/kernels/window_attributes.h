// The attributes of Conv and of the pools (MaxPool, AveragePool, GlobalMaxPool,
// GlobalAveragePool) parsed and checked once, for concrete input dims. The ops' definitions
// (spatial.cc) make their reference kernels from them, and backends read them instead of the raw
// attributes: a backend only decides whether it can run what it reads here.
//
// Callers pass dims that the op's infer has accepted (plan_concrete or check_concrete); the
// readers still refuse what they cannot parse, with errors naming the attribute.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"
#include "kiln/kernels/activation.h"
#include "kiln/kernels/conv_geometry.h"

namespace kiln::kernels {

// Conv: X [N, C, spatial...], W [M, C/group, k...]; kiln's fused activation (activation.h).
struct ConvAttributes {
  ConcreteWindow window;
  int64_t group = 1;
  FusedActivation activation;
};
StatusOr<ConvAttributes> read_conv_attributes(const Attributes& attributes,
                                              std::span<const int64_t> x,
                                              std::span<const int64_t> w);

// MaxPool and AveragePool (windows from the attributes) and GlobalMaxPool and GlobalAveragePool
// (one window over all spatial dims, no padding) on X [N, C, spatial...].
struct PoolAttributes {
  bool max = true;  // max, else average
  ConcreteWindow window;
  bool count_include_pad = false;     // AveragePool
  bool column_major_indices = false;  // MaxPool's storage_order = 1 (for its Indices output)
};
StatusOr<PoolAttributes> read_pool_attributes(std::string_view op_type,
                                              const Attributes& attributes,
                                              std::span<const int64_t> x);

}  // namespace kiln::kernels
