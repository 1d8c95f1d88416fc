// Tiled batched matrix product: y[b] (M x N, row-major) = alpha * A'[b] B'[b] (+ beta * C), every
// operand addressed through element strides (row, column, batch), so transposes, 1-D operands and
// broadcast batches (batch stride 0) need no copies. A workgroup of 16 x 16 invocations computes a
// 64 x 64 tile of y, staging 16-deep K-slabs of A and B in shared memory (2 x 16 x 65 floats); each
// invocation accumulates a 4 x 4 register block (rows ty + 16r, columns tx + 16c).
//
// Accumulation order: every output element sums its K products in increasing k, one product at a
// time, whatever M, N or the batch count (batch invariance: no split-K, no size-chosen variants).
// Out-of-range elements of a slab are 0 and only reach outputs that are not stored, or add 0.
#version 450
#include "common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const uint HAS_C = 0;

layout(push_constant) uniform Push {
  F32 a;
  F32 b;
  F32 c;
  F32 y;
  uint m;
  uint n;
  uint k;
  uint a_rs, a_cs, a_bs;
  uint b_rs, b_cs, b_bs;
  uint c_rs, c_cs;
  float alpha;
  float beta;
} pc;

const uint TILE = 64;
const uint SLAB = 16;
const uint PAD = TILE + 1;
shared float as_[SLAB * PAD];
shared float bs_[SLAB * PAD];

void main() {
  const uint tx = gl_LocalInvocationID.x;
  const uint ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16u + tx;
  const uint row0 = gl_WorkGroupID.y * TILE;
  const uint col0 = gl_WorkGroupID.x * TILE;
  const uint batch = gl_WorkGroupID.z;
  const uint a_base = batch * pc.a_bs;
  const uint b_base = batch * pc.b_bs;
  float acc[4][4];
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) acc[r][c] = 0.0;

  for (uint k0 = 0u; k0 < pc.k; k0 += SLAB) {
    for (uint l = 0u; l < 4u; ++l) {
      const uint e = tid + 256u * l;
      // A: 64 rows x 16 k, consecutive invocations along k.
      const uint am = e / SLAB, ak = e % SLAB;
      const uint gm = row0 + am, gk = k0 + ak;
      as_[ak * PAD + am] = (gm < pc.m && gk < pc.k) ? pc.a.v[a_base + gm * pc.a_rs + gk * pc.a_cs] : 0.0;
      // B: 16 k x 64 columns, consecutive invocations along n.
      const uint bk = e / TILE, bn = e % TILE;
      const uint gk2 = k0 + bk, gn = col0 + bn;
      bs_[bk * PAD + bn] = (gk2 < pc.k && gn < pc.n) ? pc.b.v[b_base + gk2 * pc.b_rs + gn * pc.b_cs] : 0.0;
    }
    barrier();
    for (uint kk = 0u; kk < SLAB; ++kk) {
      float av[4], bv[4];
      for (uint r = 0u; r < 4u; ++r) av[r] = as_[kk * PAD + ty + 16u * r];
      for (uint c = 0u; c < 4u; ++c) bv[c] = bs_[kk * PAD + tx + 16u * c];
      for (uint r = 0u; r < 4u; ++r)
        for (uint c = 0u; c < 4u; ++c) acc[r][c] += av[r] * bv[c];
    }
    barrier();
  }

  const uint y_base = batch * pc.m * pc.n;
  for (uint r = 0u; r < 4u; ++r) {
    const uint gm = row0 + ty + 16u * r;
    if (gm >= pc.m) continue;
    for (uint c = 0u; c < 4u; ++c) {
      const uint gn = col0 + tx + 16u * c;
      if (gn >= pc.n) continue;
      float v = acc[r][c] * pc.alpha;
      if (HAS_C != 0u) v += pc.beta * pc.c.v[gm * pc.c_rs + gn * pc.c_cs];
      pc.y.v[y_base + gm * pc.n + gn] = v;
    }
  }
}
