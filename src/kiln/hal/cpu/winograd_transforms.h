// The Winograd F(2x2, 3x3) input and output transforms (winograd_conv.h), written once over a
// vector type `V` that each ISA file supplies (winograd_conv_avx2.cc, winograd_conv_avx512.cc):
//   using R = the register type;  static constexpr int64_t kWidth (floats per R);
//   static R zero(), load(const float*), set1(float), add(R, R), sub(R, R), mul(R, R), max(R, R),
//   min(R, R), below_zero(R y, R a) (a where y < 0, else y); static void store(float*, R).
// max/min must return their second operand when either is NaN (x86's maxps/minps do).
//
// Every function here is a template on V, so each ISA's instantiations are its own symbols. An ISA
// file includes this header inside its `#pragma GCC target` region, after every other header, so
// that only these templates are compiled for its instructions.
#pragma once

#include "kiln/hal/cpu/winograd_conv_kernels.h"

namespace kiln::hal::cpu::winograd::detail {

template <class V>
typename V::R activate(typename V::R y, const kernels::FusedActivation& a) {
  using Kind = kernels::FusedActivation::Kind;
  // max/min return their second operand when either is NaN: a NaN stays NaN.
  switch (a.kind) {
    case Kind::kNone:
    case Kind::kSilu:  // never: winograd_shape leaves SiLU to oneDNN's direct conv
    case Kind::kGelu:  // never: read_conv_attributes rejects GELU
    case Kind::kGeluTanh: return y;
    case Kind::kRelu: return V::max(V::zero(), y);
    case Kind::kClip:
      return V::min(V::set1(static_cast<float>(a.max)),
                    V::max(V::set1(static_cast<float>(a.min)), y));
    case Kind::kLeakyRelu:  // y < 0 is false for NaN and -0
      return V::below_zero(y, V::mul(V::set1(static_cast<float>(a.alpha)), y));
  }
  return y;
}

// V = B^T d B for the tiles of register block `block` (counting over the batch), channel block
// `cb`, written at the chunk's block `slot`.
template <class V>
void transform_input(const Conv3x3& s, const Geometry& g, const float* src, float* v, int64_t block,
                     int64_t slot, int64_t cb) {
  using R = typename V::R;
  constexpr int64_t kVec = V::kWidth;
  const int64_t per_block = g.k.tiles_per_block;
  const size_t xi_stride = static_cast<size_t>(g.v_plane);
  float* out = v + (slot * g.cb + cb) * per_block * kVec;
  for (int64_t j = 0; j < per_block; ++j) {
    const int64_t t = block * per_block + j;
    R d[4][4];
    if (t >= g.tiles) {
      for (auto& row : d)
        for (auto& x : row) x = V::zero();
    } else {
      const int64_t image = t / g.image_tiles, tile = t % g.image_tiles;
      const float* plane = src + image * g.in.image + cb * g.in.block;
      const int64_t y0 = (tile / g.tiles_w) * 2 - s.pad_top;
      const int64_t x0 = (tile % g.tiles_w) * 2 - s.pad_left;
      if (y0 >= 0 && y0 + 4 <= s.in_h && x0 >= 0 && x0 + 4 <= s.in_w) {  // inside: no checks
        const float* row = plane + (y0 * s.in_w + x0) * g.in.pixel;
        for (int64_t i = 0; i < 4; ++i, row += s.in_w * g.in.pixel) {
          for (int64_t k = 0; k < 4; ++k) d[i][k] = V::load(row + k * g.in.pixel);
        }
      } else {
        for (int64_t i = 0; i < 4; ++i) {
          const int64_t y = y0 + i;
          for (int64_t k = 0; k < 4; ++k) {
            const int64_t x = x0 + k;
            d[i][k] = (y < 0 || y >= s.in_h || x < 0 || x >= s.in_w)
                          ? V::zero()
                          : V::load(plane + (y * s.in_w + x) * g.in.pixel);
          }
        }
      }
    }
    R r[4][4];  // B^T d
    for (int k = 0; k < 4; ++k) {
      r[0][k] = V::sub(d[0][k], d[2][k]);
      r[1][k] = V::add(d[1][k], d[2][k]);
      r[2][k] = V::sub(d[2][k], d[1][k]);
      r[3][k] = V::sub(d[1][k], d[3][k]);
    }
    float* o = out + j * kVec;
    for (int i = 0; i < 4; ++i) {  // (B^T d) B
      V::store(o + (i * 4 + 0) * xi_stride, V::sub(r[i][0], r[i][2]));
      V::store(o + (i * 4 + 1) * xi_stride, V::add(r[i][1], r[i][2]));
      V::store(o + (i * 4 + 2) * xi_stride, V::sub(r[i][2], r[i][1]));
      V::store(o + (i * 4 + 3) * xi_stride, V::sub(r[i][1], r[i][3]));
    }
  }
}

// Y = A^T M A for tile `t` (counting over the batch; `slot` from the chunk's first) of output
// channel block `ov`, then the epilogue.
template <class V>
void transform_output(const Conv3x3& s, const Geometry& g, const float* m, const Epilogue& e,
                      float* dst, int64_t ov, int64_t t, int64_t slot) {
  using R = typename V::R;
  constexpr int64_t kVec = V::kWidth;
  const size_t xi_stride = static_cast<size_t>(g.m_plane);
  const R bias = e.bias ? V::load(e.bias + ov * kVec) : V::zero();
  const int64_t image = t / g.image_tiles, tile = t % g.image_tiles;
  float* plane = dst + image * g.out.image + ov * g.out.block;
  const int64_t ty = tile / g.tiles_w, tx = tile % g.tiles_w;
  const float* p = m + slot * s.out_channels + ov * kVec;
  R r[2][4];  // A^T M
  for (int k = 0; k < 4; ++k) {
    const R m0 = V::load(p + (0 * 4 + k) * xi_stride);
    const R m1 = V::load(p + (1 * 4 + k) * xi_stride);
    const R m2 = V::load(p + (2 * 4 + k) * xi_stride);
    const R m3 = V::load(p + (3 * 4 + k) * xi_stride);
    r[0][k] = V::add(V::add(m0, m1), m2);
    r[1][k] = V::sub(V::sub(m1, m2), m3);
  }
  for (int i = 0; i < 2; ++i) {  // (A^T M) A
    const int64_t y = ty * 2 + i;
    if (y >= s.out_h) break;
    const R out[2] = {V::add(V::add(r[i][0], r[i][1]), r[i][2]),
                      V::sub(V::sub(r[i][1], r[i][2]), r[i][3])};
    for (int k = 0; k < 2; ++k) {
      const int64_t x = tx * 2 + k;
      if (x >= s.out_w) break;
      float* o = plane + (y * s.out_w + x) * g.out.pixel;
      R value = V::add(out[k], bias);
      if (e.accumulate) value = V::add(value, V::load(o));
      V::store(o, activate<V>(value, e.activation));
    }
  }
}

}  // namespace kiln::hal::cpu::winograd::detail
