#include "kiln/tooling/comparator.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/files.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using ::kiln::testing::f32;
using ::kiln::testing::make_tensor;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

CompareResult compare(const Tensor& actual, const Tensor& expected, Tolerance t) {
  auto r = compare_tensors(actual, expected, t);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : CompareResult{};
}

TEST(Comparator, EqualTensorsPassWithZeroTolerance) {
  Tensor a = f32({2, 2}, {1, 2, 3, 4});
  CompareResult r = compare(a, a.clone(), {});
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.count, 4);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.max_abs_error, 0);
  EXPECT_FALSE(r.first_mismatch.has_value());
}

TEST(Comparator, NanInActualFailsEvenWithHugeTolerances) {
  Tensor expected = f32({3}, {1, 2, 3});
  Tensor actual = f32({3}, {1, kNan, 3});
  for (Tolerance t : {Tolerance{1e30, 1e30}, Tolerance{kInf, kInf}, Tolerance{kInf, 0, true}}) {
    CompareResult r = compare(actual, expected, t);
    EXPECT_FALSE(r.passed());
    EXPECT_EQ(r.mismatches, 1);
    EXPECT_EQ(r.actual_nan, 1);
    EXPECT_EQ(r.expected_nan, 0);
    ASSERT_TRUE(r.first_mismatch.has_value());
    EXPECT_EQ(*r.first_mismatch, 1);
    EXPECT_TRUE(std::isnan(r.first_actual));
    EXPECT_EQ(r.first_expected, 2);
  }
}

TEST(Comparator, AllNanOutputFails) {
  // The bug kiln exists to prevent: an all-NaN output "matching" with `fabs(e - a) > tol`.
  Tensor expected = f32({4}, {0.1f, 0.2f, 0.3f, 0.4f});
  Tensor actual = f32({4}, {kNan, kNan, kNan, kNan});
  CompareResult r = compare(actual, expected, {1e-3, 1e-3});
  EXPECT_EQ(r.mismatches, 4);
  EXPECT_EQ(r.actual_nan, 4);
  // Max errors are over finite pairs only; there are none.
  EXPECT_EQ(r.max_abs_error, 0);
  EXPECT_FALSE(r.max_abs_error_index.has_value());
}

TEST(Comparator, InfHandling) {
  Tolerance huge{1e30, 1e30};
  // Inf in actual where expected is finite: always a mismatch.
  CompareResult r = compare(f32({2}, {kInf, -kInf}), f32({2}, {1, 1}), huge);
  EXPECT_EQ(r.mismatches, 2);
  EXPECT_EQ(r.actual_inf, 2);
  // Same infinity matches exactly, even with zero tolerance.
  r = compare(f32({2}, {kInf, -kInf}), f32({2}, {kInf, -kInf}), {});
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.actual_inf, 2);
  EXPECT_EQ(r.expected_inf, 2);
  // Opposite sign, a finite value, or NaN against an expected infinity: mismatch.
  r = compare(f32({3}, {-kInf, 3e38f, kNan}), f32({3}, {kInf, kInf, kInf}), {kInf, kInf, true});
  EXPECT_EQ(r.mismatches, 3);
  EXPECT_EQ(r.expected_inf, 3);
}

TEST(Comparator, NanEqualOnlyWhenAsked) {
  Tensor actual = f32({2}, {kNan, 1});
  Tensor expected = f32({2}, {kNan, 1});
  CompareResult strict = compare(actual, expected, {1, 1});
  EXPECT_EQ(strict.mismatches, 1);
  EXPECT_EQ(*strict.first_mismatch, 0);
  CompareResult lenient = compare(actual, expected, {0, 0, /*nan_equal=*/true});
  EXPECT_TRUE(lenient.passed());
  EXPECT_EQ(lenient.actual_nan, 1);
  EXPECT_EQ(lenient.expected_nan, 1);
  // nan_equal does not let a finite value match an expected NaN.
  CompareResult finite = compare(f32({1}, {1}), f32({1}, {kNan}), {kInf, kInf, true});
  EXPECT_EQ(finite.mismatches, 1);
}

