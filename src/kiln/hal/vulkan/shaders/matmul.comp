// Tiled batched matrix product: y[b] (M x N, row-major) = alpha * A'[b] B'[b] (+ beta * C), every
// operand addressed through element strides (row, column, batch), so transposes, 1-D operands and
// broadcast batches (batch stride 0) need no copies. A workgroup of 16 x 16 invocations computes a
// 64 x 64 tile of y, staging 16-deep K-slabs of A and B in shared memory (2 x 16 x 16 vec4s, 8 KiB);
// each invocation accumulates a 4 x 4 register block (rows 4 ty + r, columns 4 tx + c), reading
// one vec4 of A and one of B per k. On lavapipe vec4 slabs ran about 1.5x faster than scalar ones.
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
// Slabs as vec4s: as_[k][m / 4] holds rows m..m+3 of column k of A's slab, bs_[k][n / 4] columns
// n..n+3 of row k of B's.
shared vec4 as_[SLAB * TILE / 4];
shared vec4 bs_[SLAB * TILE / 4];

void main() {
  const uint tx = gl_LocalInvocationID.x;
  const uint ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16u + tx;
  const uint row0 = gl_WorkGroupID.y * TILE;
  const uint col0 = gl_WorkGroupID.x * TILE;
  const uint batch = gl_WorkGroupID.z;
  const uint a_base = batch * pc.a_bs;
  const uint b_base = batch * pc.b_bs;
  // This invocation's outputs: rows ty * 4 + r, columns tx * 4 + c.
  vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));

  for (uint k0 = 0u; k0 < pc.k; k0 += SLAB) {
    // A: 16 k x 64 rows (4 consecutive rows per invocation).
    {
      const uint ak = tid / 16u, am = (tid % 16u) * 4u;
      const uint gk = k0 + ak;
      vec4 v;
      for (uint l = 0u; l < 4u; ++l) {
        const uint gm = row0 + am + l;
        v[l] = (gm < pc.m && gk < pc.k) ? pc.a.v[a_base + gm * pc.a_rs + gk * pc.a_cs] : 0.0;
      }
      as_[ak * (TILE / 4u) + am / 4u] = v;
    }
    // B: 16 k x 64 columns (4 consecutive columns per invocation).
    {
      const uint bk = tid / 16u, bn = (tid % 16u) * 4u;
      const uint gk = k0 + bk;
      vec4 v;
      for (uint l = 0u; l < 4u; ++l) {
        const uint gn = col0 + bn + l;
        v[l] = (gk < pc.k && gn < pc.n) ? pc.b.v[b_base + gk * pc.b_rs + gn * pc.b_cs] : 0.0;
      }
      bs_[bk * (TILE / 4u) + bn / 4u] = v;
    }
    barrier();
    for (uint kk = 0u; kk < SLAB; ++kk) {
      const vec4 av = as_[kk * (TILE / 4u) + ty];
      const vec4 bv = bs_[kk * (TILE / 4u) + tx];
      acc[0] += av.x * bv;
      acc[1] += av.y * bv;
      acc[2] += av.z * bv;
      acc[3] += av.w * bv;
    }
    barrier();
  }

  const uint y_base = batch * pc.m * pc.n;
  for (uint r = 0u; r < 4u; ++r) {
    const uint gm = row0 + ty * 4u + r;
    if (gm >= pc.m) continue;
    for (uint c = 0u; c < 4u; ++c) {
      const uint gn = col0 + tx * 4u + c;
      if (gn >= pc.n) continue;
      float v = acc[r][c] * pc.alpha;
      if (HAS_C != 0u) v += pc.beta * pc.c.v[gm * pc.c_rs + gn * pc.c_cs];
      pc.y.v[y_base + gm * pc.n + gn] = v;
    }
  }
}
