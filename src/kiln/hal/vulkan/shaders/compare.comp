// y (bool) = a op b with numpy broadcasting (broadcast.glsl), op by the specialization constant
// OP: 0 Equal, 1 Less, 2 Greater, 3 LessOrEqual, 4 GreaterOrEqual, 5 And, 6 Or, 7 Xor, 8 Not
// (of a; b is a again). TYPE is the inputs' dtype: 0 f32, 1 i32, 2 i64 (two words, signed),
// 3 bool. Comparisons with a NaN are false.
#version 450
#include "common.glsl"
#include "bytes.glsl"
#include "broadcast.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint TYPE = 0;

layout(push_constant) uniform Push {
  U32 a;
  U32 b;
  U8 y;
  uint base;
  uint n;
  uint rank;
  uint dims[6];
  uint a_strides[6];
  uint b_strides[6];
} pc;

// a < b on two's-complement 64-bit integers held as (low, high) words.
bool less64(uvec2 a, uvec2 b) {
  return int(a.y) < int(b.y) || (a.y == b.y && a.x < b.x);
}

bool compare(uint ia, uint ib) {
  if (TYPE == 0u) {
    const float a = uintBitsToFloat(pc.a.v[ia]), b = uintBitsToFloat(pc.b.v[ib]);
    switch (OP) {
      case 0: return a == b;
      case 1: return a < b;
      case 2: return a > b;
      case 3: return a <= b;
      case 4: return a >= b;
    }
  } else if (TYPE == 1u) {
    const int a = int(pc.a.v[ia]), b = int(pc.b.v[ib]);
    switch (OP) {
      case 0: return a == b;
      case 1: return a < b;
      case 2: return a > b;
      case 3: return a <= b;
      case 4: return a >= b;
    }
  } else if (TYPE == 2u) {
    const uvec2 a = U64(pc.a).v[ia], b = U64(pc.b).v[ib];
    switch (OP) {
      case 0: return a == b;
      case 1: return less64(a, b);
      case 2: return less64(b, a);
      case 3: return !less64(b, a);
      case 4: return !less64(a, b);
    }
  } else {
    const bool a = uint(U8(pc.a).v[ia]) != 0u, b = uint(U8(pc.b).v[ib]) != 0u;
    switch (OP) {
      case 0: return a == b;
      case 5: return a && b;
      case 6: return a || b;
      case 7: return a != b;
      case 8: return !a;
    }
  }
  return false;
}

void main() {
  uint i = element_index(pc.base);
  if (i >= pc.n) return;
  const uint ia = broadcast_index(i, pc.rank, pc.dims, pc.a_strides);
  const uint ib = broadcast_index(i, pc.rank, pc.dims, pc.b_strides);
  pc.y.v[i] = uint8_t(compare(ia, ib) ? 1u : 0u);
}
