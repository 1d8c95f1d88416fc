#include "kiln/suite/input_generator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

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
  double unit(uint64_t counter) const { return static_cast<double>(bits(counter) >> 11) * 0x1.0p-53; }
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

template <typename T>
Status fill_int(const Generator& g, const Stream& s, Tensor& t) {
  constexpr double kMin = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double kMax = static_cast<double>(std::numeric_limits<T>::max());
  auto out = t.mutable_values<T>();
  if (g.distribution == Generator::Distribution::kNormal) {
    for (size_t i = 0; i < out.size(); ++i) {
      double v = std::nearbyint(g.mean + g.stddev * s.normal(i));
      out[i] = static_cast<T>(std::clamp(v, kMin, kMax));
    }
    return ok_status();
  }
  const double lo = std::ceil(g.low), hi = std::floor(g.high);
  if (lo > hi) return out_of_range("uniform range [{}, {}] holds no integer", g.low, g.high);
  if (lo < kMin || hi > kMax || hi >= 0x1p63) {
    return out_of_range("uniform range [{}, {}] does not fit {}", g.low, g.high, dtype_name(t.dtype()));
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

StatusOr<Tensor> generate_tensor(const Generator& generator, std::string_view input_name, DType dtype,
                                 const ConcreteShape& shape) {
  KILN_ASSIGN_OR_RETURN(Tensor tensor, Tensor::create(dtype, shape));
  const Stream stream(generator.seed, input_name);
  switch (dtype) {
    case DType::kF32: fill_float<float>(generator, stream, tensor); break;
    case DType::kF64: fill_float<double>(generator, stream, tensor); break;
    case DType::kI64: KILN_RETURN_IF_ERROR(fill_int<int64_t>(generator, stream, tensor)); break;
    case DType::kI32: KILN_RETURN_IF_ERROR(fill_int<int32_t>(generator, stream, tensor)); break;
    case DType::kI8: KILN_RETURN_IF_ERROR(fill_int<int8_t>(generator, stream, tensor)); break;
    case DType::kU8: KILN_RETURN_IF_ERROR(fill_int<uint8_t>(generator, stream, tensor)); break;
    case DType::kBool: {
      auto out = tensor.mutable_values<uint8_t>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = stream.bits(i) & 1;
      break;
    }
    case DType::kF16: return unimplemented("generating f16 inputs is not supported");
  }
  return tensor;
}

}  // namespace kiln::suite