TEST(Comparator, AtolOnly) {
  Tensor expected = f32({3}, {0, 100, -100});
  Tensor actual = f32({3}, {0.25f, 100.5f, -100.75f});
  EXPECT_EQ(compare(actual, expected, {0.5, 0}).mismatches, 1);
  EXPECT_EQ(compare(actual, expected, {0.75, 0}).mismatches, 0);
}

TEST(Comparator, ExactBoundaryPasses) {
  // |a - e| == atol exactly (all values exact in binary).
  EXPECT_TRUE(compare(f32({1}, {1.5f}), f32({1}, {1.0f}), {0.5, 0}).passed());
  EXPECT_FALSE(compare(f32({1}, {1.5f}), f32({1}, {1.0f}), {0.4999, 0}).passed());
  // |a - e| == atol + rtol * |e| exactly: 0.5 + 0.25 * 2.
  EXPECT_TRUE(compare(f32({1}, {3.0f}), f32({1}, {2.0f}), {0.5, 0.25}).passed());
}

TEST(Comparator, RtolScalesWithExpected) {
  Tensor expected = f32({2}, {1, 1000});
  Tensor actual = f32({2}, {1.5f, 1001});
  // rtol 1e-3: bound 0.001 at 1 (fails), 1 at 1000 (passes).
  CompareResult r = compare(actual, expected, {0, 1e-3});
  EXPECT_EQ(r.mismatches, 1);
  EXPECT_EQ(*r.first_mismatch, 0);
  EXPECT_DOUBLE_EQ(r.max_abs_error, 1);
  EXPECT_EQ(*r.max_abs_error_index, 1);
  EXPECT_DOUBLE_EQ(r.max_rel_error, 0.5);
  EXPECT_EQ(*r.max_rel_error_index, 0);
  // Infinite rtol with a zero expected value must not turn the bound into NaN.
  EXPECT_TRUE(compare(f32({1}, {0}), f32({1}, {0}), {0, kInf}).passed());
}

TEST(Comparator, RelativeErrorSkipsZeroExpected) {
  CompareResult r = compare(f32({2}, {0.5f, 2.5f}), f32({2}, {0, 2}), {1, 0});
  EXPECT_TRUE(r.passed());
  EXPECT_DOUBLE_EQ(r.max_abs_error, 0.5);
  EXPECT_DOUBLE_EQ(r.max_rel_error, 0.25);
  EXPECT_EQ(*r.max_rel_error_index, 1);
}

TEST(Comparator, EmptyTensorsPass) {
  CompareResult r = compare(f32({0, 3}, {}), f32({0, 3}, {}), {});
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.count, 0);
  EXPECT_EQ(format_compare_result(r, {}).substr(0, 20), "PASS: 0/0 mismatches");
}

TEST(Comparator, ShapeOrDtypeMismatchIsAnError) {
  auto r =
      compare_tensors(f32({2, 3}, std::vector<float>(6)), f32({3, 2}, std::vector<float>(6)), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("actual is 2x3xf32, expected is 3x2xf32"), std::string::npos)
      << r.status().to_string();

  Tensor f64 = make_tensor<double>(DType::kF64, {2}, {1, 2});
  auto d = compare_tensors(f32({2}, {1, 2}), f64, {});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("actual is 2xf32, expected is 2xf64"), std::string::npos)
      << d.status().to_string();
}

TEST(Comparator, RejectsBadTolerances) {
  Tensor a = f32({1}, {1});
  EXPECT_FALSE(compare_tensors(a, a, {-1, 0}).ok());
  EXPECT_FALSE(compare_tensors(a, a, {0, -1e-5}).ok());
  auto r = compare_tensors(a, a, {std::nan(""), 0});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("atol"), std::string::npos);
}

