// Resize (resize.cc). Expected values are hand-computed from the coordinate formulas
// of the ONNX spec (cubic ones checked against onnx/backend/test/case/node/resize.py).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "kiln/base/half.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/kernel.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

Tensor scales(std::vector<float> v) { return f32({static_cast<int64_t>(v.size())}, v); }
Tensor sizes(std::vector<int64_t> v) { return i64({static_cast<int64_t>(v.size())}, v); }

// Runs `op` with X (input 0) as data and the other inputs as constants; nullopt: absent.
StatusOr<Tensor> run_op(std::string_view op, const Tensor& x,
                        const std::vector<std::optional<Tensor>>& rest,
                        const Attributes& attributes = {}) {
  const OpDef* k = find_op_def(op);
  if (k == nullptr) return not_found("no kernel {}", op);
  std::vector<ConcreteInput> concrete = {{true, x.dtype(), x.shape(), nullptr}};
  std::vector<ConstBuffer> in = {{x.dtype(), x.shape(), x.data()}};
  for (const auto& t : rest) {
    if (t) {
      concrete.push_back({true, t->dtype(), t->shape(), &*t});
      in.push_back({t->dtype(), t->shape(), t->data()});
    } else {
      concrete.push_back({});
      in.push_back({});
    }
  }
  KILN_ASSIGN_OR_RETURN(Planned p, plan_concrete(*k, attributes, concrete, 1, nullptr));
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::create(p.outputs[0].dtype, p.outputs[0].dims));
  MutableBuffer out{y.dtype(), y.shape(), y.mutable_data()};
  KILN_RETURN_IF_ERROR(p.kernel->run(in, {&out, 1}));
  return y;
}

StatusOr<Tensor> resize_scales(const Tensor& x, std::vector<float> s, const Attributes& a = {}) {
  return run_op("Resize", x, {std::nullopt, scales(std::move(s))}, a);
}
StatusOr<Tensor> resize_sizes(const Tensor& x, std::vector<int64_t> s, const Attributes& a = {}) {
  return run_op("Resize", x, {std::nullopt, std::nullopt, sizes(std::move(s))}, a);
}

void expect_near(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

bool has_message(const Status& s, StatusCode code, std::string_view text) {
  return !s.ok() && s.code() == code && s.message().find(text) != std::string::npos;
}

TEST(Resize, NearestUpsampleByScales) {
  auto y = resize_scales(f32({1, 1, 2, 2}, {1, 2, 3, 4}), {1, 1, 2, 3});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->shape(), (ConcreteShape{1, 1, 4, 6}));
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                                     3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
}

TEST(Resize, NearestModes) {
  const Tensor x = f32({4}, {10, 20, 30, 40});
  // asymmetric, 4 -> 8: x_original = x / 2 = 0, .5, 1, 1.5, ...
  auto a = [](const char* nearest) {
    return attrs({{"coordinate_transformation_mode", std::string("asymmetric")},
                  {"nearest_mode", std::string(nearest)}});
  };
  EXPECT_EQ(values_of<float>(resize_sizes(x, {8}, a("round_prefer_floor"))),
            (std::vector<float>{10, 10, 20, 20, 30, 30, 40, 40}));
  EXPECT_EQ(values_of<float>(resize_sizes(x, {8}, a("round_prefer_ceil"))),
            (std::vector<float>{10, 20, 20, 30, 30, 40, 40, 40}));
  EXPECT_EQ(values_of<float>(resize_sizes(x, {8}, a("floor"))),
            (std::vector<float>{10, 10, 20, 20, 30, 30, 40, 40}));
  EXPECT_EQ(values_of<float>(resize_sizes(x, {8}, a("ceil"))),
            (std::vector<float>{10, 20, 20, 30, 30, 40, 40, 40}));
  // half_pixel, 4 -> 6: x_original = (x + .5) * 2/3 - .5 = -1/6, 1/2, 7/6, 11/6, 5/2, 19/6.
  auto h = [](const char* nearest) { return attrs({{"nearest_mode", std::string(nearest)}}); };
  EXPECT_EQ(values_of<float>(resize_sizes(x, {6}, h("round_prefer_floor"))),
            (std::vector<float>{10, 10, 20, 30, 30, 40}));
  EXPECT_EQ(values_of<float>(resize_sizes(x, {6}, h("ceil"))),
            (std::vector<float>{10, 20, 30, 30, 40, 40}));
}

