// y = a op b on f32 with numpy broadcasting, op chosen by the specialization constant OP:
// 0 Add, 1 Sub, 2 Mul, 3 Div, 4 Max, 5 Min, 6 Pow. BROADCAST = 0 when a, b and y have one shape
// (every index is the same); else each operand's index comes from y's coordinates and the
// operand's strides (0 along broadcast dims), rank <= 6.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint BROADCAST = 1;

layout(push_constant) uniform Push {
  F32 a;
  F32 b;
  F32 y;
  uint base;
  uint n;
  uint rank;
  uint dims[6];
  uint a_strides[6];
  uint b_strides[6];
} pc;

// ONNX Pow on floats: integral exponents of negative bases keep their sign; pow(0, 0) = 1.
float pow_onnx(float x, float e) {
  if (isnan(x) || isnan(e)) return x + e;
  if (e == 0.0) return 1.0;
  if (x == 0.0) return e > 0.0 ? 0.0 : 1.0 / 0.0;
  if (x > 0.0) return pow(x, e);
  if (floor(e) != e) return 0.0 / 0.0;
  float m = pow(-x, e);
  return mod(e, 2.0) == 1.0 ? -m : m;
}

float apply(float a, float b) {
  switch (OP) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: if (isnan(a)) return a; if (isnan(b)) return b; return max(a, b);
    case 5: if (isnan(a)) return a; if (isnan(b)) return b; return min(a, b);
    case 6: return pow_onnx(a, b);
  }
  return a;
}

void main() {
  uint i = element_index(pc.base);
  if (i >= pc.n) return;
  uint ia = i, ib = i;
  if (BROADCAST != 0u) {
    ia = 0u;
    ib = 0u;
    uint rest = i;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
      uint c = rest % pc.dims[d];
      rest /= pc.dims[d];
      ia += c * pc.a_strides[d];
      ib += c * pc.b_strides[d];
    }
  }
  pc.y.v[i] = apply(pc.a.v[ia], pc.b.v[ib]);
}
