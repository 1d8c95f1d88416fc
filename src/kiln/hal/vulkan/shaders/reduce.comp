// ReduceSum (OP 0), ReduceMean (1), ReduceMax (2), ReduceMin (3) on f32 over a tensor viewed as
// kept and reduced axes (kernels/reduce_geometry.h: size-1 dims dropped, runs merged, up to 4 of
// each). One invocation per output element reduces its inputs sequentially in row-major order of
// the reduced axes, as the definition does (kernels/reduce.cc): results do not depend on the
// other axes' sizes. Empty reductions give 0 (Sum), NaN (Mean), -inf (Max), +inf (Min); Max and
// Min propagate NaN.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;

layout(push_constant) uniform Push {
  F32 x;
  F32 y;
  uint base;
  uint outputs;
  uint red_count;
  uint kept_rank;
  uint red_rank;
  uint kept_dims[4];
  uint kept_strides[4];
  uint red_dims[4];
  uint red_strides[4];
} pc;

void main() {
  const uint o = element_index(pc.base);
  if (o >= pc.outputs) return;
  uint start = 0u;
  uint rest = o;
  for (int d = int(pc.kept_rank) - 1; d >= 0; --d) {
    start += (rest % pc.kept_dims[d]) * pc.kept_strides[d];
    rest /= pc.kept_dims[d];
  }
  float acc = OP == 2u ? -1.0 / 0.0 : (OP == 3u ? 1.0 / 0.0 : 0.0);
  for (uint r = 0u; r < pc.red_count; ++r) {
    uint at = start;
    uint q = r;
    for (int d = int(pc.red_rank) - 1; d >= 0; --d) {
      at += (q % pc.red_dims[d]) * pc.red_strides[d];
      q /= pc.red_dims[d];
    }
    const float e = pc.x.v[at];
    if (OP == 2u) {
      if (isnan(e) || e > acc) acc = e;
    } else if (OP == 3u) {
      if (isnan(e) || e < acc) acc = e;
    } else {
      acc += e;
    }
  }
  if (OP == 1u) acc /= float(pc.red_count);
  pc.y.v[o] = acc;
}
