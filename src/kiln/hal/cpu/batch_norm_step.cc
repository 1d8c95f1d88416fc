#include "kiln/hal/cpu/batch_norm_step.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "kiln/hal/cpu/cpu_isa.h"

namespace kiln::hal::cpu {
namespace {

#define KILN_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kVec = 8;

// The header's expression for one element; the vector lanes below compute exactly this.
inline float normalize(float x, float mean, float a, float shift, bool relu) {
  const float y = std::fma(x - mean, a, shift);
  return relu && y < 0.0f ? 0.0f : y;
}

// Whether y is finite with |y| <= kNormalizedBound (false for NaN).
inline bool within_bound(float y) { return std::fabs(y) <= kNormalizedBound; }

// n elements; the coefficients advance with the element (`Step` 1) or stay (0). With `Check`,
// returns whether every element written is within_bound (else true).
template <int Step, bool Check>
KILN_AVX2 bool normalize_avx2(const float* x, float* y, int64_t n, const float* mean,
                              const float* a, const float* shift, bool relu) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 sign = _mm256_set1_ps(-0.0f), bound = _mm256_set1_ps(kNormalizedBound);
  __m256 outside = zero;  // lanes set where a written value was NaN or beyond the bound
  int64_t i = 0;
  for (; i + kVec <= n; i += kVec) {
    const int64_t c = i * Step;
    const __m256 m = Step ? _mm256_loadu_ps(mean + c) : _mm256_set1_ps(*mean);
    const __m256 s = Step ? _mm256_loadu_ps(a + c) : _mm256_set1_ps(*a);
    const __m256 t = Step ? _mm256_loadu_ps(shift + c) : _mm256_set1_ps(*shift);
    __m256 v = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m), s, t);
    if (relu) v = _mm256_max_ps(zero, v);  // the bound first: NaN and -0 stay as they are
    _mm256_storeu_ps(y + i, v);
    if constexpr (Check) {
      outside = _mm256_or_ps(outside, _mm256_cmp_ps(_mm256_andnot_ps(sign, v), bound, _CMP_NLE_UQ));
    }
  }
  bool within = !Check || _mm256_movemask_ps(outside) == 0;
  for (; i < n; ++i) {
    const int64_t c = i * Step;
    y[i] = normalize(x[i], mean[c], a[c], shift[c], relu);
    if constexpr (Check) within = within && within_bound(y[i]);
  }
  return within;
}

template <int Step, bool Check>
bool normalize_span(bool avx2, const float* x, float* y, int64_t n, const float* mean,
                    const float* a, const float* shift, bool relu) {
  if (avx2) return normalize_avx2<Step, Check>(x, y, n, mean, a, shift, relu);
  bool within = true;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = normalize(x[i], mean[i * Step], a[i * Step], shift[i * Step], relu);
    if constexpr (Check) within = within && within_bound(y[i]);
  }
  return within;
}

template <bool Check>
bool normalize_all(const ChannelRuns& runs, const float* x, float* y, const float* mean,
                   const float* a, const float* shift, bool relu) {
  const bool avx2 = cpu_has(Isa::kAvx2);
  const bool innermost = runs.order == ChannelRuns::Order::kChannelInnermost;
  std::atomic<bool> within{true};
  for_each_channel_span(runs, [&](int64_t i, int64_t n, int64_t r, int64_t at) {
    bool span_within;
    if (innermost) {
      span_within =
          normalize_span<1, Check>(avx2, x + i, y + i, n, mean + at, a + at, shift + at, relu);
    } else {
      const int64_t c = r % runs.channels;
      span_within =
          normalize_span<0, Check>(avx2, x + i, y + i, n, mean + c, a + c, shift + c, relu);
    }
    if (!span_within) within.store(false, std::memory_order_relaxed);
  });
  return within.load(std::memory_order_relaxed);
}

}  // namespace

Status BatchNormStep::run(const ExecContext& ctx) {
  auto f32 = [&](const BufferRef& ref) { return reinterpret_cast<float*>(ctx.resolve(ref)); };
  const float* x = f32(ops_.x);
  const float *scale = f32(ops_.scale), *shift = f32(ops_.shift), *mean = f32(ops_.mean),
              *var = f32(ops_.var);
  float* y = f32(ops_.y);
  float* a = f32(ops_.coefficients);
  const int64_t channels = runs_.channels;
  for (int64_t c = 0; c < channels; ++c) a[c] = scale[c] / std::sqrt(var[c] + epsilon_);

  if (vouches_ >= 0 && ctx.vouched != nullptr) {
    ctx.vouched[vouches_] = normalize_all<true>(runs_, x, y, mean, a, shift, relu_) ? 1 : 0;
  } else {
    normalize_all<false>(runs_, x, y, mean, a, shift, relu_);
  }
  return ok_status();
}

}  // namespace kiln::hal::cpu
