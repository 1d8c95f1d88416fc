// y[i] = one value: 4-byte elements (ELEM8 = 0: the word `lo`) or 8-byte ones (ELEM8 = 1: `lo`,
// `hi`). ConstantOfShape.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ELEM8 = 0;

layout(push_constant) uniform Push {
  U32 y;
  uint base;
  uint n;
  uint lo;
  uint hi;
} pc;

void main() {
  uint i = element_index(pc.base);
  if (i >= pc.n) return;
  if (ELEM8 != 0u) {
    U64(pc.y).v[i] = uvec2(pc.lo, pc.hi);
  } else {
    pc.y.v[i] = pc.lo;
  }
}
