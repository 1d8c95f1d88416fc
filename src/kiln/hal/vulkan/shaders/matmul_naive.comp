// The plain matrix product, one invocation per output element reading A and B from memory: the
// baseline the tiled kernel (matmul.comp) is measured against (bench/vulkan_matmul.cc) and checked
// against in tests. Same operands and parameters as matmul.comp, plus the launch's first element.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint HAS_C = 0;

layout(push_constant) uniform Push {
  F32 a;
  F32 b;
  F32 c;
  F32 y;
  uint base;
  uint m;
  uint n;
  uint k;
  uint a_rs, a_cs, a_bs;
  uint b_rs, b_cs, b_bs;
  uint c_rs, c_cs;
  float alpha;
  float beta;
  uint total;
} pc;

void main() {
  const uint i = element_index(pc.base);
  if (i >= pc.total) return;
  const uint col = i % pc.n;
  const uint row = (i / pc.n) % pc.m;
  const uint batch = i / (pc.n * pc.m);
  const uint a_at = batch * pc.a_bs + row * pc.a_rs;
  const uint b_at = batch * pc.b_bs + col * pc.b_cs;
  float acc = 0.0;
  for (uint kk = 0u; kk < pc.k; ++kk) acc += pc.a.v[a_at + kk * pc.a_cs] * pc.b.v[b_at + kk * pc.b_rs];
  float v = acc * pc.alpha;
  if (HAS_C != 0u) v += pc.beta * pc.c.v[row * pc.c_rs + col * pc.c_cs];
  pc.y.v[i] = v;
}