TEST(Comparator, IntegersCompareExactly) {
  // 2^53 + 1 and 2^53 are equal as doubles; the comparator must still see them differ.
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor a = make_tensor<int64_t>(DType::kI64, {3}, {big, INT64_MIN, 5});
  Tensor e = make_tensor<int64_t>(DType::kI64, {3}, {big - 1, INT64_MAX, 5});
  CompareResult r = compare(a, e, {});
  EXPECT_EQ(r.mismatches, 2);
  EXPECT_EQ(*r.first_mismatch, 0);
  EXPECT_EQ(r.actual_nan + r.actual_inf, 0);
  // atol applies numerically: a difference of 1 passes atol 1, not atol 0.99.
  Tensor a1 = make_tensor<int32_t>(DType::kI32, {2}, {10, -7});
  Tensor e1 = make_tensor<int32_t>(DType::kI32, {2}, {11, -7});
  EXPECT_TRUE(compare(a1, e1, {1, 0}).passed());
  EXPECT_FALSE(compare(a1, e1, {0.99, 0}).passed());
  // rtol 0.1 of 11 is 1.1, enough for a difference of 1.
  EXPECT_TRUE(compare(a1, e1, {0, 0.1}).passed());
}

TEST(Comparator, SmallIntegersAndBool) {
  Tensor a = make_tensor<uint8_t>(DType::kU8, {3}, {0, 255, 7});
  Tensor e = make_tensor<uint8_t>(DType::kU8, {3}, {0, 255, 8});
  CompareResult r = compare(a, e, {});
  EXPECT_EQ(r.mismatches, 1);
  EXPECT_EQ(r.first_actual, 7);
  EXPECT_EQ(r.first_expected, 8);
  Tensor i8a = make_tensor<int8_t>(DType::kI8, {2}, {-128, 127});
  EXPECT_EQ(compare(i8a, make_tensor<int8_t>(DType::kI8, {2}, {127, 127}), {}).mismatches, 1);
  Tensor ba = make_tensor<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  Tensor be = make_tensor<uint8_t>(DType::kBool, {3}, {1, 1, 1});
  CompareResult b = compare(ba, be, {});
  EXPECT_EQ(b.mismatches, 1);
  EXPECT_EQ(*b.first_mismatch, 1);
}

TEST(Comparator, F64UsesFullPrecision) {
  Tensor a = make_tensor<double>(DType::kF64, {1}, {1.0 + 1e-15});
  Tensor e = make_tensor<double>(DType::kF64, {1}, {1.0});
  EXPECT_FALSE(compare(a, e, {}).passed());
  EXPECT_TRUE(compare(a, e, {1e-14, 0}).passed());
  // A finite difference that overflows double is still a finite pair that fails a finite bound.
  Tensor big_a = make_tensor<double>(DType::kF64, {1}, {1e308});
  Tensor big_e = make_tensor<double>(DType::kF64, {1}, {-1e308});
  EXPECT_FALSE(compare(big_a, big_e, {1e300, 1}).passed());
}

