// LayerNormalization's Y on rows of `block` elements (the dims from the axis on): one invocation
// per row computes the mean, then the variance as the mean of squared deviations (two passes, as
// kernels/normalize.cc), then y = (x - mean) / sqrt(var + epsilon) * scale + bias. Scale and bias
// are read with a stride per element (1: one per element of the block; 0: one value).
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint HAS_BIAS = 0;

layout(push_constant) uniform Push {
  F32 x;
  F32 scale;
  F32 bias;
  F32 y;
  uint base;
  uint rows;
  uint block;
  uint scale_stride;
  uint bias_stride;
  float epsilon;
} pc;

void main() {
  const uint row = element_index(pc.base);
  if (row >= pc.rows) return;
  const uint start = row * pc.block;
  float mean = 0.0;
  for (uint j = 0u; j < pc.block; ++j) mean += pc.x.v[start + j];
  mean /= float(pc.block);
  float var = 0.0;
  for (uint j = 0u; j < pc.block; ++j) {
    const float d = pc.x.v[start + j] - mean;
    var += d * d;
  }
  var /= float(pc.block);
  const float inv = 1.0 / sqrt(var + pc.epsilon);
  for (uint j = 0u; j < pc.block; ++j) {
    float v = (pc.x.v[start + j] - mean) * inv * pc.scale.v[j * pc.scale_stride];
    if (HAS_BIAS != 0u) v += pc.bias.v[j * pc.bias_stride];
    pc.y.v[start + j] = v;
  }
}
