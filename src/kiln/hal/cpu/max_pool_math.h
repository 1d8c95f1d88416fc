// The vector code of max_pool_step.h, written once over an ISA's vector operations `V` and
// compiled in max_pool_avx2.cc and max_pool_avx512.cc under their target options. Include only
// there, inside those options.
//
// V provides: R (a vector of kWidth floats), Flags (per-lane flags), Tail (which lanes of a
// partial vector exist, tail(count)); load/store of a whole vector, and of the lanes `tail`
// holds; set1; none() (no flag); take_max(v, m) (v where v > m, else m: x86's max with the new
// value first, which keeps m for equal values and for a NaN v); is_nan(v); first_nan(nan, seen)
// (nan and not seen); select(flags, then, other); either(a, b); outside(v, bound[, tail]) (NaN or
// |v| > bound, in the lanes that exist); any(flags).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kiln/hal/cpu/max_pool_step.h"

namespace kiln::hal::cpu::detail {

// The first and end tap along one spatial dim whose positions start * stride - pad + k * dilation
// lie in [0, extent).
struct TapRange {
  int64_t first = 0, end = 0;
};

inline TapRange taps(int64_t out, int64_t stride, int64_t pad, int64_t dilation, int64_t kernel,
                     int64_t extent) {
  const int64_t start = out * stride - pad;
  int64_t first = 0;
  if (start < 0) first = (-start + dilation - 1) / dilation;
  int64_t end = kernel;
  const int64_t last_inside = extent - 1 - start;  // the largest k * dilation inside
  end = std::min(end, last_inside < 0 ? int64_t{0} : last_inside / dilation + 1);
  return TapRange{first, std::max(first, end)};
}

// Where an output pixel's window lies: its taps [first, end) along each dim, at input row
// top + kh * dilations[0] and column left + kw * dilations[1].
struct Window {
  TapRange rows, cols;
  int64_t top = 0, left = 0;
};

// kCount vectors of channels side by side of one output pixel, over its window's taps.
template <class V, int kCount, bool kPartial>
inline typename V::Flags pool_channels(const MaxPoolShape& s, const float* xs, const Window& win,
                                       float* y, typename V::Tail tail, typename V::R bound) {
  using R = typename V::R;
  using Flags = typename V::Flags;
  constexpr int64_t kWidth = V::kWidth;
  R m[kCount];
  Flags seen[kCount];
  for (int u = 0; u < kCount; ++u) {
    m[u] = V::set1(-std::numeric_limits<float>::infinity());
    seen[u] = V::none();
  }
  for (int64_t kh = win.rows.first; kh < win.rows.end; ++kh) {
    const float* xr = xs + (win.top + kh * s.dilations[0]) * s.w * s.c;
    for (int64_t kw = win.cols.first; kw < win.cols.end; ++kw) {
      const float* p = xr + (win.left + kw * s.dilations[1]) * s.c;
#pragma GCC unroll 4
      for (int u = 0; u < kCount; ++u) {
        const R v =
            kPartial && u == kCount - 1 ? V::load(p + u * kWidth, tail) : V::load(p + u * kWidth);
        const Flags nan = V::is_nan(v);
        m[u] = V::select(V::first_nan(nan, seen[u]), v, V::take_max(v, m[u]));
        seen[u] = V::either(seen[u], nan);
      }
    }
  }
  Flags outside = V::none();
  for (int u = 0; u < kCount; ++u) {
    if (kPartial && u == kCount - 1) {
      V::store(y + u * kWidth, m[u], tail);
      outside = V::either(outside, V::outside(m[u], bound, tail));
    } else {
      V::store(y + u * kWidth, m[u]);
      outside = V::either(outside, V::outside(m[u], bound));
    }
  }
  return outside;
}

template <class V>
bool max_pool_rows(const MaxPoolShape& s, const float* x, float* y, int64_t first, int64_t last,
                   float bound) {
  constexpr int64_t kWidth = V::kWidth;
  const typename V::R limit = V::set1(bound);
  const int64_t full = s.c / kWidth * kWidth;
  const typename V::Tail tail = V::tail(s.c - full);
  typename V::Flags outside = V::none();
  bool empty_window = false;
  for (int64_t r = first; r < last; ++r) {
    const int64_t n = r / s.out_h, i = r % s.out_h;
    const float* xs = x + n * s.h * s.w * s.c;
    Window win;
    win.rows = taps(i, s.strides[0], s.pads[0], s.dilations[0], s.kernel[0], s.h);
    win.top = i * s.strides[0] - s.pads[0];
    for (int64_t j = 0; j < s.out_w; ++j) {
      float* yp = y + ((n * s.out_h + i) * s.out_w + j) * s.c;
      win.cols = taps(j, s.strides[1], s.pads[1], s.dilations[1], s.kernel[1], s.w);
      win.left = j * s.strides[1] - s.pads[1];
      if (win.rows.first == win.rows.end || win.cols.first == win.cols.end) {
        std::fill(yp, yp + s.c, std::numeric_limits<float>::lowest());
        empty_window = true;
        continue;
      }
      int64_t c = 0;
      for (; c + 4 * kWidth <= full; c += 4 * kWidth) {
        outside =
            V::either(outside, pool_channels<V, 4, false>(s, xs + c, win, yp + c, tail, limit));
      }
      for (; c < full; c += kWidth) {
        outside =
            V::either(outside, pool_channels<V, 1, false>(s, xs + c, win, yp + c, tail, limit));
      }
      if (c < s.c) {
        outside =
            V::either(outside, pool_channels<V, 1, true>(s, xs + c, win, yp + c, tail, limit));
      }
    }
  }
  // A window without taps gives the lowest finite float: within the bound only if FLT_MAX is.
  const bool lowest_within = !empty_window || std::numeric_limits<float>::max() <= bound;
  return !V::any(outside) && lowest_within;
}

}  // namespace kiln::hal::cpu::detail