TEST(Resize, NearestOnIntegers) {
  auto y = resize_scales(i32({2, 2}, {1, -2, 3, 4}), {2, 1});
  EXPECT_EQ(values_of<int32_t>(y), (std::vector<int32_t>{1, -2, 1, -2, 3, 4, 3, 4}));
}

TEST(Resize, LinearHalfPixel) {
  // x_original = (x + .5) / 2 - .5 = -.25, .25, .75, 1.25; the ends clamp to the edge.
  auto y = resize_scales(f32({1, 1, 2, 2}, {1, 2, 3, 4}), {1, 1, 2, 2},
                         attrs({{"mode", std::string("linear")}}));
  expect_near(values_of<float>(y),
              {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
}

TEST(Resize, LinearAlignCornersIsExactOnALinearFunction) {
  // v(z, y, x) = 4z + 2y + x on a 2x2x2 cube, resized to 3x3x3: align_corners maps i to i/2, and
  // trilinear interpolation reproduces the linear function.
  std::vector<double> v;
  for (int i = 0; i < 8; ++i) v.push_back(i);
  auto y = run_op("Resize", f64({1, 2, 2, 2}, v), {std::nullopt, std::nullopt, sizes({1, 3, 3, 3})},
                  attrs({{"mode", std::string("linear")},
                         {"coordinate_transformation_mode", std::string("align_corners")}}));
  std::vector<double> got = values_of<double>(y);
  ASSERT_EQ(got.size(), 27u);
  for (int z = 0; z < 3; ++z) {
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) EXPECT_DOUBLE_EQ(got[z * 9 + r * 3 + c], 2.0 * z + r + c / 2.0);
    }
  }
}

TEST(Resize, LinearPytorchHalfPixel) {
  const Tensor x = f32({4}, {10, 20, 30, 40});
  const Attributes a =
      attrs({{"mode", std::string("linear")},
             {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}});
  // 4 -> 3: x_original = (x + .5) * 4/3 - .5 = 1/6, 3/2, 17/6.
  expect_near(values_of<float>(resize_sizes(x, {3}, a)), {10 + 10.0 / 6, 25, 30 + 10 * 5.0 / 6});
  // A length-1 output reads x_original = 0 (ONNX Runtime; the reference's -.5 clamps to the same
  // element here): the first element.
  expect_near(values_of<float>(resize_sizes(x, {1}, a)), {10});
}

// Scales that do not divide the input evenly (0.5 at odd sizes, 1.5 at 3): the expected values are
// ONNX Runtime 1.30's outputs for these models (opset 13, X = arange(n * n) as [1, 1, n, n],
// scales [1, 1, s, s]). The ONNX reference takes the resized length as s * n (2.5 for n = 5) and
// gives values far from these (for align_corners 5 -> 2: [0, 2.67, 13.3, 16] instead of
// [0, 4, 20, 24]). Run in float and in double (the reference evaluator's precision).
TEST(Resize, MatchesOnnxRuntimeAtOddSizes) {
  struct Case {
    const char* coord;
    const char* mode;
    int64_t n;
    float scale;
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      {"align_corners", "linear", 5, 0.5f, {0, 4, 20, 24}},
      {"align_corners", "nearest", 5, 0.5f, {0, 4, 20, 24}},
      {"align_corners", "cubic", 5, 0.5f, {0, 4, 20, 24}},
      {"align_corners", "linear", 7, 0.5f, {0, 3, 6, 21, 24, 27, 42, 45, 48}},
      {"align_corners",
       "linear",
       3,
       1.5f,
       {0, 0.6666667, 1.3333334, 2, 2, 2.6666667, 3.3333335, 4, 4, 4.666667, 5.333334, 6, 6,
        6.666667, 7.3333335, 8}},
      {"align_corners",
       "cubic",
       3,
       1.5f,
       {0, 0.574074, 1.4259255, 2, 1.7222219, 2.2962968, 3.1481476, 3.7222228, 4.2777767, 4.851852,
        5.7037005, 6.2777758, 6, 6.5740767, 7.425924, 8}},
      // Output length 1: coordinate 0, the first element (the reference's -0.5 gives 0.375 with
      // cubic taps).
      {"pytorch_half_pixel", "cubic", 3, 0.5f, {0}},
      {"pytorch_half_pixel", "linear", 3, 0.5f, {0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} {} n={} scale={}", c.coord, c.mode, c.n, c.scale));
    const Attributes a = attrs(
        {{"mode", std::string(c.mode)}, {"coordinate_transformation_mode", std::string(c.coord)}});
    std::vector<float> xf;
    std::vector<double> xd;
    for (int64_t i = 0; i < c.n * c.n; ++i) {
      xf.push_back(static_cast<float>(i));
      xd.push_back(static_cast<double>(i));
    }
    auto yf = resize_scales(f32({1, 1, c.n, c.n}, xf), {1, 1, c.scale, c.scale}, a);
    ASSERT_TRUE(yf.ok()) << yf.status().message();
    expect_near(values_of<float>(yf), c.want);
    auto yd = resize_scales(f64({1, 1, c.n, c.n}, xd), {1, 1, c.scale, c.scale}, a);
    ASSERT_TRUE(yd.ok()) << yd.status().message();
    const std::vector<double> got = values_of<double>(yd);
    ASSERT_EQ(got.size(), c.want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], c.want[i], 1e-5) << i;
  }
}

