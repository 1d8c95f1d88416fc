// Softmax (LOG = 0) and LogSoftmax (LOG = 1) along one axis of a tensor viewed as
// outer x n x inner: one invocation per lane (outer x inner lanes), which reads its n elements
// (stride inner) three times: the maximum (a NaN, once seen, stays), the sum of exp(x - max) in
// index order, then the outputs. NaN propagates as in kiln's definition (kernels/normalize.cc):
// a NaN anywhere in a lane makes the whole lane NaN.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint LOG = 0;

layout(push_constant) uniform Push {
  F32 x;
  F32 y;
  uint base;
  uint lanes;
  uint n;
  uint inner;
} pc;

void main() {
  const uint lane = element_index(pc.base);
  if (lane >= pc.lanes) return;
  const uint start = (lane / pc.inner) * pc.n * pc.inner + lane % pc.inner;
  float m = -1.0 / 0.0;
  for (uint k = 0u; k < pc.n; ++k) {
    const float v = pc.x.v[start + k * pc.inner];
    if (v > m || isnan(v)) m = v;
    if (isnan(m)) break;
  }
  float sum = 0.0;
  for (uint k = 0u; k < pc.n; ++k) sum += exp(pc.x.v[start + k * pc.inner] - m);
  if (LOG == 0u) {
    for (uint k = 0u; k < pc.n; ++k) {
      const uint at = start + k * pc.inner;
      pc.y.v[at] = exp(pc.x.v[at] - m) / sum;
    }
  } else {
    const float shift = m + log(sum);
    for (uint k = 0u; k < pc.n; ++k) {
      const uint at = start + k * pc.inner;
      pc.y.v[at] = pc.x.v[at] - shift;
    }
  }
}
