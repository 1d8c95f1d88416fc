// Trilu: y = x where the element is kept, 0 elsewhere, over the last two dims [rows, cols] of
// each matrix: kept when j - i >= k (UPPER = 1) or j - i <= k (UPPER = 0). 4-byte elements
// (ELEM8 = 0) or 8-byte ones (ELEM8 = 1, moved as two words). k is clamped by the host to
// [-(rows + cols + 1), rows + cols + 1], as the reference does (kernels/layout.cc).
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint UPPER = 1;
layout(constant_id = 1) const uint ELEM8 = 0;

layout(push_constant) uniform Push {
  U32 x;
  U32 y;
  uint base;
  uint n;
  uint rows;
  uint cols;
  int k;
} pc;

void main() {
  uint e = element_index(pc.base);
  if (e >= pc.n) return;
  const uint j = e % pc.cols;
  const uint i = (e / pc.cols) % pc.rows;
  const int d = int(j) - int(i);
  const bool kept = UPPER != 0u ? d >= pc.k : d <= pc.k;
  if (ELEM8 != 0u) {
    U64(pc.y).v[e] = kept ? U64(pc.x).v[e] : uvec2(0u);
  } else {
    pc.y.v[e] = kept ? pc.x.v[e] : 0u;
  }
}
