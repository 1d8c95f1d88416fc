// The one strict tensor comparator (docs/architecture.md invariant 3), shared by the `kiln run`
// CLI, the model suites and the tests. Do not write another: a comparator that lets NaN through is
// how the bug kiln exists to prevent went unnoticed.
//
// Rule, per element (a = actual, e = expected, bound = atol + rtol * |e|):
//   e finite:  passes iff a is finite and |a - e| <= bound. NaN or Inf in `a` always fails, however
//              large the tolerance.
//   e = ±Inf:  passes iff a is the same infinity.
//   e = NaN:   passes iff a is NaN and Tolerance::nan_equal is set.
// The test is written `abs_err <= bound`, never `abs_err > bound`, so NaN can never slip through.
// f16 and bf16 widen exactly to float and follow the same rule. Integer (u64 included) and bool
// tensors compare as exact integers (no rounding through double), with the same atol/rtol applied
// numerically; atol = rtol = 0 means exact equality.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/base/host_value.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln {

struct Tolerance {
  double atol = 0;         // absolute; must be >= 0 (not NaN)
  double rtol = 0;         // relative to |expected|; must be >= 0 (not NaN)
  bool nan_equal = false;  // NaN in expected matches NaN in actual
};

struct CompareResult {
  int64_t count = 0;       // elements compared
  int64_t mismatches = 0;  // elements that failed the rule above
  // The mismatches by kind: NaN on either side; else Inf on either side. The rest are finite
  // pairs beyond the tolerance (tolerance_mismatches()).
  int64_t nan_mismatches = 0, inf_mismatches = 0;
  // Non-finite counts over all elements, whether they passed or not. Always zero for integers.
  int64_t actual_nan = 0, actual_inf = 0;
  int64_t expected_nan = 0, expected_inf = 0;
  // Over pairs where both values are finite; 0 when there are none. The relative error is
  // |a - e| / |e| over pairs with e != 0 (pairs with e == 0 are covered by the absolute error).
  double max_abs_error = 0, max_rel_error = 0;
  std::optional<int64_t> max_abs_error_index, max_rel_error_index;  // flat, row-major
  std::optional<int64_t> first_mismatch;  // flat, row-major; nullopt when none
  // Values at first_mismatch (integers beyond 2^53 are rounded here, not in the comparison).
  double first_actual = 0, first_expected = 0;
  DType dtype = DType::kF32;  // of both tensors; decides how values are printed
  ConcreteShape shape;
  // compare_values on a sequence: the tensor the details above describe (the first failing one).
  std::optional<int64_t> element;

  bool passed() const { return mismatches == 0; }
  int64_t tolerance_mismatches() const { return mismatches - nan_mismatches - inf_mismatches; }
};

// Compares element by element. Errors (invalid argument) when the dtypes or shapes differ (the
// message names both), when a tolerance is negative or NaN, or when a tensor has no storage (a
// default-constructed Tensor).
StatusOr<CompareResult> compare_tensors(const Tensor& actual, const Tensor& expected,
                                        const Tolerance& tolerance);

// compare_tensors for host values (base/host_value.h), under the same rule: the forms, an
// optional's presence and a sequence's length must agree (an error names what differs), then
// every tensor is compared in order. The counts are summed over the tensors; the mismatch details
// (first mismatch, largest errors, dtype, dims) are those of the first tensor that fails, with
// `element` its index in the sequence. An empty sequence or optional matches an empty one.
StatusOr<CompareResult> compare_values(const HostValue& actual, const HostValue& expected,
                                       const Tolerance& tolerance);

// One line, e.g.
// "FAIL: 3/4000 mismatches (atol 2e-05, rtol 1e-05): 1 NaN, 0 Inf, 2 beyond tolerance; actual NaN
//  1/4000, Inf 0/4000; expected NaN 0/4000, Inf 0/4000; max abs err 0.0012 at [1,17]; max rel err
//  0.04 at [0,5]; first mismatch at [0,5] (flat 5): actual 0.51 expected 0.49"
// A failure whose mismatches are all NaN or Inf never reads "max abs err 0": the errors part says
// "no finite mismatch (every mismatch is a NaN or an Inf)" instead. Without any finite pair the
// errors read "max abs err n/a (no finite pair)".
std::string format_compare_result(const CompareResult& result, const Tolerance& tolerance);

// Row-major multi-index of a flat index: "[1,17]"; "[]" for a scalar. `flat` must be in range.
std::string format_index(int64_t flat, const ConcreteShape& shape);

// True iff dtype, shape and every byte are equal (NaN payloads included): the static-vs-dynamic
// and batch-invariance checks.
bool bitwise_equal(const Tensor& a, const Tensor& b);

// Largest |a - b| over elements, NaN-aware: +inf when NaN positions differ, when infinities differ,
// or when dtypes or shapes differ; NaN paired with NaN and equal infinities count as 0. 0 for empty
// tensors. f16 and bf16 are widened to float first.
double max_abs_difference(const Tensor& a, const Tensor& b);

}  // namespace kiln
