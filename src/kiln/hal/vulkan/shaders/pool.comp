// MaxPool, AveragePool and the global pools on f32 [N, C, H, W] (pool_ops.cc maps 1-D pools and
// the global pools of any rank onto H and W), one invocation per output element over its window
// in order (row, then column). MODE: 0 max, 1 average over the taps inside the input, 2 average
// dividing by the taps inside the padded extent (count_include_pad). As kiln's reference
// (kernels/spatial.cc): the first NaN of a max window is the result; a max window with no tap
// inside the input gives the lowest finite float.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;

layout(push_constant) uniform Push {
  F32 x;
  F32 y;
  uint base;
  uint n;  // output elements
  uint ih, iw, oh, ow;
  uint kh, kw, sh, sw;
  uint ph, pw;          // begin pads
  uint dh, dw;
  uint ph_end, pw_end;  // end pads (count_include_pad)
} pc;

// Taps k of a window starting at `start` inside [-pad_begin, in + pad_end).
uint padded_taps(int start, uint k, uint d, uint pad_begin, uint in_size, uint pad_end) {
  uint count = 0;
  for (uint i = 0; i < k; ++i) {
    const int at = start + int(i * d);
    if (at >= -int(pad_begin) && at < int(in_size + pad_end)) ++count;
  }
  return count;
}

void main() {
  const uint o = element_index(pc.base);
  if (o >= pc.n) return;
  const uint opix = pc.oh * pc.ow;
  const uint plane = o / opix;
  const uint r = o - plane * opix;
  const uint oy = r / pc.ow;
  const uint ox = r - oy * pc.ow;
  const int y0 = int(oy * pc.sh) - int(pc.ph);
  const int x0 = int(ox * pc.sw) - int(pc.pw);
  const uint xp = plane * pc.ih * pc.iw;
  float acc = MODE == 0u ? -1.0 / 0.0 : 0.0;
  uint valid = 0;
  bool nan = false;
  for (uint ky = 0; ky < pc.kh && !nan; ++ky) {
    const int y = y0 + int(ky * pc.dh);
    if (y < 0 || y >= int(pc.ih)) continue;
    const uint row = xp + uint(y) * pc.iw;
    for (uint kx = 0; kx < pc.kw; ++kx) {
      const int xx = x0 + int(kx * pc.dw);
      if (xx < 0 || xx >= int(pc.iw)) continue;
      const float v = pc.x.v[row + uint(xx)];
      ++valid;
      if (MODE == 0u) {
        if (isnan(v)) {
          acc = v;
          nan = true;
          break;
        }
        if (v > acc) acc = v;
      } else {
        acc += v;
      }
    }
  }
  float result;
  if (MODE == 0u) {
    result = valid == 0u ? -3.40282347e38 : acc;
  } else if (MODE == 1u) {
    result = acc / float(valid);
  } else {
    const uint count = padded_taps(y0, pc.kh, pc.dh, pc.ph, pc.ih, pc.ph_end) *
                       padded_taps(x0, pc.kw, pc.dw, pc.pw, pc.iw, pc.pw_end);
    result = acc / float(count);
  }
  pc.y.v[o] = result;
}
