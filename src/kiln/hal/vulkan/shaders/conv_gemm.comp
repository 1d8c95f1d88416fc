// Conv (2-D, NCHW, f32) as a tiled implicit GEMM, one group per gl_WorkGroupID.z: rows = the
// group's output channels, columns = the N*OH*OW output pixels, K = Cin/group * KH * KW. A
// workgroup of 8x8 invocations computes a 64x64 tile of outputs, each invocation an 8x8 register
// block (rows ty + 8 i, columns tx + 8 j). K is walked in slabs of 16: the slab of weights (A,
// 64x16) and of im2col'd input (B, 16x64, zero in the padding, gathered on the fly) go through
// shared memory; invocation t loads A's row t and B's column t, whose tap (channel, kernel row,
// kernel column) advances with k without a division. Every output element sums its K products
// in order k = 0, 1, ..., K-1 (one fma each) whatever the tile or N: batch invariance. Epilogue:
// + bias (HAS_BIAS), + residual (HAS_RESIDUAL 1), the fused activation ACT (common.glsl), +
// residual (HAS_RESIDUAL 2: kiln_residual_after_activation).
//
// Grid: x = column tiles of this launch (the first is `col_tile_base`: conv_ops.cc splits the
// columns into launches of at most maxComputeWorkGroupCount[0] tiles), y = row tiles, z = groups.
// Ids come from gl_WorkGroupID and gl_LocalInvocationID only, never from gl_GlobalInvocationID
// (see common.glsl on lavapipe), and every index fits 32 bits (conv_ops.cc refuses tensors of
// 2^32 elements or more).
#version 450
#include "common.glsl"

layout(local_size_x = 8, local_size_y = 8) in;
layout(constant_id = 0) const uint HAS_BIAS = 0;
layout(constant_id = 1) const uint HAS_RESIDUAL = 0;
layout(constant_id = 2) const uint ACT = 0;
// 1: a 1x1 kernel, stride 1, no padding: B is X itself (k = the channel), read without taps.
layout(constant_id = 3) const uint POINTWISE = 0;

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

const uint BM = 64, BN = 64, BK = 16, R = 8;
shared float As[BK][BM];
shared float Bs[BK][BN];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint t = ty * 8u + tx;
  const uint g = gl_WorkGroupID.z;
  const uint row0 = gl_WorkGroupID.y * BM;
  const uint col0 = (pc.col_tile_base + gl_WorkGroupID.x) * BN;
  const uint K = pc.cin_g * pc.kh * pc.kw;
  const uint opix = pc.oh * pc.ow;
  const uint ipix = pc.ih * pc.iw;

  // This invocation loads B column t and A row t, every k of every slab in order: the tap
  // (ci, ky, kx) of k advances with it, no division per element.
  const uint bcol = col0 + t;
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
    if (POINTWISE != 0u) xbase += r;
  }
  uint ci = 0, ky = 0, kx = 0;
  const uint arow = row0 + t;
  const bool arow_ok = arow < pc.cout_g;
  const uint wrow = (g * pc.cout_g + arow) * K;

  float acc[R][R];
  for (uint i = 0; i < R; ++i)
    for (uint j = 0; j < R; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < K; k0 += BK) {
    for (uint kr = 0; kr < BK; ++kr) {
      const uint k = k0 + kr;
      As[kr][t] = (arow_ok && k < K) ? pc.w.v[wrow + k] : 0.0;
      float v = 0.0;
      if (POINTWISE != 0u) {
        if (bcol_ok && k < K) v = pc.x.v[xbase + k * ipix];
      } else if (bcol_ok && k < K) {
        const int y = ih0 + int(ky * pc.dh);
        const int xx = iw0 + int(kx * pc.dw);
        if (y >= 0 && y < int(pc.ih) && xx >= 0 && xx < int(pc.iw)) {
          v = pc.x.v[xbase + ci * ipix + uint(y) * pc.iw + uint(xx)];
        }
      }
      Bs[kr][t] = v;
      if (++kx == pc.kw) {
        kx = 0;
        if (++ky == pc.kh) {
          ky = 0;
          ++ci;
        }
      }
    }
    barrier();
    const uint kend = min(BK, K - k0);
    for (uint kk = 0; kk < kend; ++kk) {
      float a[R], b[R];
      for (uint i = 0; i < R; ++i) a[i] = As[kk][ty + 8u * i];
      for (uint j = 0; j < R; ++j) b[j] = Bs[kk][tx + 8u * j];
      for (uint i = 0; i < R; ++i)
        for (uint j = 0; j < R; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    barrier();
  }

  for (uint i = 0; i < R; ++i) {
    const uint row = row0 + ty + 8u * i;
    if (row >= pc.cout_g) continue;
    const uint co = g * pc.cout_g + row;
    for (uint j = 0; j < R; ++j) {
      const uint col = col0 + tx + 8u * j;
      if (col >= pc.ncols) continue;
      const uint n = col / opix;
      const uint r = col - n * opix;
      const uint o = (n * pc.cout + co) * opix + r;
      float v = acc[i][j];
      if (HAS_BIAS != 0u) v += pc.bias.v[co];
      if (HAS_RESIDUAL == 1u) v += pc.residual.v[o];
      v = fused_activation(v, ACT, pc.lo, pc.hi);
      if (HAS_RESIDUAL == 2u) v += pc.residual.v[o];
      pc.y.v[o] = v;
    }
  }
}