TEST(Resize, CubicHalfPixel) {
  // x = 0: x_original = -.25, taps -2..1 (clamped: 0, 0, 0, 1) with weight c3(1.25) = -0.10546875
  // on the last one (A = -0.75).
  auto y = resize_scales(f32({4}, {0, 1, 4, 9}), {2}, attrs({{"mode", std::string("cubic")}}));
  expect_near(values_of<float>(y), {-0.10546875, 0.12109375, 0.45703125, 1.609375, 2.828125,
                                    5.44921875, 7.97265625, 9.52734375});
}

TEST(Resize, CubicExcludeOutside) {
  auto y = resize_scales(f32({4}, {0, 1, 4, 9}), {2},
                         attrs({{"mode", std::string("cubic")},
                                {"cubic_coeff_a", -0.5},
                                {"exclude_outside", int64_t{1}}}));
  expect_near(values_of<float>(y),
              {-0.08823529411764706, 0.1240875912408759, 0.5725190839694656, 1.5625, 3.0625,
               5.312977099236641, 8.116788321167883, 9.441176470588234});
}

TEST(Resize, CubicAlignCorners) {
  // 4 -> 3: x_original = 0, 1.5, 3. At 1.5 the taps 0..3 weigh -0.09375, 0.59375, 0.59375,
  // -0.09375: -0.09375 * 9 + 0.59375 * 5 = 2.125.
  auto y = resize_sizes(f32({4}, {0, 1, 4, 9}), {3},
                        attrs({{"mode", std::string("cubic")},
                               {"coordinate_transformation_mode", std::string("align_corners")}}));
  expect_near(values_of<float>(y), {0, 2.125, 9});
}

