// y = f(x) elementwise on f32, f chosen by the specialization constant OP (elementwise_ops.cc
// lists the codes). Semantics follow kiln's op definitions (kernels/unary.cc), NaN included.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;

layout(push_constant) uniform Push {
  F32 x;
  F32 y;
  uint base;
  uint n;
  float alpha;
  float beta;
} pc;

// Float erf as in Eigen (a rational approximation on [-4, 4], within a few ulp).
float erf_approx(float x) {
  if (isnan(x)) return x;
  x = min(max(x, -4.0), 4.0);
  float x2 = x * x;
  float p = x2 * -2.72614225801306e-10 + 2.77068142495902e-08;
  p = p * x2 + -2.10102402082508e-06;
  p = p * x2 + -5.69250639462346e-05;
  p = p * x2 + -7.34990630326855e-04;
  p = p * x2 + -2.95459980854025e-03;
  p = p * x2 + -1.60960333262415e-02;
  p = p * x;
  float q = x2 * -1.45660718464996e-05 + -2.13374055278905e-04;
  q = q * x2 + -1.68282697438203e-03;
  q = q * x2 + -7.37332916720468e-03;
  q = q * x2 + -1.42647390514189e-02;
  return p / q;
}

// tanh saturates to +-1 beyond |x| = 9, where the float result is 1; computed directly it would
// overflow exp in some drivers.
float tanh_safe(float x) { return abs(x) > 9.0 ? sign(x) : tanh(x); }

float apply(float x) {
  switch (OP) {
    case 0: return x < 0.0 ? 0.0 : x;                                            // Relu
    case 1: if (x >= 0.0) return 1.0 / (1.0 + exp(-x)); else { float e = exp(x); return e / (1.0 + e); }  // Sigmoid
    case 2: return tanh_safe(x);                                                 // Tanh
    case 3: return erf_approx(x);                                                // Erf
    case 4: return 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476));         // Gelu
    case 5: return 0.5 * x * (1.0 + tanh_safe(0.7978845608028654 * (x + 0.044715 * x * x * x)));  // Gelu tanh
    case 6: return exp(x);                                                       // Exp
    case 7: return log(x);                                                       // Log
    case 8: return sqrt(x);                                                      // Sqrt
    case 9: return -x;                                                           // Neg
    case 10: return abs(x);                                                      // Abs
    case 11: return 1.0 / x;                                                     // Reciprocal
    case 12: return x < 0.0 ? pc.alpha * x : x;                                  // LeakyRelu
    case 13: if (isnan(x)) return x; return max(0.0, min(1.0, pc.alpha * x + pc.beta));  // HardSigmoid
    case 14: return x * max(0.0, min(1.0, x / 6.0 + 0.5));                       // HardSwish
    case 15: return x < 0.0 ? pc.alpha * (exp(x) - 1.0) : x;                      // Elu
    case 16: return (x > 0.0 ? x : 0.0) + log(1.0 + exp(-abs(x)));               // Softplus
    case 17: return floor(x);                                                    // Floor
    case 18: return ceil(x);                                                     // Ceil
    case 19: return roundEven(x);                                                // Round
    case 20: return x / (1.0 + abs(x));                                          // Softsign
    case 21: if (isnan(x)) return x; return x < pc.alpha ? pc.alpha : (x > pc.beta ? pc.beta : x);  // Clip
    case 22: return x * tanh_safe((x > 0.0 ? x : 0.0) + log(1.0 + exp(-abs(x))));  // Mish
  }
  return x;
}

void main() {
  uint i = element_index(pc.base);
  if (i < pc.n) pc.y.v[i] = apply(pc.x.v[i]);
}
