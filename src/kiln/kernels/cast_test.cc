// Cast and CastLike (cast.cc). Expected values are hand-computed from the conversion rules in
// numeric_convert.h and IEEE formats.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/base/half.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/kernel.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

// ONNX TensorProto codes.
constexpr int64_t kFloat = 1, kUint8 = 2, kInt8 = 3, kInt32 = 6, kInt64 = 7, kString = 8, kBool = 9,
                  kFloat16 = 10, kBfloat16 = 16;

StatusOr<Tensor> cast(const Tensor& x, int64_t to) {
  Attributes a;
  a.set("to", to);
  return run_one("Cast", {x}, a);
}

bool has_message(const Status& s, StatusCode code, std::string_view text) {
  return !s.ok() && s.code() == code && s.message().find(text) != std::string::npos;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Cast, FloatToIntTruncatesSaturatesAndZeroesNaN) {
  Tensor x = make_tensor<float>(DType::kF32, {7}, {3.7f, -3.7f, NAN, kInf, -kInf, 1e10f, -0.5f});
  const int32_t hi = std::numeric_limits<int32_t>::max(), lo = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(values_of<int32_t>(cast(x, kInt32)), (std::vector<int32_t>{3, -3, 0, hi, lo, hi, 0}));
  EXPECT_EQ(values_of<uint8_t>(cast(x, kUint8)), (std::vector<uint8_t>{3, 0, 0, 255, 0, 255, 0}));
  // 2^63 does not fit int64; the largest float below it does.
  Tensor big =
      make_tensor<double>(DType::kF64, {2}, {9223372036854775808.0, 9223372036854774784.0});
  EXPECT_EQ(values_of<int64_t>(cast(big, kInt64)),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(), 9223372036854774784}));
}

TEST(Cast, IntegersWrap) {
  Tensor x = make_tensor<int64_t>(DType::kI64, {3}, {300, -129, 5});
  EXPECT_EQ(values_of<int8_t>(cast(x, kInt8)), (std::vector<int8_t>{44, 127, 5}));
  EXPECT_EQ(values_of<uint8_t>(cast(x, kUint8)), (std::vector<uint8_t>{44, 127, 5}));
}

TEST(Cast, BoolBothWays) {
  Tensor x = make_tensor<float>(DType::kF32, {4}, {0.f, -0.f, 0.25f, NAN});
  auto b = cast(x, kBool);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->dtype(), DType::kBool);
  EXPECT_EQ(values_of<uint8_t>(b), (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_EQ(values_of<float>(cast(*b, kFloat)), (std::vector<float>{0, 0, 1, 1}));
}

TEST(Cast, HalfRoundsCorrectlyFromDouble) {
  // 1 + 2^-11 + 2^-40 lies just above the midpoint of the f16 neighbours 1 and 1 + 2^-10:
  // rounding through f32 first would land on the midpoint and tie to 1.
  Tensor x = make_tensor<double>(DType::kF64, {2},
                                 {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), 65520.0});
  EXPECT_EQ(values_of<uint16_t>(cast(x, kFloat16)), (std::vector<uint16_t>{0x3c01, 0x7c00}));
  Tensor h = make_tensor<uint16_t>(DType::kF16, {1}, {0x3c01});
  EXPECT_EQ(values_of<double>(cast(h, 11))[0], 1.0 + std::ldexp(1.0, -10));
}

TEST(Cast, Bfloat16Truncates) {
  // The ONNX (opset <= 17) reference keeps the high 16 bits of the f32 value.
  const float v = std::bit_cast<float>(0x3ef5ffffu);
  Tensor x = make_tensor<float>(DType::kF32, {3}, {v, NAN, -kInf});
  auto y = values_of<uint16_t>(cast(x, kBfloat16));
  EXPECT_EQ(y[0], 0x3ef5);
  EXPECT_EQ(y[1] & 0x7fc0, 0x7fc0);  // quiet NaN
  EXPECT_EQ(y[2], 0xff80);
  Tensor b = make_tensor<uint16_t>(DType::kBF16, {1}, {0x3ef5});
  EXPECT_EQ(values_of<float>(cast(b, kFloat))[0], std::bit_cast<float>(0x3ef50000u));
}

TEST(Cast, BadAttributes) {
  Tensor x = make_tensor<float>(DType::kF32, {1}, {1});
  EXPECT_TRUE(has_message(cast(x, kString).status(), StatusCode::kUnimplemented,
                          "attribute 'to' = 8 (STRING) is not supported"));
  EXPECT_TRUE(has_message(cast(x, 99).status(), StatusCode::kInvalidArgument,
                          "attribute 'to' = 99 is not an ONNX data type"));
  EXPECT_TRUE(has_message(run_one("Cast", {x}, {}).status(), StatusCode::kInvalidArgument,
                          "attribute 'to' is required"));
  Attributes extra;
  extra.set("to", kFloat);
  extra.set("saturate", int64_t{1});
  EXPECT_TRUE(has_message(run_one("Cast", {x}, extra).status(), StatusCode::kUnimplemented,
                          "attribute 'saturate' is not supported"));
}

TEST(CastLike, TakesTheDtypeOfInput1) {
  Tensor x = make_tensor<float>(DType::kF32, {2}, {2.5f, -1.5f});
  Tensor like = make_tensor<int8_t>(DType::kI8, {}, {0});
  auto y = run_one("CastLike", {x, like}, {});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kI8);
  EXPECT_EQ(values_of<int8_t>(y), (std::vector<int8_t>{2, -1}));
  EXPECT_TRUE(has_message(run_one("CastLike", {x}, {}).status(), StatusCode::kInvalidArgument,
                          "expects 2 inputs"));
}

TEST(Cast, KeepsShapeComputationValues) {
  Attributes a;
  a.set("to", kUint8);
  std::vector<DimExpr> values = {DimExpr::symbol("N"), DimExpr(300)};
  InferArgs args{a, {ValueType{DType::kI64, {2}}}, {nullptr}, 1, {}};
  args.values = {&values};
  ASSERT_TRUE(find_op_def("Cast")->infer(args).ok());
  ASSERT_EQ(args.outputs[0].dtype, DType::kU8);
  ASSERT_EQ(args.output_values.size(), 1u);
  ASSERT_TRUE(args.output_values[0].has_value());
  EXPECT_EQ((*args.output_values[0])[0], DimExpr::symbol("N"));
  EXPECT_EQ((*args.output_values[0])[1], DimExpr(44));
  // Symbolic shapes pass through.
  InferArgs sym_args{a, {ValueType{DType::kF32, {DimExpr::symbol("B"), 3}}}, {nullptr}, 1, {}};
  ASSERT_TRUE(find_op_def("Cast")->infer(sym_args).ok());
  EXPECT_EQ(shape_to_string(sym_args.outputs[0].shape), "[B,3]");
}

}  // namespace
}  // namespace kiln::kernels
