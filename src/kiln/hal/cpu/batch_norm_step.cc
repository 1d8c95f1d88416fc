#include "kiln/hal/cpu/batch_norm_step.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kiln/hal/cpu/cpu_isa.h"

namespace kiln::hal::cpu {
namespace {

#define KILN_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kChunk = 16384;  // floats per parallel job
constexpr int64_t kVec = 8;

// The header's expression for one element; the vector lanes below compute exactly this.
inline float normalize(float x, float mean, float a, float shift, bool relu) {
  const float y = std::fma(x - mean, a, shift);
  return relu && y < 0.0f ? 0.0f : y;
}

// n elements; the coefficients advance with the element (`Step` 1) or stay (0).
template <int Step>
KILN_AVX2 void normalize_avx2(const float* x, float* y, int64_t n, const float* mean,
                              const float* a, const float* shift, bool relu) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + kVec <= n; i += kVec) {
    const int64_t c = i * Step;
    const __m256 m = Step ? _mm256_loadu_ps(mean + c) : _mm256_set1_ps(*mean);
    const __m256 s = Step ? _mm256_loadu_ps(a + c) : _mm256_set1_ps(*a);
    const __m256 t = Step ? _mm256_loadu_ps(shift + c) : _mm256_set1_ps(*shift);
    __m256 v = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m), s, t);
    if (relu) v = _mm256_max_ps(zero, v);  // the bound first: NaN and -0 stay as they are
    _mm256_storeu_ps(y + i, v);
  }
  for (; i < n; ++i) {
    const int64_t c = i * Step;
    y[i] = normalize(x[i], mean[c], a[c], shift[c], relu);
  }
}

template <int Step>
void normalize_span(bool avx2, const float* x, float* y, int64_t n, const float* mean,
                    const float* a, const float* shift, bool relu) {
  if (avx2) return normalize_avx2<Step>(x, y, n, mean, a, shift, relu);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = normalize(x[i], mean[i * Step], a[i * Step], shift[i * Step], relu);
  }
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

  const bool avx2 = cpu_has(Isa::kAvx2), relu = relu_;
  const bool innermost = runs_.order == ChannelRuns::Order::kChannelInnermost;
  for_each_channel_span(runs_, kChunk, [&](int64_t i, int64_t n, int64_t r, int64_t within) {
    if (innermost) {
      normalize_span<1>(avx2, x + i, y + i, n, mean + within, a + within, shift + within, relu);
    } else {
      const int64_t c = r % channels;
      normalize_span<0>(avx2, x + i, y + i, n, mean + c, a + c, shift + c, relu);
    }
  });
  return ok_status();
}

}  // namespace kiln::hal::cpu