TEST(Resize, TfCropAndResizeExtrapolates) {
  // roi [.5, 1.5] of 4 -> 3: x_original = 1.5 x + 1.5 = 1.5, 3, 4.5 (outside).
  auto y = run_op("Resize", f32({4}, {10, 20, 30, 40}),
                  {f32({2}, {0.5f, 1.5f}), std::nullopt, sizes({3})},
                  attrs({{"mode", std::string("linear")},
                         {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                         {"extrapolation_value", -1.0}}));
  expect_near(values_of<float>(y), {25, 40, -1});
}

TEST(Resize, EmptyScalesStandForAbsent) {
  auto y = run_op("Resize", f32({2}, {1, 2}), {std::nullopt, f32({0}, {}), sizes({4})},
                  attrs({{"coordinate_transformation_mode", std::string("asymmetric")}}));
  EXPECT_EQ(values_of<float>(y), (std::vector<float>{1, 1, 2, 2}));
}

TEST(Resize, HalfLinear) {
  const Tensor x = make_tensor(DType::kF16, {2},
                               std::vector<uint16_t>{float_to_half_bits(1), float_to_half_bits(3)});
  auto y = resize_scales(x, {2}, attrs({{"mode", std::string("linear")}}));
  std::vector<uint16_t> bits = values_of<uint16_t>(y);
  std::vector<float> got;
  for (uint16_t b : bits) got.push_back(half_bits_to_float(b));
  expect_near(got, {1, 1.5, 2.5, 3});
}

TEST(Resize, LargeResultIsTheSameEveryRun) {
  // Big enough to run in parallel; every element is checked against its own formula.
  std::vector<float> v(64 * 64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 64);  // v = column
  auto y = resize_sizes(f32({64, 64}, v), {200, 256},
                        attrs({{"mode", std::string("linear")},
                               {"coordinate_transformation_mode", std::string("align_corners")}}));
  std::vector<float> got = values_of<float>(y);
  ASSERT_EQ(got.size(), 200u * 256u);
  for (int r = 0; r < 200; ++r) {
    for (int c = 0; c < 256; ++c) ASSERT_NEAR(got[r * 256 + c], c * 63.0 / 255.0, 1e-4);
  }
}

// Symbolic inference.
struct Symbolic {
  Attributes attributes;
  std::vector<std::optional<ValueType>> inputs;
  std::vector<const Tensor*> constants;
  std::vector<const std::vector<DimExpr>*> values;

  StatusOr<Shape> infer() {
    InferArgs args{attributes, inputs, constants, 1, {}, values, {}, {}};
    KILN_RETURN_IF_ERROR(find_op_def("Resize")->infer(args));
    return args.outputs[0].shape;
  }
};

const DimExpr kN = DimExpr::symbol("N");
const DimExpr kH = DimExpr::symbol("H");

Symbolic with_scales(const Tensor& s) {
  return Symbolic{
      {},
      {ValueType{DType::kF32, {kN, 3, kH, 8}}, std::nullopt, ValueType{DType::kF32, {4}}},
      {nullptr, nullptr, &s},
      {}};
}

TEST(ResizeInfer, IntegerScalesOnSymbolicDims) {
  const Tensor s = scales({1, 1, 2, 0.5});
  auto out = with_scales(s).infer();
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, (Shape{kN, 3, kH * DimExpr(2), 4}));
  const Tensor half = scales({1, 1, 0.5, 1.5});
  out = with_scales(half).infer();
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, (Shape{kN, 3, kH.floor_div(2), 12}));
}

TEST(ResizeInfer, RoundedReciprocalOnDivisibleSymbolicDim) {
  const Tensor s = scales({1, 1, 1.0f / 3, 1});
  Symbolic sym = with_scales(s);
  sym.inputs[0]->shape[2] = kH * DimExpr(3);
  auto out = sym.infer();
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, (Shape{kN, 3, kH, 8}));
  // Not provably divisible: no expression for floor(H * 0.333...).
  out = with_scales(s).infer();
  EXPECT_EQ(out.status().code(), StatusCode::kUnimplemented);
}

TEST(ResizeInfer, FractionalScaleOnSymbolicDimIsUnimplemented) {
  const Tensor s = scales({1, 1, 0.6f, 1});
  auto out = with_scales(s).infer();
  EXPECT_TRUE(has_message(out.status(), StatusCode::kUnimplemented, "symbolic size 'H'"))
      << out.status().to_string();
}

TEST(ResizeInfer, SizesFromShapeValues) {
  const std::vector<DimExpr> values = {kN, 3, kH * DimExpr(2), 16};
  Symbolic s{{},
             {ValueType{DType::kF32, {kN, 3, kH, 8}}, std::nullopt, std::nullopt,
              ValueType{DType::kI64, {4}}},
             {nullptr, nullptr, nullptr, nullptr},
             {nullptr, nullptr, nullptr, &values}};
  auto out = s.infer();
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, (Shape{kN, 3, kH * DimExpr(2), 16}));
  // Unknown sizes: must be known at compile time.
  s.values = {};
  out = s.infer();
  EXPECT_TRUE(has_message(out.status(), StatusCode::kUnimplemented, "known at compile time"))
      << out.status().to_string();
}