TEST(Comparator, RejectsTensorsWithoutStorage) {
  // What a test gets back from a failed run: it must not compare equal to anything.
  auto r = compare_tensors(Tensor(), Tensor(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no valid storage"), std::string::npos)
      << r.status().to_string();
  EXPECT_FALSE(compare_tensors(f32({}, {1}), Tensor(), {}).ok());
}

Tensor f16(ConcreteShape shape, std::vector<uint16_t> bits) {
  return make_tensor<uint16_t>(DType::kF16, std::move(shape), std::move(bits));
}

// f16 widens to float and follows the f32 rules: a NaN or Inf in actual fails at any tolerance.
TEST(Comparator, F16FollowsTheFloatRules) {
  const uint16_t one = 0x3c00, two = 0x4000, nan = 0x7e00, inf = 0x7c00, one_ulp = 0x3c01;
  Tensor expected = f16({3}, {one, two, one});
  EXPECT_TRUE(compare(expected, expected.clone(), {}).passed());
  for (Tolerance t : {Tolerance{1e30, 1e30}, Tolerance{kInf, kInf}, Tolerance{kInf, 0, true}}) {
    CompareResult r = compare(f16({3}, {one, nan, one}), expected, t);
    EXPECT_FALSE(r.passed()) << "atol " << t.atol;
    EXPECT_EQ(r.actual_nan, 1);
    EXPECT_EQ(r.first_mismatch, 1);
    EXPECT_FALSE(compare(f16({3}, {one, inf, one}), expected, t).passed());
  }
  // 1 + 2^-10 against 1: passes only when the bound reaches the ulp.
  EXPECT_FALSE(compare(f16({1}, {one_ulp}), f16({1}, {one}), {}).passed());
  CompareResult close = compare(f16({1}, {one_ulp}), f16({1}, {one}), {0x1p-10, 0});
  EXPECT_TRUE(close.passed());
  EXPECT_EQ(close.max_abs_error, 0x1p-10);
  EXPECT_FALSE(compare(f16({1}, {nan}), f16({1}, {nan}), {}).passed());
  EXPECT_TRUE(compare(f16({1}, {nan}), f16({1}, {nan}), {0, 0, true}).passed());
  EXPECT_TRUE(compare(f16({1}, {inf}), f16({1}, {inf}), {}).passed());

  Tolerance t{0, 0};
  EXPECT_EQ(format_compare_result(compare(f16({2}, {one, nan}), f16({2}, {one, two}), t), t),
            "FAIL: 1/2 mismatches (atol 0, rtol 0): 1 NaN, 0 Inf, 0 beyond tolerance; actual NaN "
            "1/2, Inf 0/2; expected NaN 0/2, Inf 0/2; no finite mismatch (every mismatch is a NaN "
            "or an Inf); first mismatch at [1] (flat 1): actual nan expected 2");
  EXPECT_EQ(max_abs_difference(f16({2}, {one, two}), f16({2}, {one, one})), 1);
  EXPECT_EQ(max_abs_difference(f16({1}, {nan}), f16({1}, {one})), INFINITY);
}

TEST(Comparator, Bf16AndWideUnsigned) {
  Tensor b = make_tensor<uint16_t>(DType::kBF16, {2}, {0x3f80, 0x7fc0});  // 1, NaN
  Tensor b_expected = make_tensor<uint16_t>(DType::kBF16, {2}, {0x3f80, 0x4000});
  EXPECT_FALSE(compare(b, b_expected, {kInf, kInf}).passed());
  EXPECT_EQ(max_abs_difference(b, b_expected), INFINITY);

  // u64 values past INT64_MAX keep their order and exact distance.
  Tensor big = make_tensor<uint64_t>(DType::kU64, {2}, {UINT64_MAX, 0});
  Tensor small = make_tensor<uint64_t>(DType::kU64, {2}, {UINT64_MAX - 2, 0});
  EXPECT_TRUE(compare(big, big.clone(), {}).passed());
  EXPECT_FALSE(compare(big, small, {1, 0}).passed());
  EXPECT_TRUE(compare(big, small, {2, 0}).passed());
  EXPECT_EQ(max_abs_difference(big, small), 2);
  Tolerance t{0, 0};
  EXPECT_NE(format_compare_result(compare(big, small, t), t)
                .find("actual 18446744073709551616 expected 18446744073709551616"),
            std::string::npos);  // printed through double, as documented
}

TEST(Comparator, FormatsAFailure) {
  Tensor expected = f32({2, 3}, {0, 0.5f, 0.49f, 1, 1, 1});
  Tensor actual = f32({2, 3}, {0, 0.5f, 0.51f, 1, kNan, 1.25f});
  Tolerance t{2e-05, 1e-05};
  CompareResult r = compare(actual, expected, t);
  EXPECT_EQ(format_compare_result(r, t),
            "FAIL: 3/6 mismatches (atol 2e-05, rtol 1e-05): 1 NaN, 0 Inf, 2 beyond tolerance; "
            "actual NaN 1/6, Inf 0/6; expected NaN 0/6, Inf 0/6; max abs err 0.25 at [1,2]; max "
            "rel err 0.25 at [1,2]; first mismatch at [0,2] (flat 2): actual 0.51 expected 0.49");
  EXPECT_EQ(r.nan_mismatches, 1);
  EXPECT_EQ(r.inf_mismatches, 0);
  EXPECT_EQ(r.tolerance_mismatches(), 2);
}

// Every mismatch a NaN or an Inf, and the finite pairs equal: the summary counts them by kind and
// never reads "max abs err 0", which looks like a pass.
TEST(Comparator, NanAndInfOnlyFailures) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor expected = f32({2, 3}, {0.5f, 1, 2, 3, 4, kNan});
  Tensor actual = f32({2, 3}, {0.5f, kNan, kNan, inf, 4, 1});
  Tolerance t{1e-4, 1e-4};
  CompareResult r = compare(actual, expected, t);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.mismatches, 4);
  EXPECT_EQ(r.nan_mismatches, 3);  // two actual NaN, one expected NaN without nan_equal
  EXPECT_EQ(r.inf_mismatches, 1);
  EXPECT_EQ(r.tolerance_mismatches(), 0);
  EXPECT_EQ(r.max_abs_error, 0);  // over the finite pairs, which all match
  const std::string text = format_compare_result(r, t);
  EXPECT_EQ(
      text,
      "FAIL: 4/6 mismatches (atol 0.0001, rtol 0.0001): 3 NaN, 1 Inf, 0 beyond tolerance; "
      "actual NaN 2/6, Inf 1/6; expected NaN 1/6, Inf 0/6; no finite mismatch (every "
      "mismatch is a NaN or an Inf); first mismatch at [0,1] (flat 1): actual nan expected 1");
  EXPECT_EQ(text.find("max abs err"), std::string::npos) << text;

  // All NaN: no finite pair at all.
  Tensor all_nan = f32({3}, {kNan, kNan, kNan});
  r = compare(all_nan, f32({3}, {1, 2, 3}), t);
  EXPECT_EQ(r.nan_mismatches, 3);
  EXPECT_FALSE(r.max_abs_error_index.has_value());
  EXPECT_EQ(format_compare_result(r, t).find("max abs err 0"), std::string::npos);
  // A pass without finite pairs says so rather than printing an error of 0.
  r = compare(all_nan, all_nan.clone(), {0, 0, true});
  EXPECT_TRUE(r.passed());
  EXPECT_NE(format_compare_result(r, {0, 0, true}).find("max abs err n/a (no finite pair)"),
            std::string::npos);
}

