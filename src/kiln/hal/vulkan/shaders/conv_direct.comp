// Conv (2-D, NCHW, f32), one invocation per output element summing its Cin/group * KH * KW
// products in order (channel, then kernel row, then column; taps in the padding are skipped):
// for depthwise and few-channels-per-group convs, and for any conv the tiled shader
// (conv_gemm.comp) does not take. Epilogue as conv_gemm.comp's.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint HAS_BIAS = 0;
layout(constant_id = 1) const uint HAS_RESIDUAL = 0;
layout(constant_id = 2) const uint ACT = 0;

layout(push_constant) uniform Push {
  F32 x;
  F32 w;
  F32 bias;
  F32 residual;
  F32 y;
  uint base;
  uint n;  // output elements
  uint cin, ih, iw;
  uint cout, oh, ow;
  uint kh, kw;
  uint sh, sw, ph, pw, dh, dw;
  uint cin_g, cout_g;
  float lo, hi;
} pc;

void main() {
  const uint o = element_index(pc.base);
  if (o >= pc.n) return;
  const uint opix = pc.oh * pc.ow;
  const uint nc = o / opix;
  const uint r = o - nc * opix;
  const uint b = nc / pc.cout;
  const uint co = nc - b * pc.cout;
  const uint oy = r / pc.ow;
  const uint ox = r - oy * pc.ow;
  const uint g = co / pc.cout_g;
  const int y0 = int(oy * pc.sh) - int(pc.ph);
  const int x0 = int(ox * pc.sw) - int(pc.pw);
  const uint ipix = pc.ih * pc.iw;
  uint xc = (b * pc.cin + g * pc.cin_g) * ipix;
  uint wi = co * pc.cin_g * pc.kh * pc.kw;
  float acc = 0.0;
  for (uint ci = 0; ci < pc.cin_g; ++ci, xc += ipix) {
    for (uint ky = 0; ky < pc.kh; ++ky) {
      const int y = y0 + int(ky * pc.dh);
      if (y < 0 || y >= int(pc.ih)) {
        wi += pc.kw;
        continue;
      }
      const uint row = xc + uint(y) * pc.iw;
      for (uint kx = 0; kx < pc.kw; ++kx, ++wi) {
        const int xx = x0 + int(kx * pc.dw);
        if (xx >= 0 && xx < int(pc.iw)) acc = fma(pc.w.v[wi], pc.x.v[row + uint(xx)], acc);
      }
    }
  }
  float v = acc;
  if (HAS_BIAS != 0u) v += pc.bias.v[co];
  if (HAS_RESIDUAL == 1u) v += pc.residual.v[o];
  v = fused_activation(v, ACT, pc.lo, pc.hi);
  if (HAS_RESIDUAL == 2u) v += pc.residual.v[o];
  pc.y.v[o] = v;
}
