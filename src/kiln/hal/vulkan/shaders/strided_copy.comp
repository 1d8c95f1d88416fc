// The data movement kernel (Transpose, Concat, Slice, Split, Expand): element (i_0, ..., i_{r-1})
// of a row-major index space of `dims` (rank <= 6) is copied from source element
// src_offset + sum(i_k * src_strides[k]) to destination element dst_offset + sum(i_k *
// dst_strides[k]). Source strides may be 0 (broadcast) or negative (reversed slices). Elements
// are bit copies of 4 bytes (ELEM8 = 0: f32, i32, ...) or 8 bytes (ELEM8 = 1: i64, f64, as uvec2).
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ELEM8 = 0;

layout(push_constant) uniform Push {
  U32 src;
  U32 dst;
  uint base;
  uint n;
  uint rank;
  uint dims[6];
  int src_strides[6];
  int src_offset;
  uint dst_strides[6];
  uint dst_offset;
} pc;

void main() {
  const uint i = element_index(pc.base);
  if (i >= pc.n) return;
  int from = pc.src_offset;
  uint to = pc.dst_offset;
  uint rest = i;
  for (int d = int(pc.rank) - 1; d >= 0; --d) {
    const uint c = rest % pc.dims[d];
    rest /= pc.dims[d];
    from += int(c) * pc.src_strides[d];
    to += c * pc.dst_strides[d];
  }
  if (ELEM8 != 0u) {
    U64(pc.dst).v[to] = U64(pc.src).v[uint(from)];
  } else {
    pc.dst.v[to] = pc.src.v[uint(from)];
  }
}
