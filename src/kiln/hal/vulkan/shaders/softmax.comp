// Softmax (LOG = 0) and LogSoftmax (LOG = 1) along one axis of a tensor viewed as
// outer x n x inner, in two forms chosen from the axis' place (never from the batch):
//   ROWS = 1 (inner = 1, the usual last axis): one workgroup per row; invocation t reduces
//     elements t, t + 256, ... and the 256 partials combine in a fixed tree in shared memory.
//   ROWS = 0: one invocation per lane (outer x inner lanes) reading its n elements (stride inner)
//     in index order.
// Either way: the maximum first (a NaN, once seen, stays), the sum of exp(x - max), then the
// outputs, so a NaN anywhere in a lane makes the whole lane NaN, as kiln's definition
// (kernels/normalize.cc); and a row's result does not depend on the other rows.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint LOG = 0;
layout(constant_id = 1) const uint ROWS = 0;

layout(push_constant) uniform Push {
  F32 x;
  F32 y;
  uint base;   // ROWS = 0: the launch's first lane; ROWS = 1: its first row
  uint lanes;
  uint n;
  uint inner;
} pc;

shared float part[256];

float max_nan(float m, float v) { return (v > m || isnan(v)) ? v : m; }

// The workgroup's combination of every invocation's `v` (max or sum), in a fixed order.
float combine(float v, bool is_max) {
  const uint t = gl_LocalInvocationID.x;
  part[t] = v;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1u) {
    if (t < s) part[t] = is_max ? max_nan(part[t], part[t + s]) : part[t] + part[t + s];
    barrier();
  }
  const float r = part[0];
  barrier();
  return r;
}

void write_lane(uint start, uint stride, uint first, uint step, float m, float sum) {
  const float shift = m + log(sum);
  for (uint k = first; k < pc.n; k += step) {
    const uint at = start + k * stride;
    pc.y.v[at] = LOG == 0u ? exp(pc.x.v[at] - m) / sum : pc.x.v[at] - shift;
  }
}

void main() {
  if (ROWS != 0u) {
    const uint start = (pc.base + gl_WorkGroupID.x) * pc.n;
    const uint t = gl_LocalInvocationID.x;
    float m = -1.0 / 0.0;
    for (uint k = t; k < pc.n; k += 256u) m = max_nan(m, pc.x.v[start + k]);
    m = combine(m, true);
    float sum = 0.0;
    for (uint k = t; k < pc.n; k += 256u) sum += exp(pc.x.v[start + k] - m);
    sum = combine(sum, false);
    write_lane(start, 1u, t, 256u, m, sum);
    return;
  }
  const uint lane = element_index(pc.base);
  if (lane >= pc.lanes) return;
  const uint start = (lane / pc.inner) * pc.n * pc.inner + lane % pc.inner;
  float m = -1.0 / 0.0;
  for (uint k = 0u; k < pc.n; ++k) m = max_nan(m, pc.x.v[start + k * pc.inner]);
  float sum = 0.0;
  for (uint k = 0u; k < pc.n; ++k) sum += exp(pc.x.v[start + k * pc.inner] - m);
  write_lane(start, pc.inner, 0u, 1u, m, sum);
}
