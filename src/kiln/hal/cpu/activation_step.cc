#include "kiln/hal/cpu/activation_step.h"

#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kiln/hal/cpu/cpu_isa.h"
#include "kiln/hal/cpu/parallel_pieces.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/hal/cpu/vector_map_kernels.h"

namespace kiln::hal::cpu {
namespace {

#define KILN_AVX2 __attribute__((target("avx2,fma")))

using Kind = kernels::FusedActivation::Kind;

constexpr int64_t kVec = 8;

bool have_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2;
}

// max/min return their second operand when either is NaN, so the bound goes first: a NaN stays
// NaN, and the result equals FusedActivation::apply bit for bit (-0 included).
KILN_AVX2 void activate_avx2(const kernels::FusedActivation& a, const float* in, float* out,
                             int64_t n) {
  const __m256 lo = _mm256_set1_ps(a.kind == Kind::kRelu ? 0.0f : static_cast<float>(a.min));
  const __m256 hi = _mm256_set1_ps(static_cast<float>(a.max));
  int64_t i = 0;
  if (a.kind == Kind::kLeakyRelu) {
    // x < 0 is false for NaN and -0, which stay as they are.
    const __m256 alpha = _mm256_set1_ps(static_cast<float>(a.alpha));
    for (; i + kVec <= n; i += kVec) {
      const __m256 x = _mm256_loadu_ps(in + i);
      const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
      _mm256_storeu_ps(out + i, _mm256_blendv_ps(x, _mm256_mul_ps(alpha, x), negative));
    }
  } else if (a.kind == Kind::kRelu) {
    for (; i + kVec <= n; i += kVec) {
      _mm256_storeu_ps(out + i, _mm256_max_ps(lo, _mm256_loadu_ps(in + i)));
    }
  } else {
    for (; i + kVec <= n; i += kVec) {
      _mm256_storeu_ps(out + i, _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_loadu_ps(in + i))));
    }
  }
  for (; i < n; ++i) out[i] = a.apply(in[i]);
}

#define KILN_AVX512 __attribute__((target("avx512f,avx2,fma")))

// Relu and clip on 16 lanes, as activate_avx2 on 8 (max and min are exact: the same bits), for the
// small tensors of a mobile CNN, where the pass runs from L1 and L2.
KILN_AVX512 void bound_avx512(const kernels::FusedActivation& a, const float* in, float* out,
                              int64_t n) {
  const __m512 lo = _mm512_set1_ps(a.kind == Kind::kRelu ? 0.0f : static_cast<float>(a.min));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(a.max));
  const bool clip = a.kind == Kind::kClip;
  int64_t i = 0;
  // (Masked forms with every lane set: GCC 12's plain _mm512_max_ps/_mm512_min_ps trip
  // -Wmaybe-uninitialized on their undefined pass-through operand.)
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_maskz_max_ps(0xffff, lo, _mm512_loadu_ps(in + i));
    if (clip) v = _mm512_maskz_min_ps(0xffff, hi, v);
    _mm512_storeu_ps(out + i, v);
  }
  for (; i < n; ++i) out[i] = a.apply(in[i]);
}

void activate(const kernels::FusedActivation& a, const float* in, float* out, int64_t n) {
  // GELU is a MatMul epilogue (gemm_kernel.h); should a step get it, the scalar rule applies.
  if ((a.kind == Kind::kSilu || a.kind == Kind::kMish) && have_avx2()) {
    const auto f =
        a.kind == Kind::kSilu ? vector_map::Function::kSilu : vector_map::Function::kMish;
    return vector_map::apply(f, in, out, n);
  }
  const bool vector = a.kind == Kind::kRelu || a.kind == Kind::kClip || a.kind == Kind::kLeakyRelu;
  static const bool avx512 = best_isa() == Isa::kAvx512;
  if (avx512 && (a.kind == Kind::kRelu || a.kind == Kind::kClip)) {
    return bound_avx512(a, in, out, n);
  }
  if (have_avx2() && vector) return activate_avx2(a, in, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = a.apply(in[i]);
}

// Which non-finite values `x` holds. !(x < +inf) is true for NaN and +inf only.
KILN_AVX2 NonFinite scan_non_finite_avx2(const float* x, int64_t n) {
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 hit = _mm256_setzero_ps(), neg = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 * kVec <= n; i += 2 * kVec) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + kVec);
    hit = _mm256_or_ps(
        hit, _mm256_or_ps(_mm256_cmp_ps(a, inf, _CMP_NLT_UQ), _mm256_cmp_ps(b, inf, _CMP_NLT_UQ)));
    neg = _mm256_or_ps(neg, _mm256_or_ps(_mm256_cmp_ps(a, neg_inf, _CMP_EQ_OQ),
                                         _mm256_cmp_ps(b, neg_inf, _CMP_EQ_OQ)));
  }
  NonFinite r{_mm256_movemask_ps(hit) != 0, _mm256_movemask_ps(neg) != 0};
  for (; i < n; ++i) {
    r.nan_or_pos_inf |= !(x[i] < std::numeric_limits<float>::infinity());
    r.neg_inf |= x[i] == -std::numeric_limits<float>::infinity();
  }
  return r;
}

