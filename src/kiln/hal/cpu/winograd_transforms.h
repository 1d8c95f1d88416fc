// The Winograd F(2x2, 3x3) and F(4x4, 3x3) input and output transforms (winograd_conv.h),
// written once over a vector type `V` that each ISA file supplies (winograd_conv_avx2.cc,
// winograd_conv_avx512.cc):
//   using R = the register type;  static constexpr int64_t kWidth (floats per R);
//   static R zero(), load(const float*), set1(float), add(R, R), sub(R, R), mul(R, R),
//   fmadd(R a, R b, R c) (a b + c, rounded once), max(R, R), min(R, R), below_zero(R y, R a)
//   (a where y < 0, else y); static void store(float*, R).
// Every operation is spelled out (fmadd where a product is added, add or mul where not), so both
// ISAs run the same sequence of roundings whatever the compiler's contraction setting.
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
    case Kind::kSilu:  // never: build_winograd_conv applies SiLU and Mish after the step
    case Kind::kMish:
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

// The 1-D transforms of one tile edge: B^T applied to a column (or row) of a patch's values, and
// A^T to a column (or row) of products. The 2-D transforms apply them to each column, then to
// each row of the result: row i of B^T d B is B^T applied to row i of B^T d (and so for A).
template <class V, int64_t Tile>
struct Transform1d;

template <class V>
struct Transform1d<V, 2> {
  using R = typename V::R;
  static constexpr int kAlpha = 4;
  static void input(const R (&d)[4], R (&o)[4]) {
    o[0] = V::sub(d[0], d[2]);
    o[1] = V::add(d[1], d[2]);
    o[2] = V::sub(d[2], d[1]);
    o[3] = V::sub(d[1], d[3]);
  }
  static void output(const R (&m)[4], R (&y)[2]) {
    y[0] = V::add(V::add(m[0], m[1]), m[2]);
    y[1] = V::sub(V::sub(m[1], m[2]), m[3]);
  }
};

// Lavin and Gray's F(4x4, 3x3): B^T rows (4 0 -5 0 1 0), (0 -4 -4 1 1 0), (0 4 -4 -1 1 0),
// (0 -2 -1 2 1 0), (0 2 -1 -2 1 0), (0 4 0 -5 0 1); A^T rows (1 1 1 1 1 0), (0 1 -1 2 -2 0),
// (0 1 1 4 4 0), (0 1 -1 8 -8 1). Shared partial sums keep the additions few.
template <class V>
struct Transform1d<V, 4> {
  using R = typename V::R;
  static constexpr int kAlpha = 6;
  static void input(const R (&d)[6], R (&o)[6]) {
    const R four = V::set1(4.0f), minus_four = V::set1(-4.0f), minus_five = V::set1(-5.0f);
    const R two = V::set1(2.0f), minus_two = V::set1(-2.0f);
    const R a = V::fmadd(minus_four, d[2], d[4]);  // d4 - 4 d2
    const R b = V::fmadd(minus_four, d[1], d[3]);  // d3 - 4 d1
    const R c = V::sub(d[4], d[2]);
    const R e = V::sub(d[3], d[1]);
    o[0] = V::fmadd(minus_five, d[2], V::fmadd(four, d[0], d[4]));
    o[1] = V::add(a, b);
    o[2] = V::sub(a, b);
    o[3] = V::fmadd(two, e, c);
    o[4] = V::fmadd(minus_two, e, c);
    o[5] = V::fmadd(minus_five, d[3], V::fmadd(four, d[1], d[5]));
  }
  static void output(const R (&m)[6], R (&y)[4]) {
    const R p = V::add(m[1], m[2]), q = V::sub(m[1], m[2]);
    const R s = V::add(m[3], m[4]), t = V::sub(m[3], m[4]);
    y[0] = V::add(V::add(m[0], p), s);
    y[1] = V::fmadd(V::set1(2.0f), t, q);
    y[2] = V::fmadd(V::set1(4.0f), s, p);
    y[3] = V::add(V::fmadd(V::set1(8.0f), t, q), m[5]);
  }
};

