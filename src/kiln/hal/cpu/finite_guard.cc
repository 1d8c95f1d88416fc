#include "kiln/hal/cpu/finite_guard.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/hal/cpu/cpu_isa.h"
#include "kiln/hal/cpu/parallel_pieces.h"

namespace kiln::hal::cpu {
namespace {

#define KILN_AVX2 __attribute__((target("avx2,fma")))
#define KILN_AVX512 __attribute__((target("avx512f,avx2,fma")))

// !(|x| <= bound) is true for NaN (unordered), infinities and magnitudes above the bound.
bool scalar_outside(float x, float bound) { return !(std::fabs(x) <= bound); }

KILN_AVX512 bool any_outside_avx512(const float* x, int64_t n, float bound) {
  const __m512 limit = _mm512_set1_ps(bound);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  __mmask16 outside = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(x + i)), magnitude));
    outside |= _mm512_cmp_ps_mask(a, limit, _CMP_NLE_UQ);
  }
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 a = _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(tail, x + i)), magnitude));
    outside |= _mm512_mask_cmp_ps_mask(tail, a, limit, _CMP_NLE_UQ);
  }
  return outside != 0;
}

KILN_AVX2 bool any_outside_avx2(const float* x, int64_t n, float bound) {
  const __m256 limit = _mm256_set1_ps(bound);
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 outside = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), magnitude);
    outside = _mm256_or_ps(outside, _mm256_cmp_ps(a, limit, _CMP_NLE_UQ));
  }
  bool any = _mm256_movemask_ps(outside) != 0;
  for (; i < n; ++i) any = any || scalar_outside(x[i], bound);
  return any;
}

bool any_outside(const float* x, int64_t n, float bound) {
  static const Isa isa = best_isa();
  if (isa == Isa::kAvx512) return any_outside_avx512(x, n, bound);
  if (__builtin_cpu_supports("avx2")) return any_outside_avx2(x, n, bound);
  for (int64_t i = 0; i < n; ++i) {
    if (scalar_outside(x[i], bound)) return true;
  }
  return false;
}

// Whether the float bits are -0.
bool negative_zero(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits == 0x80000000u;
}

}  // namespace

bool all_within(const float* x, int64_t count, float bound) {
  std::atomic<bool> outside{false};
  parallel_pieces(count, [&](int64_t begin, int64_t n) {
    if (any_outside(x + begin, n, bound)) outside.store(true, std::memory_order_relaxed);
  });
  return !outside.load(std::memory_order_relaxed);
}

std::optional<float> conv_input_bound(const Tensor& weights, const Tensor* bias) {
  constexpr float kLimit = 0x1p120f;
  if (weights.dtype() != DType::kF32 || weights.shape().empty() || weights.shape()[0] <= 0) {
    return std::nullopt;
  }
  const std::span<const float> w = weights.values<float>();
  const int64_t out_channels = weights.shape()[0];
  const int64_t per_channel = static_cast<int64_t>(w.size()) / out_channels;
  double largest = 0.0;
  for (int64_t oc = 0; oc < out_channels; ++oc) {
    double sum = 0.0;
    for (int64_t i = 0; i < per_channel; ++i) {
      const float v = w[oc * per_channel + i];
      if (!std::isfinite(v)) return std::nullopt;
      sum += std::fabs(static_cast<double>(v));
    }
    largest = std::max(largest, sum);
  }
  if (bias != nullptr) {
    if (bias->dtype() != DType::kF32) return std::nullopt;
    for (const float b : bias->values<float>()) {
      if (!std::isfinite(b) || negative_zero(b) || std::fabs(b) > kLimit) return std::nullopt;
    }
  }
  // With every weight 0 any finite input serves; FLT_MAX still excludes the infinities (0 * inf).
  if (largest * static_cast<double>(std::numeric_limits<float>::max()) <= kLimit) {
    return std::numeric_limits<float>::max();
  }
  return static_cast<float>(static_cast<double>(kLimit) / largest);
}

GuardedStep::GuardedStep(std::vector<FiniteBound> checks, std::vector<std::unique_ptr<Step>> fused,
                         std::vector<std::unique_ptr<Step>> fallback, std::string otherwise,
                         int32_t vouches)
    : checks_(std::move(checks)),
      fused_(std::move(fused)),
      fallback_(std::move(fallback)),
      otherwise_(std::move(otherwise)),
      vouches_(vouches) {}

bool GuardedStep::checks_hold(const ExecContext& ctx) const {
  for (const FiniteBound& c : checks_) {
    if (c.vouched_by >= 0 && ctx.vouched != nullptr && ctx.vouched[c.vouched_by] != 0) continue;
    const auto* x = reinterpret_cast<const float*>(ctx.resolve(c.buffer));
    if (!all_within(x, static_cast<int64_t>(c.count), c.bound)) return false;
  }
  return true;
}

Status GuardedStep::run(const ExecContext& ctx) {
  const bool fused = checks_hold(ctx);
  for (const auto& step : fused ? fused_ : fallback_) KILN_RETURN_IF_ERROR(step->run(ctx));
  if (vouches_ >= 0 && ctx.vouched != nullptr) ctx.vouched[vouches_] = fused ? 1 : 0;
  return ok_status();
}

std::string GuardedStep::describe() const {
  return (fused_.empty() ? std::string() : fused_.front()->describe()) + ", else " + otherwise_;
}

bool GuardedStep::same_bits_at_any_team_size() const {
  auto same = [](const auto& steps) {
    return std::all_of(steps.begin(), steps.end(),
                       [](const auto& s) { return s->same_bits_at_any_team_size(); });
  };
  return same(fused_) && same(fallback_);
}

size_t GuardedStep::primitive_count() const {
  size_t n = 0;
  for (const auto& s : fused_) n += s->primitive_count();
  for (const auto& s : fallback_) n += s->primitive_count();
  return n;
}

}  // namespace kiln::hal::cpu
