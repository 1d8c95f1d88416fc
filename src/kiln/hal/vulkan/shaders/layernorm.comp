// LayerNormalization's Y on rows of `block` elements (the dims from the axis on): one workgroup
// per row. Invocation t sums elements t, t + 256, ... and the partials combine in a fixed tree in
// shared memory: the mean, then the variance as the mean of squared deviations (two passes, as
// kernels/normalize.cc), then y = (x - mean) / sqrt(var + epsilon) * scale + bias. A row's result
// does not depend on the other rows. Scale and bias are read with a stride per element (1: one
// per element of the block; 0: one value).
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint HAS_BIAS = 0;

layout(push_constant) uniform Push {
  F32 x;
  F32 scale;
  F32 bias;
  F32 y;
  uint base;  // the launch's first row
  uint block;
  uint scale_stride;
  uint bias_stride;
  float epsilon;
} pc;

shared float part[256];

float sum_of(float v) {
  const uint t = gl_LocalInvocationID.x;
  part[t] = v;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1u) {
    if (t < s) part[t] += part[t + s];
    barrier();
  }
  const float r = part[0];
  barrier();
  return r;
}

void main() {
  const uint start = (pc.base + gl_WorkGroupID.x) * pc.block;
  const uint t = gl_LocalInvocationID.x;
  float acc = 0.0;
  for (uint j = t; j < pc.block; j += 256u) acc += pc.x.v[start + j];
  const float mean = sum_of(acc) / float(pc.block);
  acc = 0.0;
  for (uint j = t; j < pc.block; j += 256u) {
    const float d = pc.x.v[start + j] - mean;
    acc += d * d;
  }
  const float var = sum_of(acc) / float(pc.block);
  const float inv = 1.0 / sqrt(var + pc.epsilon);
  for (uint j = t; j < pc.block; j += 256u) {
    float v = (pc.x.v[start + j] - mean) * inv * pc.scale.v[j * pc.scale_stride];
    if (HAS_BIAS != 0u) v += pc.bias.v[j * pc.bias_stride];
    pc.y.v[start + j] = v;
  }
}
