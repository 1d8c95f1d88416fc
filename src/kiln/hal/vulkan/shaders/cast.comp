// Cast with kiln's conversion rules (kernels/numeric_convert.h): float to integer truncates,
// saturates and maps NaN to 0; integers wrap; to bool is `!= 0` (NaN is true); bool is 0 or 1.
// SRC and DST: 0 f32, 1 i32, 2 i64, 3 bool, 4 u8. Needs shaderInt64 and 8-bit storage.
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#include "common.glsl"
#include "bytes.glsl"

layout(buffer_reference, std430, buffer_reference_align = 8) buffer I64 { int64_t v[]; };

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint SRC = 0;
layout(constant_id = 1) const uint DST = 0;

layout(push_constant) uniform Push {
  U32 x;
  U32 y;
  uint base;
  uint n;
} pc;

void store_int(uint i, int64_t v) {
  switch (DST) {
    case 0: pc.y.v[i] = floatBitsToUint(float(v)); break;
    case 1: pc.y.v[i] = uint(int(v)); break;
    case 2: I64(pc.y).v[i] = v; break;
    case 3: U8(pc.y).v[i] = uint8_t(v != 0l ? 1u : 0u); break;
    case 4: U8(pc.y).v[i] = uint8_t(uint(v) & 255u); break;
  }
}

void store_float(uint i, float f) {
  switch (DST) {
    case 0: pc.y.v[i] = floatBitsToUint(f); break;
    case 1: {
      int v = 0;
      if (!isnan(f)) v = f <= -2147483648.0 ? -2147483647 - 1 : f >= 2147483648.0 ? 2147483647 : int(f);
      pc.y.v[i] = uint(v);
      break;
    }
    case 2: {
      int64_t v = 0l;
      if (!isnan(f)) {
        v = f <= -9223372036854775808.0 ? int64_t(0x8000000000000000ul)
            : f >= 9223372036854775808.0 ? int64_t(0x7ffffffffffffffful) : int64_t(f);
      }
      I64(pc.y).v[i] = v;
      break;
    }
    case 3: U8(pc.y).v[i] = uint8_t(isnan(f) || f != 0.0 ? 1u : 0u); break;
    case 4: {
      uint v = 0u;
      if (!isnan(f)) v = f <= 0.0 ? 0u : f >= 255.0 ? 255u : uint(f);
      U8(pc.y).v[i] = uint8_t(v);
      break;
    }
  }
}

void main() {
  uint i = element_index(pc.base);
  if (i >= pc.n) return;
  switch (SRC) {
    case 0: store_float(i, uintBitsToFloat(pc.x.v[i])); break;
    case 1: store_int(i, int64_t(int(pc.x.v[i]))); break;
    case 2: store_int(i, I64(pc.x).v[i]); break;
    case 3: store_int(i, uint(U8(pc.x).v[i]) != 0u ? 1l : 0l); break;
    case 4: store_int(i, int64_t(uint(U8(pc.x).v[i]))); break;
  }
}
