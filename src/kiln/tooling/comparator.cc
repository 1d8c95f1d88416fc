#include "kiln/tooling/comparator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/base/checked_math.h"
#include "kiln/base/half.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A default-constructed Tensor claims a scalar it has no bytes for; comparing two of them must not
// "pass".
bool has_valid_storage(const Tensor& t) {
  return checked_product(t.shape()).value_or(-1) == t.element_count() &&
         (t.byte_size() == 0 || t.data() != nullptr);
}

// atol + rtol * |e|, without 0 * inf = NaN when rtol is infinite and e is zero.
double bound_for(const Tolerance& t, double abs_expected) {
  return t.atol + (abs_expected == 0 ? 0.0 : t.rtol * abs_expected);
}

class Accumulator {
 public:
  explicit Accumulator(CompareResult& result) : r_(result) {}

  void finite_pair(int64_t index, double abs_err, double abs_expected) {
    if (!r_.max_abs_error_index || abs_err > r_.max_abs_error) {
      r_.max_abs_error = abs_err;
      r_.max_abs_error_index = index;
    }
    if (abs_expected != 0) {
      double rel = abs_err / abs_expected;
      if (!r_.max_rel_error_index || rel > r_.max_rel_error) {
        r_.max_rel_error = rel;
        r_.max_rel_error_index = index;
      }
    }
  }

  void mismatch(int64_t index, double actual, double expected) {
    if (std::isnan(actual) || std::isnan(expected)) {
      ++r_.nan_mismatches;
    } else if (std::isinf(actual) || std::isinf(expected)) {
      ++r_.inf_mismatches;
    }
    if (r_.mismatches++ == 0) {
      r_.first_mismatch = index;
      r_.first_actual = actual;
      r_.first_expected = expected;
    }
  }

 private:
  CompareResult& r_;
};

// `to_double` widens one stored element: f16 and bf16 go through float, so they follow exactly
// the f32 rules (NaN and Inf included).
template <typename T, typename ToDouble>
void compare_floats(const Tensor& actual, const Tensor& expected, const Tolerance& t,
                    CompareResult& r, ToDouble to_double) {
  std::span<const T> a = actual.values<T>();
  std::span<const T> e = expected.values<T>();
  Accumulator acc(r);
  for (size_t i = 0; i < a.size(); ++i) {
    const double av = to_double(a[i]);
    const double ev = to_double(e[i]);
    r.actual_nan += std::isnan(av);
    r.actual_inf += std::isinf(av);
    r.expected_nan += std::isnan(ev);
    r.expected_inf += std::isinf(ev);
    const auto index = static_cast<int64_t>(i);
    bool pass = false;
    if (std::isfinite(ev)) {
      if (std::isfinite(av)) {
        const double abs_err = std::fabs(av - ev);
        const double abs_e = std::fabs(ev);
        acc.finite_pair(index, abs_err, abs_e);
        pass = abs_err <= bound_for(t, abs_e);
      }
    } else if (std::isnan(ev)) {
      pass = t.nan_equal && std::isnan(av);
    } else {
      pass = av == ev;  // same infinity; NaN compares unequal
    }
    if (!pass) acc.mismatch(index, av, ev);
  }
}

// Every integer dtype but u64 fits int64; u64 is read as itself so values past INT64_MAX keep
// their order.
template <typename T>
T integer_at(const Tensor& tensor, int64_t index) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    return tensor.values<uint64_t>()[index];
  } else {
    return element_as_int64(tensor, index);
  }
}

// |a - b| exactly: modular uint64 subtraction of the larger minus the smaller.
template <typename T>
uint64_t integer_distance(T a, T b) {
  return a >= b ? static_cast<uint64_t>(a) - static_cast<uint64_t>(b)
                : static_cast<uint64_t>(b) - static_cast<uint64_t>(a);
}

