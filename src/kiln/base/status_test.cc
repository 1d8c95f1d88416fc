#include "kiln/base/status.h"

#include <gtest/gtest.h>

#include "kiln/base/tensor.h"

namespace kiln {
namespace {

StatusOr<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("x must be positive, got {}", x);
  return x;
}

Status use_parse(int x, int* out) {
  KILN_ASSIGN_OR_RETURN(*out, parse_positive(x));
  return ok_status();
}

TEST(Status, CarriesMessageAndNotesOutward) {
  Status s =
      invalid_argument("bad dim {}", 3).with_note("in node 'a' (Conv)").with_note("in model 'm'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.to_string(), "invalid argument: bad dim 3\n  in node 'a' (Conv)\n  in model 'm'");
}

TEST(Status, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(use_parse(5, &out).ok());
  EXPECT_EQ(out, 5);
  Status s = use_parse(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 5);
}

TEST(Tensor, CreateRejectsOverflowingDims) {
  auto t = Tensor::create(DType::kF32, {int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_FALSE(t.ok());
  EXPECT_FALSE(Tensor::create(DType::kF32, {-1, 2}).ok());
}

TEST(Tensor, SetElementFromInt64WrapsIntegersAndConvertsFloats) {
  Tensor i8 = Tensor::create(DType::kI8, {1}).value();
  set_element_from_int64(i8, 0, 257);
  EXPECT_EQ(element_as_int64(i8, 0), 1);
  Tensor f = Tensor::create(DType::kF32, {2}).value();
  set_element_from_int64(f, 1, 7);
  EXPECT_EQ(f.values<float>()[1], 7.0f);
  Tensor d = Tensor::create(DType::kF64, {1}).value();
  set_element_from_int64(d, 0, -3);
  EXPECT_EQ(d.values<double>()[0], -3.0);
}

TEST(Tensor, CreateIsZeroedAndAligned) {
  auto t = Tensor::create(DType::kF32, {3, 5});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->element_count(), 15);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % 64, 0u);
  for (float v : t->values<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(DType, NamesRoundTrip) {
  for (int code = 1; code <= kLastDTypeCode; ++code) {
    auto dtype = static_cast<DType>(code);
    EXPECT_EQ(parse_dtype(dtype_name(dtype)), dtype);
  }
  EXPECT_FALSE(parse_dtype("f33").has_value());
}

}  // namespace
}  // namespace kiln
