// Tensors for tests, one set of builders for every layer's tests: f32({2, 2}, {1, 2, 3, 4}),
// i64(...), make_tensor<T>(dtype, shape, values) for any dtype, deterministic and random data, and
// the small helpers the op tests share (attributes, symbols, error checks).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/shape/dim_expr.h"

namespace kiln::testing {

// `values` copied as they are: T must be the dtype's element type (uint8_t for bool, uint16_t
// bits for f16 and bf16). A count that does not match the shape is a test failure.
template <typename T>
Tensor make_tensor(DType dtype, ConcreteShape shape, const std::vector<T>& values) {
  Tensor t = Tensor::create(dtype, std::move(shape)).value();
  if (t.element_count() != static_cast<int64_t>(values.size())) {
    ADD_FAILURE() << "make_tensor: " << values.size() << " values for " << t.element_count();
    return t;
  }
  std::copy(values.begin(), values.end(), t.mutable_values<T>().begin());
  return t;
}
// `values` converted to f32, f64, f16, bf16 (rounded to nearest even), i64 or bool (non-zero is
// true).
Tensor make_tensor(DType dtype, ConcreteShape shape, const std::vector<double>& values);

// The values of one dtype, each converted as static_cast does (a braced list is read as doubles,
// or as int64 for i64, so that large integers stay exact).
template <typename V = double>
Tensor f32(ConcreteShape shape, const std::vector<V>& values) {
  return make_tensor<float>(DType::kF32, std::move(shape),
                            std::vector<float>(values.begin(), values.end()));
}
template <typename V = double>
Tensor f64(ConcreteShape shape, const std::vector<V>& values) {
  return make_tensor<double>(DType::kF64, std::move(shape),
                             std::vector<double>(values.begin(), values.end()));
}
template <typename V = int64_t>
Tensor i64(ConcreteShape shape, const std::vector<V>& values) {
  return make_tensor<int64_t>(DType::kI64, std::move(shape),
                              std::vector<int64_t>(values.begin(), values.end()));
}
inline Tensor i32(ConcreteShape shape, const std::vector<int32_t>& values) {
  return make_tensor<int32_t>(DType::kI32, std::move(shape), values);
}
inline Tensor u8(ConcreteShape shape, const std::vector<uint8_t>& values) {
  return make_tensor<uint8_t>(DType::kU8, std::move(shape), values);
}
inline Tensor boolean(ConcreteShape shape, const std::vector<uint8_t>& values) {
  return make_tensor<uint8_t>(DType::kBool, std::move(shape), values);
}

// Deterministic test data, reproduced by the numpy scripts that computed expected values:
// element i is ((i * mul + add) % mod - mod / 2) / div (integer ops, then one division).
std::vector<double> pattern(int64_t count, int64_t mul, int64_t add, int64_t mod, double div);
// f32 values drawn uniformly from [lo, hi) by std::mt19937(seed).
Tensor random_tensor(ConcreteShape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
// Sample `n` of a tensor (a dim-0 slice, keeping a leading dim of 1).
Tensor slice_batch(const Tensor& t, int64_t n);

// Every element as a double.
std::vector<double> values_of(const Tensor& t);
// The elements as they are stored (T: the dtype's element type).
template <typename T>
std::vector<T> values_of(const Tensor& t) {
  auto v = t.values<T>();
  return std::vector<T>(v.begin(), v.end());
}
// The elements of a result that must have succeeded.
template <typename T>
std::vector<T> values_of(const StatusOr<Tensor>& t) {
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (!t.ok()) return {};
  return values_of<T>(*t);
}

Attributes attrs(std::initializer_list<std::pair<std::string, Attribute>> list);
inline DimExpr sym(const std::string& name) { return DimExpr::symbol(name); }

// An error of `code` whose text holds every fragment.
::testing::AssertionResult has_error(const Status& status, StatusCode code,
                                     std::initializer_list<std::string> fragments);
// The error message of a failed result, or "" when it succeeded.
template <typename R>
std::string error_of(const StatusOr<R>& r) {
  return r.ok() ? std::string() : r.status().message();
}
inline bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

}  // namespace kiln::testing
