#include "tests/support/expect.h"

#include <fmt/format.h>

#include <cstring>

namespace kiln::testing {

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected,
                                     Tolerance tolerance) {
  tolerance.nan_equal = true;
  auto result = compare_tensors(actual, expected, tolerance);
  if (!result.ok()) return ::testing::AssertionFailure() << result.status().to_string();
  if (result->passed()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << format_compare_result(*result, tolerance);
}

::testing::AssertionResult all_close(const Tensor& actual, const ConcreteShape& shape,
                                     const std::vector<double>& expected, Tolerance tolerance) {
  if (actual.shape() != shape) {
    return ::testing::AssertionFailure() << fmt::format(
               "shape [{}], expected [{}]", fmt::join(actual.shape(), ","), fmt::join(shape, ","));
  }
  auto widened = Tensor::create(DType::kF64, shape);
  if (!widened.ok()) return ::testing::AssertionFailure() << widened.status().to_string();
  if (widened->element_count() != static_cast<int64_t>(expected.size())) {
    return ::testing::AssertionFailure()
           << expected.size() << " expected values for " << widened->element_count() << " elements";
  }
  auto out = widened->mutable_values<double>();
  for (int64_t i = 0; i < actual.element_count(); ++i) out[i] = element_as_double(actual, i);
  Tensor want = Tensor::create(DType::kF64, shape).value();
  std::copy(expected.begin(), expected.end(), want.mutable_values<double>().begin());
  return all_close(*widened, want, tolerance);
}

::testing::AssertionResult identical(const Tensor& a, const Tensor& b) {
  if (bitwise_equal(a, b)) return ::testing::AssertionSuccess();
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    return ::testing::AssertionFailure()
           << fmt::format("{} [{}] vs {} [{}]", dtype_name(a.dtype()), fmt::join(a.shape(), ","),
                          dtype_name(b.dtype()), fmt::join(b.shape(), ","));
  }
  const size_t width = dtype_size(a.dtype());
  for (int64_t i = 0; i < a.element_count(); ++i) {
    if (std::memcmp(a.data() + i * width, b.data() + i * width, width) != 0) {
      return ::testing::AssertionFailure()
             << fmt::format("element {} differs: {:.9g} vs {:.9g}", format_index(i, a.shape()),
                            element_as_double(a, i), element_as_double(b, i));
    }
  }
  return ::testing::AssertionFailure() << "bytes differ";
}

void expect_same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                      const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(identical(a[i], b[i])) << what << ": output " << i;
  }
}

}  // namespace kiln::testing