TEST(ResizeBadInput, HostileScalesAreErrors) {
  const Tensor x = f32({2}, {1, 2});
  for (float s : {1e30f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), -2.0f, 0.0f}) {
    auto y = resize_scales(x, {s});
    EXPECT_FALSE(y.ok()) << s;
    EXPECT_EQ(y.status().code(), StatusCode::kInvalidArgument) << y.status().to_string();
  }
  // Too many elements in all, each dim being fine.
  auto y = resize_scales(f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), {1e6f, 1e6f, 1e6f});
  EXPECT_TRUE(has_message(y.status(), StatusCode::kInvalidArgument, "too many"))
      << y.status().to_string();
  auto z = resize_sizes(x, {int64_t{1} << 50});
  EXPECT_FALSE(z.ok());
}

TEST(ResizeBadInput, ScalesAndSizes) {
  const Tensor x = f32({2}, {1, 2});
  auto both = run_op("Resize", x, {std::nullopt, scales({2}), sizes({4})});
  EXPECT_TRUE(has_message(both.status(), StatusCode::kInvalidArgument, "only one of"));
  auto neither = run_op("Resize", x, {});
  EXPECT_TRUE(has_message(neither.status(), StatusCode::kInvalidArgument, "is required"));
  auto rank = resize_scales(x, {1, 2});
  EXPECT_TRUE(has_message(rank.status(), StatusCode::kInvalidArgument, "must have 1 elements"));
  auto negative = resize_sizes(x, {-1});
  EXPECT_TRUE(has_message(negative.status(), StatusCode::kInvalidArgument, "element 0"));
  auto from_empty = resize_sizes(f32({0}, {}), {3});
  EXPECT_TRUE(has_message(from_empty.status(), StatusCode::kInvalidArgument, "empty"));
}

TEST(ResizeBadInput, UnsupportedAttributesAndTypes) {
  const Tensor x = f32({2}, {1, 2});
  auto mode = resize_scales(x, {2}, attrs({{"mode", std::string("area")}}));
  EXPECT_TRUE(
      has_message(mode.status(), StatusCode::kUnimplemented, "attribute 'mode' value 'area'"));
  auto coord = resize_scales(
      x, {2}, attrs({{"coordinate_transformation_mode", std::string("half_pixel_symmetric")}}));
  EXPECT_TRUE(has_message(coord.status(), StatusCode::kUnimplemented,
                          "attribute 'coordinate_transformation_mode'"));
  auto antialias = resize_scales(x, {2}, attrs({{"antialias", int64_t{1}}}));
  EXPECT_TRUE(has_message(antialias.status(), StatusCode::kUnimplemented, "'antialias'"));
  auto exclude = resize_scales(x, {2}, attrs({{"exclude_outside", int64_t{2}}}));
  EXPECT_TRUE(has_message(exclude.status(), StatusCode::kInvalidArgument, "exclude_outside"));
  auto linear_int = resize_scales(i32({2}, {1, 2}), {2}, attrs({{"mode", std::string("linear")}}));
  EXPECT_TRUE(has_message(linear_int.status(), StatusCode::kUnimplemented, "mode 'linear'"));
  auto crop = resize_sizes(
      x, {3}, attrs({{"coordinate_transformation_mode", std::string("tf_crop_and_resize")}}));
  EXPECT_TRUE(has_message(crop.status(), StatusCode::kInvalidArgument, "'roi'"))
      << crop.status().to_string();
}

TEST(ResizeBadInput, HostileRoiAndExtrapolationOnIntegers) {
  // A NaN roi puts every coordinate outside; an out-of-range extrapolation value saturates.
  auto y =
      run_op("Resize", i32({2}, {1, 2}),
             {f32({2}, {std::numeric_limits<float>::quiet_NaN(), 1}), std::nullopt, sizes({3})},
             attrs({{"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                    {"extrapolation_value", 1e30}}));
  EXPECT_EQ(values_of<int32_t>(y), (std::vector<int32_t>(3, std::numeric_limits<int32_t>::max())));
}

}  // namespace
}  // namespace kiln::kernels