NonFinite scan_non_finite_in(const float* x, int64_t n) {
  if (have_avx2()) return scan_non_finite_avx2(x, n);
  NonFinite r;
  for (int64_t i = 0; i < n; ++i) {
    r.nan_or_pos_inf |= !(x[i] < std::numeric_limits<float>::infinity());
    r.neg_inf |= x[i] == -std::numeric_limits<float>::infinity();
  }
  return r;
}

size_t float_count(const dnnl_desc& layout) { return layout.get_size() / sizeof(float); }

std::string label_of(const ProgramBuilder& b, const kernels::FusedActivation& a,
                     const dnnl_desc& layout) {
  return b.label(fmt::format("{} (kiln, keeps NaN) {}", kernels::describe(a), describe(layout)));
}

}  // namespace

void apply_activation(const kernels::FusedActivation& activation, const float* in, float* out,
                      size_t count) {
  parallel_pieces(static_cast<int64_t>(count), [&](int64_t begin, int64_t n) {
    activate(activation, in + begin, out + begin, n);
  });
}

Status VectorMapStep::run(const ExecContext& ctx) {
  const auto* in = reinterpret_cast<const float*>(ctx.resolve(in_));
  auto* out = reinterpret_cast<float*>(ctx.resolve(out_));
  static const Isa isa = best_isa();
  const vector_map::Function function = function_;
  parallel_pieces(static_cast<int64_t>(count_), [&](int64_t begin, int64_t n) {
    vector_map::apply(function, in + begin, out + begin, n, isa);
  });
  return ok_status();
}

Status ActivationStep::run(const ExecContext& ctx) {
  apply_activation(activation_, reinterpret_cast<const float*>(ctx.resolve(in_)),
                   reinterpret_cast<float*>(ctx.resolve(out_)), count_);
  return ok_status();
}

namespace {

// EltwiseEdgeStep's rule over elements [begin, begin + n): one vectorized pass tells whether they
// hold a non-finite value at all; nearly every piece does not, and the element loop (branchy,
// scalar) then never runs.
void fix_edges(EdgeRule rule, float alpha, const float* in, float* out, int64_t begin, int64_t n) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const NonFinite found = scan_non_finite_in(in + begin, n);
  if (!found.nan_or_pos_inf && !found.neg_inf) return;
  for (int64_t i = begin; i < begin + n; ++i) {
    const float x = in[i];
    if (std::isfinite(x)) continue;
    if (std::isnan(x)) {
      out[i] = kNaN;
      continue;
    }
    switch (rule) {
      case EdgeRule::kGelu: out[i] = x > 0 ? x : kNaN; break;
      case EdgeRule::kSigmoid: out[i] = x > 0 ? 1.0f : 0.0f; break;
      case EdgeRule::kTanh: out[i] = x > 0 ? 1.0f : -1.0f; break;
      case EdgeRule::kExp: out[i] = x > 0 ? x : 0.0f; break;
      case EdgeRule::kElu: out[i] = x > 0 ? x : -alpha; break;
    }
  }
}

}  // namespace

Status EltwiseEdgeStep::run(const ExecContext& ctx) {
  const auto* in = reinterpret_cast<const float*>(ctx.resolve(in_));
  auto* out = reinterpret_cast<float*>(ctx.resolve(out_));
  parallel_pieces(static_cast<int64_t>(count_),
                  [&](int64_t begin, int64_t n) { fix_edges(rule_, alpha_, in, out, begin, n); });
  return ok_status();
}

Status MaxPoolNanStep::run(const ExecContext& ctx) {
  const auto* mask = reinterpret_cast<const float*>(ctx.resolve(mask_));
  auto* out = reinterpret_cast<float*>(ctx.resolve(out_));
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int64_t count = static_cast<int64_t>(count_);
  std::atomic<bool> under_inf{false};
  parallel_pieces(count, [&](int64_t begin, int64_t n) {
    for (int64_t i = begin; i < begin + n; ++i) {
      if (std::isnan(mask[i])) {
        if (out[i] != kInf) {
          out[i] = kNaN;
        } else {
          under_inf.store(true, std::memory_order_relaxed);
        }
      }
    }
  });
  if (under_inf.load(std::memory_order_relaxed)) {
    nan_taps_under_inf(reinterpret_cast<const float*>(ctx.resolve(src_)), mask, out);
  }
  return ok_status();
}