TEST(Comparator, FormatsAPassAndIntegers) {
  Tensor a = make_tensor<int64_t>(DType::kI64, {2}, {3, 4});
  CompareResult r = compare(a, a, {});
  EXPECT_EQ(format_compare_result(r, {}),
            "PASS: 0/2 mismatches (atol 0, rtol 0); max abs err 0 at [0]; max rel err 0 at [0]");
  Tensor b = make_tensor<int64_t>(DType::kI64, {2}, {3, 5});
  std::string text = format_compare_result(compare(a, b, {0, 0, true}), {0, 0, true});
  EXPECT_NE(text.find("NaN equal"), std::string::npos) << text;
  EXPECT_NE(text.find("first mismatch at [1] (flat 1): actual 4 expected 5"), std::string::npos)
      << text;
}

TEST(Comparator, FormatIndex) {
  EXPECT_EQ(format_index(0, {}), "[]");
  EXPECT_EQ(format_index(5, {6}), "[5]");
  EXPECT_EQ(format_index(35, {2, 18}), "[1,17]");
  EXPECT_EQ(format_index(23, {2, 3, 4}), "[1,2,3]");
}

TEST(Comparator, BitwiseEqual) {
  Tensor a = f32({2}, {1, kNan});
  EXPECT_TRUE(bitwise_equal(a, a.clone()));
  EXPECT_FALSE(bitwise_equal(a, f32({2}, {1, 2})));
  EXPECT_FALSE(bitwise_equal(a, a.reshaped({2, 1})));
  EXPECT_FALSE(bitwise_equal(f32({1}, {0.0f}), f32({1}, {-0.0f})));
  EXPECT_FALSE(bitwise_equal(f32({1}, {0}), make_tensor<int32_t>(DType::kI32, {1}, {0})));
  EXPECT_TRUE(bitwise_equal(f32({0}, {}), f32({0}, {})));
}

