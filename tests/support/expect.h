// Comparisons for tests, all through kiln's one strict comparator (kiln/tooling/comparator.h):
// an element passes iff |a - e| <= atol + rtol * |e|; NaN or Inf in `actual` where `expected` is
// finite fails, however large the tolerance. Here an expected NaN is matched by a NaN (tests write
// NaN where the op must give one), and the failure message is the comparator's own line.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/base/tensor.h"
#include "kiln/tooling/comparator.h"

namespace kiln::testing {

// The tests' default: atol 1e-4, rtol 1e-5.
inline constexpr Tolerance kTestTolerance{.atol = 1e-4, .rtol = 1e-5};

// Same shape and dtype, and every element within the tolerance. nan_equal is always set.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected,
                                     Tolerance tolerance = kTestTolerance);
// `actual` (any numeric dtype, read as doubles) against `expected` values of the given shape.
::testing::AssertionResult all_close(const Tensor& actual, const ConcreteShape& shape,
                                     const std::vector<double>& expected,
                                     Tolerance tolerance = {.atol = 1e-5, .rtol = 1e-5});
// EXPECT_TRUE(all_close(actual, shape, expected, {atol, rtol})), for the op tests.
inline void expect_close(const Tensor& actual, const ConcreteShape& shape,
                         const std::vector<double>& expected, double atol = 1e-5,
                         double rtol = 1e-5) {
  EXPECT_TRUE(all_close(actual, shape, expected, {.atol = atol, .rtol = rtol}));
}
// Same dtype, shape and bytes (NaN payloads included); the message names the first difference.
::testing::AssertionResult identical(const Tensor& a, const Tensor& b);
// EXPECT_TRUE(identical(...)) for each pair of two runs' outputs, which must be as many;
// failures name `what` and the output.
void expect_same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                      const std::string& what);

}  // namespace kiln::testing
