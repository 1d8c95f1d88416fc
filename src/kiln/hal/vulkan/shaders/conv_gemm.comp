// Conv (2-D, NCHW, f32) as a tiled implicit GEMM, one group per gl_WorkGroupID.z: rows = the
// group's output channels, columns = the N*OH*OW output pixels, K = Cin/group * KH * KW. A
// workgroup of 16x16 invocations computes a 64x64 tile of outputs, each invocation a 4x4 register
// block (rows ty + 16 i, columns tx + 16 j). K is walked in slabs of 16: the slab of weights (A,
// 64x16) and of im2col'd input (B, 16x64, zero in the padding, gathered on the fly) go through
// shared memory. Every output element sums its K products in order k = 0, 1, ..., K-1 whatever
// the tile or N (batch invariance). Epilogue: + bias (HAS_BIAS), + residual (HAS_RESIDUAL), the
// fused activation ACT (common.glsl).
//
// Grid: x = column tiles of this launch (the first is `col_tile_base`: conv_ops.cc splits the
// columns into launches of at most maxComputeWorkGroupCount[0] tiles), y = row tiles, z = groups.
// Ids come from gl_WorkGroupID and gl_LocalInvocationID only (see common.glsl on lavapipe).
#version 450
#include "common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const uint HAS_BIAS = 0;
layout(constant_id = 1) const uint HAS_RESIDUAL = 0;
layout(constant_id = 2) const uint ACT = 0;

layout(push_constant) uniform Push {
  F32 x;
  F32 w;
  F32 bias;
  F32 residual;
  F32 y;
  uint col_tile_base;
  uint cin, ih, iw;     // input channels (all groups), height, width
  uint cout, oh, ow;    // output channels (all groups), height, width
  uint kh, kw;
  uint sh, sw, ph, pw, dh, dw;  // strides, begin pads, dilations
  uint cin_g, cout_g;   // channels per group
  uint ncols;           // N * OH * OW
  float lo, hi;         // clip bounds
} pc;

const uint BM = 64, BN = 64, BK = 16;
shared float As[BK][BM];
shared float Bs[BK][BN];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint t = ty * 16u + tx;
  const uint g = gl_WorkGroupID.z;
  const uint row0 = gl_WorkGroupID.y * BM;
  const uint col0 = (pc.col_tile_base + gl_WorkGroupID.x) * BN;
  const uint khw = pc.kh * pc.kw;
  const uint K = pc.cin_g * khw;
  const uint opix = pc.oh * pc.ow;
  const uint ipix = pc.ih * pc.iw;

  // This invocation's B column (fixed for every slab): j = t % 64, rows t / 64 + 4 i.
  const uint bj = t % BN;
  const uint bcol = col0 + bj;
  const bool bcol_ok = bcol < pc.ncols;
  int ih0 = 0, iw0 = 0;
  uint xbase = 0;
  if (bcol_ok) {
    const uint n = bcol / opix;
    const uint r = bcol - n * opix;
    const uint oy = r / pc.ow;
    const uint ox = r - oy * pc.ow;
    ih0 = int(oy * pc.sh) - int(pc.ph);
    iw0 = int(ox * pc.sw) - int(pc.pw);
    xbase = (n * pc.cin + g * pc.cin_g) * ipix;
  }
  // This invocation's A loads: k = t % 16, rows t / 16 + 16 i.
  const uint ak = t % BK;
  const uint wbase = (g * pc.cout_g) * K;

  float acc[4][4];
  for (uint i = 0; i < 4u; ++i)
    for (uint j = 0; j < 4u; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < K; k0 += BK) {
    // A: weights [cout_g, K] of this group.
    for (uint i = 0; i < 4u; ++i) {
      const uint m = t / BK + 16u * i;
      const uint row = row0 + m;
      const uint k = k0 + ak;
      As[ak][m] = (row < pc.cout_g && k < K) ? pc.w.v[wbase + row * K + k] : 0.0;
    }
    // B: the input under output pixel bcol for tap k (0 in the padding).
    for (uint i = 0; i < 4u; ++i) {
      const uint kr = t / BN + 4u * i;
      const uint k = k0 + kr;
      float v = 0.0;
      if (bcol_ok && k < K) {
        const uint ci = k / khw;
        const uint rest = k - ci * khw;
        const uint ky = rest / pc.kw;
        const uint kx = rest - ky * pc.kw;
        const int y = ih0 + int(ky * pc.dh);
        const int xx = iw0 + int(kx * pc.dw);
        if (y >= 0 && y < int(pc.ih) && xx >= 0 && xx < int(pc.iw)) {
          v = pc.x.v[xbase + ci * ipix + uint(y) * pc.iw + uint(xx)];
        }
      }
      Bs[kr][bj] = v;
    }
    barrier();
    const uint kend = min(BK, K - k0);
    for (uint kk = 0; kk < kend; ++kk) {
      float a[4], b[4];
      for (uint i = 0; i < 4u; ++i) a[i] = As[kk][ty + 16u * i];
      for (uint j = 0; j < 4u; ++j) b[j] = Bs[kk][tx + 16u * j];
      for (uint i = 0; i < 4u; ++i)
        for (uint j = 0; j < 4u; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    barrier();
  }

  for (uint i = 0; i < 4u; ++i) {
    const uint row = row0 + ty + 16u * i;
    if (row >= pc.cout_g) continue;
    const uint co = g * pc.cout_g + row;
    for (uint j = 0; j < 4u; ++j) {
      const uint col = col0 + tx + 16u * j;
      if (col >= pc.ncols) continue;
      const uint n = col / opix;
      const uint r = col - n * opix;
      const uint o = (n * pc.cout + co) * opix + r;
      float v = acc[i][j];
      if (HAS_BIAS != 0u) v += pc.bias.v[co];
      if (HAS_RESIDUAL != 0u) v += pc.residual.v[o];
      pc.y.v[o] = fused_activation(v, ACT, pc.lo, pc.hi);
    }
  }
}