TEST(Comparator, MaxAbsDifference) {
  EXPECT_EQ(max_abs_difference(f32({3}, {1, 2, 3}), f32({3}, {1, 2.5f, 2})), 1);
  EXPECT_EQ(max_abs_difference(f32({2}, {kNan, 1}), f32({2}, {kNan, 1})), 0);
  EXPECT_EQ(max_abs_difference(f32({2}, {kNan, 1}), f32({2}, {1, 1})), INFINITY);
  EXPECT_EQ(max_abs_difference(f32({2}, {1, 1}), f32({2}, {1, kNan})), INFINITY);
  EXPECT_EQ(max_abs_difference(f32({1}, {kInf}), f32({1}, {kInf})), 0);
  EXPECT_EQ(max_abs_difference(f32({1}, {kInf}), f32({1}, {-kInf})), INFINITY);
  EXPECT_EQ(max_abs_difference(f32({1}, {1}), f32({1, 1}, {1})), INFINITY);
  EXPECT_EQ(max_abs_difference(f32({0}, {}), f32({0}, {})), 0);
  EXPECT_EQ(max_abs_difference(make_tensor<int64_t>(DType::kI64, {1}, {INT64_MIN}),
                               make_tensor<int64_t>(DType::kI64, {1}, {0})),
            0x1p63);
}

TEST(Comparator, SequencesCompareTensorByTensorUnderTheSameRule) {
  auto sequence = [](std::vector<Tensor> elements) {
    return HostValue::sequence(DType::kF32, std::move(elements)).value();
  };
  const HostValue expected = sequence({f32({2}, {1, 2}), f32({1}, {3})});
  auto same = compare_values(sequence({f32({2}, {1, 2}), f32({1}, {3})}), expected, {});
  ASSERT_TRUE(same.ok()) << same.status().to_string();
  EXPECT_TRUE(same->passed());
  EXPECT_EQ(same->count, 3);
  // NaN in one element fails however large the tolerance, and the details name the element.
  auto nan = compare_values(sequence({f32({2}, {1, 2}), f32({1}, {kNan})}), expected,
                            Tolerance{1e9, 1e9, false});
  ASSERT_TRUE(nan.ok());
  EXPECT_FALSE(nan->passed());
  EXPECT_EQ(nan->nan_mismatches, 1);
  EXPECT_EQ(nan->count, 3);
  EXPECT_EQ(nan->element, 1);
  EXPECT_NE(format_compare_result(*nan, {}).find("details of element 1"), std::string::npos);
  // Lengths, forms and an optional's presence must agree.
  EXPECT_FALSE(compare_values(sequence({f32({2}, {1, 2})}), expected, {}).ok());
  EXPECT_FALSE(compare_values(f32({2}, {1, 2}), expected, {}).ok());
  const HostValue none = HostValue::none(ValueForm::kOptionalTensor, DType::kF32);
  const HostValue some = HostValue::optional_of(f32({1}, {1}));
  EXPECT_FALSE(compare_values(none, some, {}).ok());
  auto both_empty = compare_values(none, none, {});
  ASSERT_TRUE(both_empty.ok());
  EXPECT_TRUE(both_empty->passed());
  auto optional_nan = compare_values(HostValue::optional_of(f32({1}, {kNan})), some, {});
  ASSERT_TRUE(optional_nan.ok());
  EXPECT_FALSE(optional_nan->passed());
}

}  // namespace
}  // namespace kiln