// Integers compare exactly: the difference is taken in uint64 (no overflow, no rounding) and
// checked against floor(bound), which is exact for any bound below 2^64.
template <typename T>
void compare_integers(const Tensor& actual, const Tensor& expected, const Tolerance& t,
                      CompareResult& r) {
  Accumulator acc(r);
  for (int64_t i = 0; i < actual.element_count(); ++i) {
    const T av = integer_at<T>(actual, i);
    const T ev = integer_at<T>(expected, i);
    const uint64_t diff = integer_distance(av, ev);
    const double abs_e = std::fabs(static_cast<double>(ev));
    acc.finite_pair(i, static_cast<double>(diff), abs_e);
    const double bound = bound_for(t, abs_e);
    bool pass = diff == 0;
    if (!pass) {
      pass = bound >= 0x1p64 || diff <= static_cast<uint64_t>(std::floor(bound));
    }
    if (!pass) acc.mismatch(i, static_cast<double>(av), static_cast<double>(ev));
  }
}

std::string format_value(double v, DType dtype) {
  if (dtype == DType::kF64) return fmt::format("{}", v);
  if (is_float(dtype)) return fmt::format("{}", static_cast<float>(v));  // f32, f16, bf16
  // Integers: a u64 past 2^63 does not fit int64.
  if (v >= -0x1p63 && v < 0x1p63) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{:.0f}", v);
}

std::string shape_string(const Tensor& t) {
  if (t.rank() == 0) return fmt::format("{} scalar", dtype_name(t.dtype()));
  return fmt::format("{}x{}", fmt::join(t.shape(), "x"), dtype_name(t.dtype()));
}

}  // namespace

StatusOr<CompareResult> compare_tensors(const Tensor& actual, const Tensor& expected,
                                        const Tolerance& tolerance) {
  if (!(tolerance.atol >= 0)) {
    return invalid_argument("atol must be a non-negative number, got {}", tolerance.atol);
  }
  if (!(tolerance.rtol >= 0)) {
    return invalid_argument("rtol must be a non-negative number, got {}", tolerance.rtol);
  }
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    return invalid_argument("cannot compare tensors: actual is {}, expected is {}",
                            shape_string(actual), shape_string(expected));
  }
  if (!has_valid_storage(actual) || !has_valid_storage(expected)) {
    return invalid_argument("cannot compare tensors: the {} tensor has no valid storage",
                            has_valid_storage(actual) ? "expected" : "actual");
  }
  CompareResult r;
  r.count = actual.element_count();
  r.dtype = actual.dtype();
  r.shape = actual.shape();
  switch (actual.dtype()) {
    case DType::kF32:
      compare_floats<float>(actual, expected, tolerance, r, [](float v) -> double { return v; });
      break;
    case DType::kF64:
      compare_floats<double>(actual, expected, tolerance, r, [](double v) { return v; });
      break;
    case DType::kF16:
      compare_floats<uint16_t>(actual, expected, tolerance, r,
                               [](uint16_t v) -> double { return half_bits_to_float(v); });
      break;
    case DType::kBF16:
      compare_floats<uint16_t>(actual, expected, tolerance, r,
                               [](uint16_t v) -> double { return bfloat16_bits_to_float(v); });
      break;
    case DType::kU64: compare_integers<uint64_t>(actual, expected, tolerance, r); break;
    case DType::kI64:
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
    case DType::kU32:
    case DType::kU16:
    case DType::kU8:
    case DType::kBool: compare_integers<int64_t>(actual, expected, tolerance, r); break;
  }
  return r;
}

std::string format_index(int64_t flat, const ConcreteShape& shape) {
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] <= 0) break;
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return fmt::format("[{}]", fmt::join(index, ","));
}

namespace {

// Adds `from`'s element counts (not its details) to `to`.
void add_counts(CompareResult& to, const CompareResult& from) {
  to.count += from.count;
  to.mismatches += from.mismatches;
  to.nan_mismatches += from.nan_mismatches;
  to.inf_mismatches += from.inf_mismatches;
  to.actual_nan += from.actual_nan;
  to.actual_inf += from.actual_inf;
  to.expected_nan += from.expected_nan;
  to.expected_inf += from.expected_inf;
}

}  // namespace

