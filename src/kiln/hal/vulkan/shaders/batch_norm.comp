// BatchNormalization (inference) on f32: y = (x - mean[p]) * a[p] + bias[p], p = (i / size) %
// params (per channel: size = the spatial size; per feature for opset 7's spatial = 0: size 1),
// then kiln's fused ReLU when RELU. a = scale / sqrt(var + epsilon): given precomputed (in float64
// on the host, when scale and var are constants: SCALE_IS_A = 1, var unused) or computed here.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint SCALE_IS_A = 0;
layout(constant_id = 1) const uint RELU = 0;

layout(push_constant) uniform Push {
  F32 x;
  F32 y;
  F32 scale;  // or a
  F32 bias;
  F32 mean;
  F32 var;
  uint base;
  uint n;
  uint size;
  uint params;
  float epsilon;
} pc;

void main() {
  const uint i = element_index(pc.base);
  if (i >= pc.n) return;
  const uint p = (i / pc.size) % pc.params;
  const float a = SCALE_IS_A != 0u ? pc.scale.v[p] : pc.scale.v[p] / sqrt(pc.var.v[p] + pc.epsilon);
  float v = (pc.x.v[i] - pc.mean.v[p]) * a + pc.bias.v[p];
  if (RELU != 0u && v < 0.0) v = 0.0;
  pc.y.v[i] = v;
}