void MaxPoolNanStep::nan_taps_under_inf(const float* src, const float* mask, float* out) const {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const PoolWindows& w = windows_;
  const dnnl_dims in_dims = w.src_layout.dims(), out_dims = w.dst_layout.dims();
  const size_t rank = out_dims.size(), r = rank - 2;
  int64_t outputs = 1;
  for (int64_t d : out_dims) outputs *= d;
  // Scratch for the indices on the stack: pooling has at most 3 spatial dims.
  int64_t o[DNNL_MAX_NDIMS] = {}, tap[DNNL_MAX_NDIMS] = {}, at[DNNL_MAX_NDIMS] = {};
  for (int64_t flat = 0; flat < outputs; ++flat) {
    int64_t rest = flat;
    for (size_t d = rank; d-- > 0;) {
      o[d] = rest % out_dims[d];
      rest /= out_dims[d];
    }
    const int64_t here = element_offset(w.dst_layout, std::span<const int64_t>(o, rank));
    if (!std::isnan(mask[here]) || out[here] != kInf) continue;
    int64_t taps = 1;
    for (size_t i = 0; i < r; ++i) taps *= w.kernel[i];
    at[0] = o[0];
    at[1] = o[1];
    for (int64_t t = 0; t < taps; ++t) {
      int64_t rem = t;
      bool inside = true;
      for (size_t i = r; i-- > 0;) {
        tap[i] = rem % w.kernel[i];
        rem /= w.kernel[i];
        at[2 + i] = o[2 + i] * w.strides[i] - w.pads_begin[i] + tap[i] * w.dilations[i];
        inside = inside && at[2 + i] >= 0 && at[2 + i] < in_dims[2 + i];
      }
      if (inside &&
          std::isnan(src[element_offset(w.src_layout, std::span<const int64_t>(at, rank))])) {
        out[here] = std::numeric_limits<float>::quiet_NaN();
        break;
      }
    }
  }
}

NonFinite scan_non_finite(const float* x, int64_t count) {
  std::atomic<bool> nan_or_pos_inf{false}, neg_inf{false};
  parallel_pieces(count, [&](int64_t begin, int64_t n) {
    const NonFinite r = scan_non_finite_in(x + begin, n);
    if (r.nan_or_pos_inf) nan_or_pos_inf.store(true, std::memory_order_relaxed);
    if (r.neg_inf) neg_inf.store(true, std::memory_order_relaxed);
  });
  return {nan_or_pos_inf.load(std::memory_order_relaxed), neg_inf.load(std::memory_order_relaxed)};
}

Status SoftmaxNanStep::run(const ExecContext& ctx) {
  const auto* in = reinterpret_cast<const float*>(ctx.resolve(in_));
  const NonFinite seen = scan_non_finite(in, outer_ * n_ * inner_);
  if (!seen.nan_or_pos_inf && !seen.neg_inf) return ok_status();
  auto* out = reinterpret_cast<float*>(ctx.resolve(out_));
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int64_t n = n_, inner = inner_, lanes = outer_ * inner_;
  // With -inf only (an attention mask), a lane needs a look up to its first value above -inf.
  const bool full = seen.nan_or_pos_inf;
#pragma omp parallel for schedule(static) if (lanes * n >= 2 * kMinPieceElements)
  for (int64_t lane = 0; lane < lanes; ++lane) {
    const int64_t base = (lane / inner) * n * inner + lane % inner;
    bool poisoned = false, above_neg_inf = false;
    for (int64_t k = 0; k < n; ++k) {
      const float v = in[base + k * inner];
      if (!(v < kInf)) {
        poisoned = true;
        break;
      }
      above_neg_inf = above_neg_inf || v != -kInf;
      if (above_neg_inf && !full) break;
    }
    if (!poisoned && above_neg_inf) continue;
    for (int64_t k = 0; k < n; ++k) out[base + k * inner] = kNaN;
  }
  return ok_status();
}

void add_activation(ProgramBuilder& b, const BufferRef& in, const BufferRef& out,
                    const dnnl_desc& layout, const kernels::FusedActivation& activation) {
  if (activation.kind == Kind::kNone) {
    if (in.kind != out.kind || in.value != out.value || in.offset != out.offset ||
        in.fixed != out.fixed) {
      b.add_reorder(in, layout, out, layout);
    }
    return;
  }
  if (has_padding(layout) && activation.apply(0.0f) != 0.0f) {
    const dnnl_desc plain = plain_desc(layout.dims());
    const BufferRef t = b.temp(plain.get_size());
    b.add_reorder(in, layout, t, plain);
    b.add(std::make_unique<ActivationStep>(label_of(b, activation, plain), activation, t, t,
                                           float_count(plain)));
    b.add_reorder(t, plain, out, layout);
    return;
  }
  b.add(std::make_unique<ActivationStep>(label_of(b, activation, layout), activation, in, out,
                                         float_count(layout)));
}

void add_activation(ProgramBuilder& b, const BufferRef& buffer, const dnnl_desc& layout,
                    const kernels::FusedActivation& activation) {
  if (activation.kind == Kind::kNone) return;
  add_activation(b, buffer, buffer, layout, activation);
}

}  // namespace kiln::hal::cpu