// The input patch of tile `t` (counting over the batch), channel block `cb`: d[i][k] for the
// pixel i rows and k columns from the patch's corner, zero outside the image (and for tiles past
// the batch's last).
template <class V, int kAlpha>
void load_patch(const Conv3x3& s, const Geometry& g, const float* src, int64_t t, int64_t cb,
                typename V::R (&d)[kAlpha][kAlpha]) {
  if (t >= g.tiles) {
    for (auto& row : d)
      for (auto& x : row) x = V::zero();
    return;
  }
  const int64_t image = t / g.image_tiles, tile = t % g.image_tiles;
  const float* plane = src + image * g.in.image + cb * g.in.block;
  const int64_t y0 = (tile / g.tiles_w) * g.tile - s.pad_top;
  const int64_t x0 = (tile % g.tiles_w) * g.tile - s.pad_left;
  if (y0 >= 0 && y0 + kAlpha <= s.in_h && x0 >= 0 && x0 + kAlpha <= s.in_w) {  // inside
    const float* row = plane + (y0 * s.in_w + x0) * g.in.pixel;
    for (int i = 0; i < kAlpha; ++i, row += s.in_w * g.in.pixel) {
      for (int k = 0; k < kAlpha; ++k) d[i][k] = V::load(row + k * g.in.pixel);
    }
    return;
  }
  for (int i = 0; i < kAlpha; ++i) {
    const int64_t y = y0 + i;
    for (int k = 0; k < kAlpha; ++k) {
      const int64_t x = x0 + k;
      d[i][k] = (y < 0 || y >= s.in_h || x < 0 || x >= s.in_w)
                    ? V::zero()
                    : V::load(plane + (y * s.in_w + x) * g.in.pixel);
    }
  }
}

// V = B^T d B for the tiles of register block `block` (counting over the batch), channel block
// `cb`, written at the chunk's block `slot`.
template <class V, int64_t Tile>
void transform_input(const Conv3x3& s, const Geometry& g, const float* src, float* v, int64_t block,
                     int64_t slot, int64_t cb) {
  using R = typename V::R;
  using T = Transform1d<V, Tile>;
  constexpr int kAlpha = T::kAlpha;
  constexpr int64_t kVec = V::kWidth;
  const int64_t per_block = g.k.tiles_per_block;
  const size_t xi_stride = static_cast<size_t>(g.v_plane);
  float* out = v + (slot * g.cb + cb) * per_block * kVec;
  for (int64_t j = 0; j < per_block; ++j) {
    R d[kAlpha][kAlpha];
    load_patch<V, kAlpha>(s, g, src, block * per_block + j, cb, d);
    R r[kAlpha][kAlpha];  // (B^T d)^T: row k holds B^T applied to column k of d
    for (int k = 0; k < kAlpha; ++k) {
      R column[kAlpha];
      for (int i = 0; i < kAlpha; ++i) column[i] = d[i][k];
      T::input(column, r[k]);
    }
    float* o = out + j * kVec;
    for (int i = 0; i < kAlpha; ++i) {  // row i of (B^T d) B
      R row[kAlpha], transformed[kAlpha];
      for (int k = 0; k < kAlpha; ++k) row[k] = r[k][i];
      T::input(row, transformed);
      for (int k = 0; k < kAlpha; ++k) V::store(o + (i * kAlpha + k) * xi_stride, transformed[k]);
    }
  }
}

// Y = A^T M A for tile `t` (counting over the batch; `slot` from the chunk's first) of output
// channel block `ov`, then the epilogue.
template <class V, int64_t Tile>
void transform_output(const Conv3x3& s, const Geometry& g, const float* m, const Epilogue& e,
                      float* dst, int64_t ov, int64_t t, int64_t slot) {
  using R = typename V::R;
  using T = Transform1d<V, Tile>;
  constexpr int kAlpha = T::kAlpha;
  constexpr int64_t kVec = V::kWidth;
  const size_t xi_stride = static_cast<size_t>(g.m_plane);
  const R bias = e.bias ? V::load(e.bias + ov * kVec) : V::zero();
  const int64_t image = t / g.image_tiles, tile = t % g.image_tiles;
  float* plane = dst + image * g.out.image + ov * g.out.block;
  const int64_t ty = tile / g.tiles_w, tx = tile % g.tiles_w;
  const float* p = m + slot * s.out_channels + ov * kVec;
  R r[kAlpha][Tile];  // (A^T M)^T: row k holds A^T applied to column k of M
  for (int k = 0; k < kAlpha; ++k) {
    R column[kAlpha];
    for (int i = 0; i < kAlpha; ++i) column[i] = V::load(p + (i * kAlpha + k) * xi_stride);
    T::output(column, r[k]);
  }
  for (int i = 0; i < Tile; ++i) {  // row i of (A^T M) A
    const int64_t y = ty * Tile + i;
    if (y >= s.out_h) break;
    R row[kAlpha], out[Tile];
    for (int k = 0; k < kAlpha; ++k) row[k] = r[k][i];
    T::output(row, out);
    for (int k = 0; k < Tile; ++k) {
      const int64_t x = tx * Tile + k;
      if (x >= s.out_w) break;
      float* o = plane + (y * s.out_w + x) * g.out.pixel;
      R value = V::add(out[k], bias);
      if (e.accumulate && !e.accumulate_after_activation) value = V::add(value, V::load(o));
      value = activate<V>(value, e.activation);
      if (e.accumulate && e.accumulate_after_activation) value = V::add(value, V::load(o));
      V::store(o, value);
    }
  }
}

}  // namespace kiln::hal::cpu::winograd::detail
