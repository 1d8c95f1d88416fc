// Gather: y[o, j, i] = data[o, indices[j], i], o over data's dims before the axis, j over the
// indices (i32, or i64 when IDX64 = 1), i over the dims after it; elements of 4 bytes or 8
// (ELEM8 = 1). A negative index counts from the end of the axis. An index outside
// [-axis_size, axis_size - 1] is an error in kiln's definition (kernels/index.cc): the first
// invocation to find one records (index element + 1, its low and high words) in `flag`, which the
// executable reads after the run and turns into the definition's error; the element is written 0.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ELEM8 = 0;
layout(constant_id = 1) const uint IDX64 = 0;

layout(push_constant) uniform Push {
  U32 data;
  U32 indices;
  U32 y;
  U32 flag;
  uint base;
  uint n;
  uint inner;
  uint count;
  uint axis_size;
} pc;

void main() {
  const uint t = element_index(pc.base);
  if (t >= pc.n) return;
  const uint i = t % pc.inner;
  const uint rest = t / pc.inner;
  const uint j = rest % pc.count;
  const uint o = rest / pc.count;
  uint lo, hi;
  if (IDX64 != 0u) {
    const uvec2 v = U64(pc.indices).v[j];
    lo = v.x;
    hi = v.y;
  } else {
    lo = pc.indices.v[j];
    hi = int(lo) < 0 ? 0xffffffffu : 0u;
  }
  bool ok;
  uint row;
  if (hi == 0u) {
    ok = lo < pc.axis_size;
    row = lo;
  } else {
    ok = hi == 0xffffffffu && int(lo) < 0 && uint(-int(lo)) <= pc.axis_size;
    row = pc.axis_size - uint(-int(lo));
  }
  if (!ok) {
    if (atomicCompSwap(pc.flag.v[0], 0u, j + 1u) == 0u) {
      pc.flag.v[1] = lo;
      pc.flag.v[2] = hi;
    }
    if (ELEM8 != 0u) U64(pc.y).v[t] = uvec2(0u); else pc.y.v[t] = 0u;
    return;
  }
  const uint from = (o * pc.axis_size + row) * pc.inner + i;
  if (ELEM8 != 0u) {
    U64(pc.y).v[t] = U64(pc.data).v[from];
  } else {
    pc.y.v[t] = pc.data.v[from];
  }
}
