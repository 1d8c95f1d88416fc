#include "kiln/suite/input_generator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "kiln/base/half.h"

namespace kiln::suite {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

class Stream {
 public:
  Stream(uint64_t seed, std::string_view name) : key_(splitmix64(seed ^ splitmix64(fnv1a(name)))) {}
  uint64_t bits(uint64_t counter) const { return splitmix64(key_ ^ splitmix64(counter)); }
  // In [0, 1).
  double unit(uint64_t counter) const {
    return static_cast<double>(bits(counter) >> 11) * 0x1.0p-53;
  }
  double normal(uint64_t i) const {
    double u1 = unit(2 * i), u2 = unit(2 * i + 1);
    return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  uint64_t key_;
};

template <typename T>
void fill_float(const Generator& g, const Stream& s, Tensor& t) {
  auto out = t.mutable_values<T>();
  const bool uniform = g.distribution == Generator::Distribution::kUniform;
  for (size_t i = 0; i < out.size(); ++i) {
    double v = uniform ? g.low + (g.high - g.low) * s.unit(i) : g.mean + g.stddev * s.normal(i);
    T x = static_cast<T>(v);
    // Rounding to a narrower type may reach `high`, which the range excludes.
    if (uniform && g.high > g.low && x >= static_cast<T>(g.high)) {
      x = std::nextafter(static_cast<T>(g.high), static_cast<T>(g.low));
    }
    out[i] = x;
  }
}

// f16 and bf16 store sign and magnitude, so the next value toward -inf is one step of the bits.
uint16_t next_below(uint16_t bits) {
  if ((bits & 0x7fffu) == 0) return 0x8001u;  // ±0 → the smallest negative subnormal
  return (bits & 0x8000u) ? bits + 1 : bits - 1;
}

// Values drawn as for f32, then rounded to f16/bf16 (nearest even).
void fill_half(const Generator& g, const Stream& s, Tensor& t, uint16_t (*from_float)(float),
               float (*to_float)(uint16_t)) {
  auto out = t.mutable_values<uint16_t>();
  const bool uniform = g.distribution == Generator::Distribution::kUniform;
  uint16_t below_high = from_float(static_cast<float>(g.high));
  if (uniform && g.high > g.low) {
    while (to_float(below_high) >= g.high) below_high = next_below(below_high);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    double v = uniform ? g.low + (g.high - g.low) * s.unit(i) : g.mean + g.stddev * s.normal(i);
    uint16_t x = from_float(static_cast<float>(v));
    // Rounding to a narrower type may reach `high`, which the range excludes.
    if (uniform && g.high > g.low && to_float(x) >= g.high) x = below_high;
    out[i] = x;
  }
}

template <typename T>
Status fill_int(const Generator& g, const Stream& s, Tensor& t) {
  constexpr double kMin = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double kMax = static_cast<double>(std::numeric_limits<T>::max());
  auto out = t.mutable_values<T>();
  if (g.distribution == Generator::Distribution::kNormal) {
    for (size_t i = 0; i < out.size(); ++i) {
      double v = std::nearbyint(g.mean + g.stddev * s.normal(i));
      // kMax of a 64-bit type rounds up to 2^63 or 2^64, which does not convert back.
      out[i] = v >= kMax   ? std::numeric_limits<T>::max()
               : v <= kMin ? std::numeric_limits<T>::min()
                           : static_cast<T>(v);
    }
    return ok_status();
  }
  const double lo = std::ceil(g.low), hi = std::floor(g.high);
  if (lo > hi) return out_of_range("uniform range [{}, {}] holds no integer", g.low, g.high);
  if (lo < kMin || hi > kMax) {
    return out_of_range("uniform range [{}, {}] does not fit {}", g.low, g.high,
                        dtype_name(t.dtype()));
  }
  if (hi >= 0x1p63) {
    return out_of_range("uniform range [{}, {}] for {}: integer ranges must end below 2^63", g.low,
                        g.high, dtype_name(t.dtype()));
  }
  const auto low = static_cast<int64_t>(lo);
  const uint64_t span = static_cast<uint64_t>(static_cast<int64_t>(hi) - low) + 1;
  for (size_t i = 0; i < out.size(); ++i) {
    uint64_t r = span == 0 ? s.bits(i) : s.bits(i) % span;  // span 0: the whole 64-bit range
    out[i] = static_cast<T>(low + static_cast<int64_t>(r));
  }
  return ok_status();
}

}  // namespace

StatusOr<Tensor> generate_tensor(const Generator& generator, std::string_view input_name,
                                 DType dtype, const ConcreteShape& shape) {
  KILN_ASSIGN_OR_RETURN(Tensor tensor, Tensor::create(dtype, shape));
  const Stream stream(generator.seed, input_name);
  switch (dtype) {
    case DType::kF32: fill_float<float>(generator, stream, tensor); break;
    case DType::kF64: fill_float<double>(generator, stream, tensor); break;
    case DType::kF16:
      fill_half(generator, stream, tensor, float_to_half_bits, half_bits_to_float);
      break;
    case DType::kBF16:
      fill_half(generator, stream, tensor, float_to_bfloat16_bits, bfloat16_bits_to_float);
      break;
    case DType::kI64: KILN_RETURN_IF_ERROR(fill_int<int64_t>(generator, stream, tensor)); break;
    case DType::kI32: KILN_RETURN_IF_ERROR(fill_int<int32_t>(generator, stream, tensor)); break;
    case DType::kI16: KILN_RETURN_IF_ERROR(fill_int<int16_t>(generator, stream, tensor)); break;
    case DType::kI8: KILN_RETURN_IF_ERROR(fill_int<int8_t>(generator, stream, tensor)); break;
    case DType::kU64: KILN_RETURN_IF_ERROR(fill_int<uint64_t>(generator, stream, tensor)); break;
    case DType::kU32: KILN_RETURN_IF_ERROR(fill_int<uint32_t>(generator, stream, tensor)); break;
    case DType::kU16: KILN_RETURN_IF_ERROR(fill_int<uint16_t>(generator, stream, tensor)); break;
    case DType::kU8: KILN_RETURN_IF_ERROR(fill_int<uint8_t>(generator, stream, tensor)); break;
    case DType::kBool: {
      auto out = tensor.mutable_values<uint8_t>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = stream.bits(i) & 1;
      break;
    }
  }
  return tensor;
}

}  // namespace kiln::suite
