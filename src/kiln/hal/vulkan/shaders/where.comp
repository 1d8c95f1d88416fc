// y = condition ? x : z with numpy broadcasting of all three (broadcast.glsl); x, z and y have
// 4-byte elements (ELEM8 = 0) or 8-byte ones (ELEM8 = 1): bit copies, so NaN passes through.
// The dims and strides come from `table` (dims[6], then condition's, x's and z's strides[6]):
// they do not all fit in the push constants.
#version 450
#include "common.glsl"
#include "bytes.glsl"
#include "broadcast.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ELEM8 = 0;

layout(push_constant) uniform Push {
  U8 condition;
  U32 x;
  U32 z;
  U32 y;
  U32 table;
  uint base;
  uint n;
  uint rank;
} pc;

uint operand_index(uint i, uint which) {
  uint dims[6], strides[6];
  for (int d = 0; d < 6; ++d) {
    dims[d] = pc.table.v[d];
    strides[d] = pc.table.v[6u * (which + 1u) + uint(d)];
  }
  return broadcast_index(i, pc.rank, dims, strides);
}

void main() {
  uint i = element_index(pc.base);
  if (i >= pc.n) return;
  const bool c = uint(pc.condition.v[operand_index(i, 0u)]) != 0u;
  const uint j = operand_index(i, c ? 1u : 2u);
  if (ELEM8 != 0u) {
    U64(pc.y).v[i] = c ? U64(pc.x).v[j] : U64(pc.z).v[j];
  } else {
    pc.y.v[i] = c ? pc.x.v[j] : pc.z.v[j];
  }
}
