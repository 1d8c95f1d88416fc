// The vector code of gemm_activation.h, written once over an ISA's vector operations `V` (max(a, b)
// returning b where either is NaN or both are zeros, as x86's max does) and compiled in
// gemm_activation_avx2.cc and gemm_activation_avx512.cc under their target options. Include only
// there, inside those options.
#pragma once

#include <cstdint>

#include "kiln/hal/cpu/gemm_activation.h"

namespace kiln::hal::cpu::gemm::detail {

// `sign` * 1 where |x| >= limit, else num / den: num = x P(x^2), den = Q(x^2) by Horner's rule
// with fused multiply-adds, coefficients from the highest power down.
template <class V, int NP, int NQ>
typename V::R rational_odd(typename V::R x, const float (&p)[NP], const float (&q)[NQ],
                           float limit) {
  using R = typename V::R;
  const R x2 = V::mul(x, x);
  R num = V::set1(p[0]);
  for (int i = 1; i < NP; ++i) num = V::fmadd(x2, num, V::set1(p[i]));
  num = V::mul(x, num);
  R den = V::set1(q[0]);
  for (int i = 1; i < NQ; ++i) den = V::fmadd(x2, den, V::set1(q[i]));
  R r = V::div(num, den);
  r = V::where_at_least(x, limit, V::set1(1.0f), r);
  return V::where_at_most(x, -limit, V::set1(-1.0f), r);
}

template <class V>
typename V::R erf_approx(typename V::R d) {
  static constexpr float kP[] = {-2.72614225801306e-10f, 2.77068142495902e-08f,
                                 -2.10102402082508e-06f, -5.69250639462346e-05f,
                                 -7.34990630326855e-04f, -2.95459980854025e-03f,
                                 -1.60960333262415e-02f};
  static constexpr float kQ[] = {-1.45660718464996e-05f, -2.13374055278905e-04f,
                                 -1.68282697438203e-03f, -7.37332916720468e-03f,
                                 -1.42647390514189e-02f};
  return rational_odd<V>(d, kP, kQ, 4.0f);
}

template <class V>
typename V::R tanh_approx(typename V::R z) {
  static constexpr float kP[] = {
      -2.76076847742355e-16f, 2.00018790482477e-13f, -8.60467152213735e-11f, 5.12229709037114e-08f,
      1.48572235717979e-05f,  6.37261928875436e-04f, 4.89352455891786e-03f};
  static constexpr float kQ[] = {1.19825839466702e-06f, 1.18534705686654e-04f,
                                 2.26843463243900e-03f, 4.89352518554385e-03f};
  return rational_odd<V>(z, kP, kQ, 7.90531110763549805f);
}

// GELU in the form `kForm` (kGelu or kGeluTanh).
template <class V, Activation kForm>
typename V::R gelu(typename V::R x) {
  using R = typename V::R;
  R t;
  if constexpr (kForm == Activation::kGelu) {
    t = erf_approx<V>(V::mul(x, V::set1(0.70710678118654752f)));
  } else {
    const R x3 = V::mul(V::mul(x, x), x);
    const R inner = V::fmadd(V::set1(0.044715f), x3, x);
    t = tanh_approx<V>(V::mul(V::set1(0.79788456080286536f), inner));
  }
  return V::mul(V::mul(x, V::set1(0.5f)), V::add(V::set1(1.0f), t));
}

// max(+0, x) returns x where x is NaN or a zero (x86's max returns its second operand then).
template <class V>
typename V::R relu(typename V::R x) {
  return V::max(V::set1(0.0f), x);
}

template <class V, Activation kActivation>
typename V::R activate(typename V::R x) {
  if constexpr (kActivation == Activation::kRelu) {
    return relu<V>(x);
  } else {
    return gelu<V, kActivation>(x);
  }
}

// One activation over the rows, chosen at compile time so that its code is inlined into the loop.
// (Chosen per vector, GELU was a call per vector with its constants loaded anew each time: half
// the speed over whole rows in a harness, Zen 5; within the gemm's 8 x 48 blocks the difference
// was below the noise.)
template <class V, Activation kActivation>
void activate_rows_with(float* y, int64_t ldy, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * ldy;
    int64_t c = 0;
    for (; c + V::kWidth <= cols; c += V::kWidth)
      V::store(row + c, activate<V, kActivation>(V::load(row + c)));
    if (c < cols) {
      const auto mask = V::mask(cols - c);
      V::store_partial(row + c, mask, activate<V, kActivation>(V::load_partial(row + c, mask)));
    }
  }
}

template <class V>
void activate_rows(Activation activation, float* y, int64_t ldy, int64_t rows, int64_t cols) {
  switch (activation) {
    case Activation::kRelu: activate_rows_with<V, Activation::kRelu>(y, ldy, rows, cols); return;
    case Activation::kGelu: activate_rows_with<V, Activation::kGelu>(y, ldy, rows, cols); return;
    case Activation::kGeluTanh:
      activate_rows_with<V, Activation::kGeluTanh>(y, ldy, rows, cols);
      return;
    case Activation::kNone: return;
  }
}

}  // namespace kiln::hal::cpu::gemm::detail
