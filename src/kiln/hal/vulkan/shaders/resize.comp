// Resize from the definition's plan (kernels/resize_plan.h), one invocation per output element.
// `table` holds each axis's taps from word start[a]: per output index o, the word `outside`, then
// taps[a] pairs (input offset, f32 weight bits). NEAREST = 1 reads one element (any 4-byte dtype,
// a bit copy); else the weighted sum in f32 in the plan's order, `precise` so that no multiply-add
// is fused (the definition's kernel rounds each product and sum).
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint NEAREST = 1;

layout(push_constant) uniform Push {
  U32 x;
  U32 y;
  U32 table;
  uint base;
  uint n;
  uint rank;
  uint extrapolation;  // bits of the output element outside a tf_crop_and_resize box
  uint dims[6];        // output dims
  uint taps[6];
  uint start[6];
} pc;

void main() {
  uint i = element_index(pc.base);
  if (i >= pc.n) return;
  uint entry[6];  // word of each axis's output index: its `outside` flag, then its taps
  uint rest = i;
  bool outside = false;
  for (int d = int(pc.rank) - 1; d >= 0; --d) {
    const uint o = rest % pc.dims[d];
    rest /= pc.dims[d];
    entry[d] = pc.start[d] + o * (1u + 2u * pc.taps[d]);
    if (pc.table.v[entry[d]] != 0u) outside = true;
  }
  if (outside) {
    pc.y.v[i] = pc.extrapolation;
    return;
  }
  if (NEAREST != 0u) {
    uint offset = 0u;
    for (uint d = 0u; d < pc.rank; ++d) offset += pc.table.v[entry[d] + 1u];
    pc.y.v[i] = pc.x.v[offset];
    return;
  }
  const uint last = pc.rank - 1u;
  uint outer = 1u;
  for (uint d = 0u; d < last; ++d) outer *= pc.taps[d];
  precise float acc = 0.0;
  for (uint k = 0u; k < outer; ++k) {
    // Tap k of the outer list: axis last - 1 is its least significant digit.
    uint digit[6];
    uint r = k;
    for (int d = int(last) - 1; d >= 0; --d) {
      digit[d] = r % pc.taps[d];
      r /= pc.taps[d];
    }
    uint offset = 0u;
    precise float w = 1.0;
    for (uint d = 0u; d < last; ++d) {
      const uint e = entry[d] + 1u + 2u * digit[d];
      offset += pc.table.v[e];
      w = w * uintBitsToFloat(pc.table.v[e + 1u]);
    }
    precise float s = 0.0;
    for (uint t = 0u; t < pc.taps[last]; ++t) {
      const uint e = entry[last] + 1u + 2u * t;
      s = s + uintBitsToFloat(pc.table.v[e + 1u]) * uintBitsToFloat(pc.x.v[offset + pc.table.v[e]]);
    }
    acc = acc + w * s;
  }
  pc.y.v[i] = floatBitsToUint(acc);
}
