// y = a op b on i32 (TYPE 0) or i64 (TYPE 1) with numpy broadcasting (broadcast.glsl), op by the
// specialization constant OP (binary.comp's codes): 0 Add, 1 Sub, 2 Mul, 4 Max, 5 Min. Two's
// complement wrapping, as the definition (kernels/binary.cc). Needs shaderInt64.
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#include "common.glsl"
#include "broadcast.glsl"

layout(buffer_reference, std430, buffer_reference_align = 8) buffer I64 { int64_t v[]; };

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint TYPE = 0;

layout(push_constant) uniform Push {
  U32 a;
  U32 b;
  U32 y;
  uint base;
  uint n;
  uint rank;
  uint dims[6];
  uint a_strides[6];
  uint b_strides[6];
} pc;

int64_t apply(int64_t a, int64_t b) {
  switch (OP) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 4: return max(a, b);
    case 5: return min(a, b);
  }
  return a;
}

void main() {
  uint i = element_index(pc.base);
  if (i >= pc.n) return;
  const uint ia = broadcast_index(i, pc.rank, pc.dims, pc.a_strides);
  const uint ib = broadcast_index(i, pc.rank, pc.dims, pc.b_strides);
  if (TYPE == 1u) {
    I64(pc.y).v[i] = apply(I64(pc.a).v[ia], I64(pc.b).v[ib]);
  } else {
    // i32: the 64-bit result's low word is the wrapped 32-bit one.
    pc.y.v[i] = uint(apply(int64_t(int(pc.a.v[ia])), int64_t(int(pc.b.v[ib]))));
  }
}