StatusOr<CompareResult> compare_values(const HostValue& actual, const HostValue& expected,
                                       const Tolerance& tolerance) {
  if (actual.form() != expected.form() || actual.dtype() != expected.dtype() ||
      actual.has_element() != expected.has_element()) {
    return invalid_argument("actual is {}, expected {}", actual.describe(), expected.describe());
  }
  if (actual.form() == ValueForm::kTensor || actual.form() == ValueForm::kOptionalTensor) {
    if (!actual.has_element()) return CompareResult{};
    return compare_tensors(actual.tensor(), expected.tensor(), tolerance);
  }
  const std::vector<Tensor>& a = actual.elements();
  const std::vector<Tensor>& e = expected.elements();
  if (a.size() != e.size()) {
    return invalid_argument("actual is a sequence of {} tensors, expected {}", a.size(), e.size());
  }
  CompareResult total;
  total.dtype = expected.dtype();
  bool detailed = false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto r = compare_tensors(a[i], e[i], tolerance);
    if (!r.ok()) {
      return std::move(r).status().with_note(fmt::format("comparing sequence element {}", i));
    }
    if (!detailed && (!r->passed() || i + 1 == a.size())) {
      // The details are this element's (the first failing one, else the last); the counts stay
      // the sums over the sequence.
      const CompareResult sums = total;
      total = *r;
      total.element = static_cast<int64_t>(i);
      add_counts(total, sums);
      detailed = !r->passed();
      continue;
    }
    add_counts(total, *r);
  }
  return total;
}

std::string format_compare_result(const CompareResult& r, const Tolerance& t) {
  std::string out =
      fmt::format("{}: {}/{} mismatches (atol {}, rtol {}{})", r.passed() ? "PASS" : "FAIL",
                  r.mismatches, r.count, t.atol, t.rtol, t.nan_equal ? ", NaN equal" : "");
  if (r.element) out += fmt::format(" over the sequence, details of element {}", *r.element);
  if (is_float(r.dtype)) {
    if (!r.passed()) {
      out += fmt::format(": {} NaN, {} Inf, {} beyond tolerance", r.nan_mismatches,
                         r.inf_mismatches, r.tolerance_mismatches());
    }
    out += fmt::format("; actual NaN {}/{}, Inf {}/{}; expected NaN {}/{}, Inf {}/{}", r.actual_nan,
                       r.count, r.actual_inf, r.count, r.expected_nan, r.count, r.expected_inf,
                       r.count);
  }
  if (!r.passed() && r.tolerance_mismatches() == 0) {
    out += "; no finite mismatch (every mismatch is a NaN or an Inf)";
  } else if (!r.max_abs_error_index) {
    out += "; max abs err n/a (no finite pair)";
  } else {
    out += fmt::format("; max abs err {} at {}", r.max_abs_error,
                       format_index(*r.max_abs_error_index, r.shape));
    out += fmt::format("; max rel err {}", r.max_rel_error);
    if (r.max_rel_error_index) out += " at " + format_index(*r.max_rel_error_index, r.shape);
  }
  if (r.first_mismatch) {
    out +=
        fmt::format("; first mismatch at {} (flat {}): actual {} expected {}",
                    format_index(*r.first_mismatch, r.shape), *r.first_mismatch,
                    format_value(r.first_actual, r.dtype), format_value(r.first_expected, r.dtype));
  }
  return out;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.byte_size() == 0) return true;
  return std::memcmp(a.data(), b.data(), a.byte_size()) == 0;
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return kInf;
  double worst = 0;
  if (a.dtype() == DType::kU64) {
    for (int64_t i = 0; i < a.element_count(); ++i) {
      const uint64_t diff =
          integer_distance(integer_at<uint64_t>(a, i), integer_at<uint64_t>(b, i));
      worst = std::max(worst, static_cast<double>(diff));
    }
    return worst;
  }
  if (!is_float(a.dtype())) {
    for (int64_t i = 0; i < a.element_count(); ++i) {
      const uint64_t diff = integer_distance(element_as_int64(a, i), element_as_int64(b, i));
      worst = std::max(worst, static_cast<double>(diff));
    }
    return worst;
  }
  // f16 and bf16 widen exactly through element_as_double.
  for (int64_t i = 0; i < a.element_count(); ++i) {
    const double x = element_as_double(a, i);
    const double y = element_as_double(b, i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return kInf;
      continue;
    }
    if (x == y) continue;                  // also equal infinities
    const double diff = std::fabs(x - y);  // inf when either side is infinite
    if (diff > worst) worst = diff;
  }
  return worst;
}

}  // namespace kiln
