#include "kiln/hal/cpu/convert_step.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kiln/base/half.h"
#include "kiln/hal/cpu/parallel_pieces.h"

namespace kiln::hal::cpu {
namespace {

using Type = dnnl::memory::data_type;

// F16C from CPUID leaf 1 (clang's __builtin_cpu_supports does not know "f16c"); AVX also checks
// that the OS saves the YMM registers.
bool have_f16c() {
  static const bool f16c = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    return __builtin_cpu_supports("avx") && (ecx & bit_F16C) != 0;
  }();
  return f16c;
}

__attribute__((target("avx,f16c"))) void widen_f16_f16c(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = half_bits_to_float(in[i]);
}

__attribute__((target("avx,f16c"))) void narrow_f16_f16c(const float* in, uint16_t* out,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = float_to_half_bits(in[i]);
}

void convert(Type from, Type to, const std::byte* in, std::byte* out, int64_t n) {
  if (from == Type::f32) {
    const auto* x = reinterpret_cast<const float*>(in);
    auto* y = reinterpret_cast<uint16_t*>(out);
    if (to == Type::bf16) {
      for (int64_t i = 0; i < n; ++i) y[i] = float_to_bfloat16_bits(x[i]);
    } else if (have_f16c()) {
      narrow_f16_f16c(x, y, n);
    } else {
      for (int64_t i = 0; i < n; ++i) y[i] = float_to_half_bits(x[i]);
    }
    return;
  }
  const auto* x = reinterpret_cast<const uint16_t*>(in);
  auto* y = reinterpret_cast<float*>(out);
  if (from == Type::bf16) {
    for (int64_t i = 0; i < n; ++i) y[i] = bfloat16_bits_to_float(x[i]);
  } else if (have_f16c()) {
    widen_f16_f16c(x, y, n);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = half_bits_to_float(x[i]);
  }
}

}  // namespace

bool ConvertStep::converts(Type from, Type to) {
  const bool narrow = from == Type::f32 && (to == Type::f16 || to == Type::bf16);
  const bool widen = to == Type::f32 && (from == Type::f16 || from == Type::bf16);
  return narrow || widen;
}

void convert_elements(Type from_type, const std::byte* from, Type to_type, std::byte* to,
                      size_t count) {
  const size_t in_size = dnnl::memory::data_type_size(from_type);
  const size_t out_size = dnnl::memory::data_type_size(to_type);
  const auto n = static_cast<int64_t>(count);
  parallel_pieces(n, [&](int64_t begin, int64_t part) {
    convert(from_type, to_type, from + static_cast<size_t>(begin) * in_size,
            to + static_cast<size_t>(begin) * out_size, part);
  });
}

Status ConvertStep::run(const ExecContext& ctx) {
  convert_elements(from_type_, ctx.resolve(from_), to_type_, ctx.resolve(to_), count_);
  return ok_status();
}

}  // namespace kiln::hal::cpu
