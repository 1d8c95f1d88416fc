#include "tests/support/tensors.h"

#include "kiln/base/half.h"

#include <cstring>
#include <random>

namespace kiln::testing {

Tensor make_tensor(DType dtype, ConcreteShape shape, const std::vector<double>& values) {
  switch (dtype) {
    case DType::kF32: return f32(std::move(shape), values);
    case DType::kF64: return f64(std::move(shape), values);
    case DType::kI64: return i64(std::move(shape), values);
    case DType::kF16:
    case DType::kBF16: {
      std::vector<uint16_t> bits;
      for (double v : values) {
        const auto f = static_cast<float>(v);
        bits.push_back(dtype == DType::kF16 ? float_to_half_bits(f) : float_to_bfloat16_bits(f));
      }
      return make_tensor<uint16_t>(dtype, std::move(shape), bits);
    }
    case DType::kBool: {
      std::vector<uint8_t> bits;
      for (double v : values) bits.push_back(v != 0);
      return boolean(std::move(shape), bits);
    }
    default:
      ADD_FAILURE() << "make_tensor: unsupported dtype " << dtype_name(dtype);
      return Tensor::create(dtype, std::move(shape)).value();
  }
}

std::vector<double> pattern(int64_t count, int64_t mul, int64_t add, int64_t mod, double div) {
  std::vector<double> out;
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(static_cast<double>((i * mul + add) % mod - mod / 2) / div);
  }
  return out;
}

Tensor random_tensor(ConcreteShape shape, uint32_t seed, float lo, float hi) {
  Tensor t = Tensor::create(DType::kF32, std::move(shape)).value();
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& x : t.mutable_values<float>()) x = dist(gen);
  return t;
}

Tensor slice_batch(const Tensor& t, int64_t n) {
  ConcreteShape s = t.shape();
  s[0] = 1;
  Tensor out = Tensor::create(t.dtype(), s).value();
  const size_t bytes = out.byte_size();
  std::memcpy(out.mutable_data(), t.data() + n * bytes, bytes);
  return out;
}

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.element_count(); ++i) out.push_back(element_as_double(t, i));
  return out;
}

Attributes attrs(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes a;
  for (const auto& [name, value] : list) a.set(name, value);
  return a;
}

::testing::AssertionResult has_error(const Status& status, StatusCode code,
                                     std::initializer_list<std::string> fragments) {
  if (status.ok()) return ::testing::AssertionFailure() << "expected an error, got ok";
  std::string text = status.to_string();
  if (status.code() != code) {
    return ::testing::AssertionFailure()
           << "expected code " << status_code_name(code) << ", got: " << text;
  }
  for (const std::string& f : fragments) {
    if (text.find(f) == std::string::npos) {
      return ::testing::AssertionFailure() << "missing '" << f << "' in: " << text;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::testing
