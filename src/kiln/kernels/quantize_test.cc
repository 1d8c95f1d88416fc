// Quantization kernels: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear (quantize.cc),
// QLinearConv (spatial.cc) and QLinearMatMul (linalg.cc). Expected values come from the ONNX
// backend test cases (onnx/backend/test/case/node/*.py) or from numpy by hand (np.rint, which
// rounds ties to even, then + zero point, then np.clip), noted at each case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/kernels/quantize.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT
using Ints = std::vector<int64_t>;

Tensor i8(ConcreteShape shape, const std::vector<int8_t>& values) {
  return make_tensor(DType::kI8, std::move(shape), values);
}
Tensor f32s(ConcreteShape shape, const std::vector<float>& values) {
  return make_tensor(DType::kF32, std::move(shape), values);
}

TEST(RoundHalfEven, TiesGoToEven) {
  EXPECT_EQ(round_half_even(0.5f), 0.0f);
  EXPECT_EQ(round_half_even(1.5f), 2.0f);
  EXPECT_EQ(round_half_even(2.5f), 2.0f);
  EXPECT_EQ(round_half_even(-0.5f), 0.0f);
  EXPECT_EQ(round_half_even(-1.5f), -2.0f);
  EXPECT_EQ(round_half_even(-2.5f), -2.0f);
  EXPECT_EQ(round_half_even(2.4999998f), 2.0f);
  EXPECT_EQ(round_half_even(8388609.0f), 8388609.0f);  // 2^23 + 1: already whole
  EXPECT_EQ(quantize_scaled(std::numeric_limits<float>::infinity(), 3, 0, 255), 255);
  EXPECT_EQ(quantize_scaled(-std::numeric_limits<float>::infinity(), 3, 0, 255), 0);
  EXPECT_EQ(quantize_scaled(std::nanf(""), 3, 0, 255), 3);
  // The integer rounding of quantize_scaled: ties both ways, the zero point after rounding,
  // saturation of huge values.
  EXPECT_EQ(quantize_scaled(3.5f, 0, -128, 127), 4);
  EXPECT_EQ(quantize_scaled(-3.5f, 0, -128, 127), -4);
  EXPECT_EQ(quantize_scaled(-2.5f, 0, -128, 127), -2);
  EXPECT_EQ(quantize_scaled(-2.5000002f, 0, -128, 127), -3);
  EXPECT_EQ(quantize_scaled(2.5f, 1, 0, 255), 3);
  EXPECT_EQ(quantize_scaled(-0.49999997f, 0, -128, 127), 0);
  EXPECT_EQ(quantize_scaled(1e10f, 0, -128, 127), 127);
  EXPECT_EQ(quantize_scaled(-1e10f, 5, 0, 255), 0);
  EXPECT_EQ(quantize_scaled(126.5f, 0, -128, 127), 126);
  EXPECT_EQ(quantize_scaled(127.5f, 0, -128, 127), 127);
}

TEST(QuantizeLinear, OnnxExampleSaturates) {
  // test_quantizelinear: scale 2, zero point 128.
  auto y = run_one("QuantizeLinear",
                   {f32s({6}, {0, 2, 3, 1000, -254, -1000}), f32s({}, {2}), u8({}, {128})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kU8);
  EXPECT_EQ(values_of<uint8_t>(*y), (std::vector<uint8_t>{128, 129, 130, 255, 1, 0}));
}

TEST(QuantizeLinear, TiesToEvenBeforeAnOddZeroPoint) {
  // np.rint([0.5, 1.5, 2.5, -0.5, -1.5, -2.5]) = [0, 2, 2, -0, -2, -2]; + 1.
  auto y = run_one("QuantizeLinear", {f32s({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f}),
                                      f32s({}, {1}), i8({}, {1})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kI8);
  EXPECT_EQ(values_of<int8_t>(*y), (std::vector<int8_t>{1, 3, 3, 1, -1, -1}));
  // i8 saturation, Inf, and NaN (the zero point); no zero point means u8 with 0.
  const float inf = std::numeric_limits<float>::infinity();
  auto s = run_one("QuantizeLinear",
                   {f32s({5}, {300, -300, inf, -inf, std::nanf("")}), f32s({}, {1}), i8({}, {-5})});
  EXPECT_EQ(values_of<int8_t>(s), (std::vector<int8_t>{127, -128, 127, -128, -5}));
  auto u = run_one("QuantizeLinear", {f32s({3}, {-7, 7.5f, 600}), f32s({}, {0.5f})});
  EXPECT_EQ(values_of<uint8_t>(u), (std::vector<uint8_t>{0, 15, 255}));
}

TEST(QuantizeLinear, PerAxisAndInt32Input) {
  // test_quantizelinear_axis: scales [2, 4, 5] and zero points [84, 24, 196] along axis 1.
  Tensor x = f32s({1, 3, 3, 2}, {-162, 10, -100, 232, -20, -50, -76, 0, 0, 252, 32, -44, 245, -485,
                                 -960, -270, -375, -470});
  auto y = run_one("QuantizeLinear", {x, f32s({3}, {2, 4, 5}), u8({3}, {84, 24, 196})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<uint8_t>(*y), (std::vector<uint8_t>{3, 89, 34, 200, 74, 59, 5, 24, 24, 87, 32,
                                                          13, 245, 99, 4, 142, 121, 102}));
  // The same along axis -1 of a [2, 2] input: column scales [1, 2]. 5 / 2 = 2.5 -> 2.
  auto c =
      run_one("QuantizeLinear", {f32s({2, 2}, {3, 5, -3, 7}), f32s({2}, {1, 2}), i8({2}, {0, 0})},
              attrs({{"axis", int64_t{-1}}}));
  EXPECT_EQ(values_of<int8_t>(c), (std::vector<int8_t>{3, 2, -3, 4}));
  // int32 input: 7 / 2 = 3.5 -> 4, -7 / 2 -> -4, plus 10.
  auto n = run_one("QuantizeLinear", {i32({3}, {7, -7, 1000}), f32s({}, {2}), u8({}, {10})});
  EXPECT_EQ(values_of<uint8_t>(n), (std::vector<uint8_t>{14, 6, 255}));
}

TEST(QuantizeLinear, SymbolicShapeAndBadInputs) {
  auto t = infer_op("QuantizeLinear", {type(DType::kF32, {sym("N"), 3, sym("H")}),
                                       type(DType::kF32, {3}), type(DType::kI8, {3})});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)[0].dtype, DType::kI8);
  EXPECT_EQ(shape_to_string((*t)[0].shape), "[N,3,H]");
  // Zero point and scale of different shapes.
  auto z = infer_op("QuantizeLinear",
                    {type(DType::kF32, {2, 3}), type(DType::kF32, {3}), type(DType::kU8, {})});
  EXPECT_TRUE(contains(error_of(z),
                       "input 2 'y_zero_point' must have the shape of input 1 "
                       "'y_scale' [3], got []"))
      << error_of(z);
  auto zc = infer_op("QuantizeLinear",
                     {type(DType::kF32, {2, 3}), type(DType::kF32, {3}), type(DType::kU8, {2})});
  EXPECT_TRUE(contains(error_of(zc), "input 2 'y_zero_point' dim 0")) << error_of(zc);
  // A per-axis scale whose length is not the axis dim, and an axis out of range.
  auto len = infer_op("QuantizeLinear", {type(DType::kF32, {2, 3}), type(DType::kF32, {2})});
  EXPECT_TRUE(contains(error_of(len), "input 1 'y_scale' dim 0")) << error_of(len);
  auto axis = infer_op("QuantizeLinear", {type(DType::kF32, {2, 3}), type(DType::kF32, {3})},
                       attrs({{"axis", int64_t{2}}}));
  EXPECT_TRUE(contains(error_of(axis), "attribute 'axis'")) << error_of(axis);
  // Dtypes: an f64 scale, a u8 x, an f32 zero point; a 2-D scale.
  auto scale = infer_op("QuantizeLinear", {type(DType::kF32, {2}), type(DType::kF64, {})});
  EXPECT_TRUE(contains(error_of(scale), "input 1 'y_scale' must have dtype f32"))
      << error_of(scale);
  auto x = infer_op("QuantizeLinear", {type(DType::kU8, {2}), type(DType::kF32, {})});
  EXPECT_TRUE(contains(error_of(x), "input 0 'x' must have dtype")) << error_of(x);
  auto zd = infer_op("QuantizeLinear",
                     {type(DType::kF32, {2}), type(DType::kF32, {}), type(DType::kF32, {})});
  EXPECT_TRUE(contains(error_of(zd), "input 2 'y_zero_point' must have dtype")) << error_of(zd);
  auto rank = infer_op("QuantizeLinear", {type(DType::kF32, {2, 2}), type(DType::kF32, {2, 2})});
  EXPECT_TRUE(contains(error_of(rank), "must be a scalar or 1-D")) << error_of(rank);
}

// Tensors large enough for the parallel runs (over 65536 elements, runs of one channel's
// elements cut into pieces), per tensor and along axis 1, against the formula evaluated here
// element by element (std::nearbyint rounds ties to even in the default rounding mode); NaN
// quantizes to the zero point, out-of-range values saturate. DequantizeLinear inverts exactly,
// and int32 data far from its zero point does not wrap.
TEST(QuantizeLinear, LargePerTensorAndPerAxisTensors) {
  const ConcreteShape shape = {2, 3, 150, 170};  // 153000 elements; 25500 per channel
  const int64_t n = product(shape), inner = 150 * 170;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 37) % 1001 - 500) * 0.25f;
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[70000] = std::numeric_limits<float>::infinity();
  const std::vector<float> scales = {0.5f, 2.0f, 1.25f};
  const std::vector<uint8_t> zeros = {100, 3, 250};
  for (const bool per_axis : {false, true}) {
    SCOPED_TRACE(per_axis ? "per axis" : "per tensor");
    auto y = per_axis
                 ? run_one("QuantizeLinear", {f32s(shape, x), f32s({3}, scales), u8({3}, zeros)})
                 : run_one("QuantizeLinear", {f32s(shape, x), f32s({}, {0.5f}), u8({}, {100})});
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    const std::vector<uint8_t> got = values_of<uint8_t>(*y);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t c = per_axis ? static_cast<size_t>((i / inner) % 3) : 0;
      const float v = x[i] / scales[c] == x[i] / scales[c] ? x[i] / scales[c] : 0.0f;
      const double q = std::clamp(std::nearbyint(double(v)) + zeros[c], 0.0, 255.0);
      wrong += got[static_cast<size_t>(i)] != static_cast<uint8_t>(q);
    }
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(got[5], per_axis ? zeros[0] : 100);
    EXPECT_EQ(got[70000], 255);
  }
  std::vector<int32_t> big(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) big[i] = i % 2 ? std::numeric_limits<int32_t>::max() : -5;
  auto d = run_one("DequantizeLinear", {i32(shape, big), f32s({}, {1.0f}), i32({}, {-10})});
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  const std::vector<float> back = values_of<float>(*d);
  EXPECT_EQ(back[0], 5.0f);
  EXPECT_EQ(back[1], 2147483648.0f);  // 2^31 - 1 + 10 rounded to f32 (2^31): no int32 wrap
  EXPECT_EQ(back[static_cast<size_t>(n - 1)], 2147483648.0f);
}

TEST(DequantizeLinear, OnnxExamplesAndInt32) {
  // test_dequantizelinear.
  auto y = run_one("DequantizeLinear", {u8({4}, {0, 3, 128, 255}), f32s({}, {2}), u8({}, {128})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kF32);
  EXPECT_EQ(values_of<float>(*y), (std::vector<float>{-256, -250, 0, 254}));
  // test_dequantizelinear_axis: (x - zp) * scale along axis 1.
  Tensor q =
      u8({1, 3, 3, 2}, {3, 89, 34, 200, 74, 59, 5, 24, 24, 87, 32, 13, 245, 99, 4, 142, 121, 102});
  auto a = run_one("DequantizeLinear", {q, f32s({3}, {2, 4, 5}), u8({3}, {84, 24, 196})});
  EXPECT_EQ(values_of<float>(a), (std::vector<float>{-162, 10, -100, 232, -20, -50, -76, 0, 0, 252,
                                                     32, -44, 245, -485, -960, -270, -375, -470}));
  // i8 and i32 (no zero point).
  auto s = run_one("DequantizeLinear", {i8({3}, {-128, 0, 127}), f32s({}, {0.5f}), i8({}, {-1})});
  EXPECT_EQ(values_of<float>(s), (std::vector<float>{-63.5f, 0.5f, 64}));
  auto w = run_one("DequantizeLinear", {i32({2}, {-3, 7}), f32s({}, {0.5f})});
  EXPECT_EQ(values_of<float>(w), (std::vector<float>{-1.5f, 3.5f}));
}

TEST(DequantizeLinear, BadInputs) {
  auto z = infer_op("DequantizeLinear",
                    {type(DType::kU8, {4}), type(DType::kF32, {}), type(DType::kI8, {})});
  EXPECT_TRUE(contains(error_of(z), "input 2 'x_zero_point' must have dtype u8 like input 0 'x'"))
      << error_of(z);
  auto x = infer_op("DequantizeLinear", {type(DType::kF32, {4}), type(DType::kF32, {})});
  EXPECT_TRUE(contains(error_of(x), "input 0 'x' must have dtype")) << error_of(x);
  auto axis = infer_op("DequantizeLinear", {type(DType::kU8, {4, 2}), type(DType::kF32, {2})},
                       attrs({{"axis", int64_t{-3}}}));
  EXPECT_TRUE(contains(error_of(axis), "attribute 'axis'")) << error_of(axis);
  auto shape = infer_op("DequantizeLinear",
                        {type(DType::kU8, {4, 2}), type(DType::kF32, {}), type(DType::kU8, {2})});
  EXPECT_TRUE(contains(error_of(shape), "must have the shape of input 1 'x_scale'"))
      << error_of(shape);
}

TEST(DynamicQuantizeLinear, OnnxExamplesAndZeroRange) {
  struct Case {
    std::vector<float> x;
    std::vector<uint8_t> y;
    float scale;
    uint8_t zero;
  };
  // test_dynamicquantizelinear and _max_adjusted (numpy formulas of the ONNX test).
  const std::vector<Case> cases = {
      {{0, 2, -3, -2.5f, 1.34f, 0.5f}, {153, 255, 0, 26, 221, 179}, 0.019607844f, 153},
      {{-1.0f, -2.1f, -1.3f, -2.5f, -3.34f, -4.0f}, {191, 121, 172, 96, 42, 0}, 0.015686275f, 255},
      // All zeros: ONNX Runtime's scale 1 and zero point 0.
      {{0, 0, 0}, {0, 0, 0}, 1.0f, 0},
  };
  for (const Case& c : cases) {
    auto outs = run_op("DynamicQuantizeLinear",
                       {value(f32s({static_cast<int64_t>(c.x.size())}, c.x))}, {}, 3);
    ASSERT_TRUE(outs.ok()) << outs.status().to_string();
    EXPECT_EQ(values_of<uint8_t>((*outs)[0]), c.y);
    EXPECT_EQ(values_of<float>((*outs)[1]), (std::vector<float>{c.scale}));
    EXPECT_EQ(values_of<uint8_t>((*outs)[2]), (std::vector<uint8_t>{c.zero}));
  }
  auto t = infer_op("DynamicQuantizeLinear", {type(DType::kF32, {sym("N"), 4})}, {}, 3);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(shape_to_string((*t)[0].shape), "[N,4]");
  EXPECT_TRUE((*t)[1].shape.empty());
  auto bad = infer_op("DynamicQuantizeLinear", {type(DType::kF64, {2})}, {}, 3);
  EXPECT_TRUE(contains(error_of(bad), "input 0 'x' must have dtype f32")) << error_of(bad);
}

std::vector<In> qlinear_inputs(std::vector<Tensor> ts) {
  std::vector<In> ins;
  for (Tensor& t : ts) ins.push_back(value(std::move(t)));
  return ins;
}

TEST(QLinearConv, OnnxExample) {
  // test_qlinearconv: a 1x1 kernel of w = 0 with w_zero_point 255.
  Tensor x = u8({1, 1, 7, 7},
                {255, 174, 162, 25,  203, 168, 58,  15,  59,  237, 95,  129, 0,  64,  56, 242, 153,
                 221, 168, 12,  166, 232, 178, 186, 195, 237, 162, 237, 188, 39, 124, 77, 80,  102,
                 43,  127, 230, 21,  83,  41,  40,  134, 255, 154, 92,  141, 42, 148, 247});
  auto y = run_op("QLinearConv",
                  qlinear_inputs({x, f32s({}, {0.00369204697f}), u8({}, {132}),
                                  u8({1, 1, 1, 1}, {0}), f32s({1}, {0.00172794575f}),
                                  u8({1}, {255}), f32s({}, {0.00162681262f}), u8({}, {123})}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<uint8_t>((*y)[0]),
            (std::vector<uint8_t>{0,   81,  93,  230, 52,  87,  197, 240, 196, 18,  160, 126, 255,
                                  191, 199, 13,  102, 34,  87,  243, 89,  23,  77,  69,  60,  18,
                                  93,  18,  67,  216, 131, 178, 175, 153, 212, 128, 25,  234, 172,
                                  214, 215, 121, 0,   101, 163, 114, 213, 107, 8}));
}

TEST(QLinearConv, PerChannelGroupsPadsStridesBias) {
  // numpy by hand: x - (-3) padded by 1, strides 2, group 2, w - w_zero_point per output channel,
  // + B, times (0.05 * w_scale / 0.9) in f32, np.rint, + 7, clipped to i8.
  Tensor x =
      i8({1, 4, 5, 5},
         {113, 32,  47, 101, 20,  70,   85,  -71,  -114, -52, -56, 95,  105, -127, -1,   82,   -95,
          76,  -98, -9, 81,  -51, -41,  -57, 56,   -63,  125, -15, -6,  1,   21,   13,   2,    126,
          78,  74,  51, 31,  -41, 125,  -9,  -73,  88,   -87, 91,  28,  -99, -117, -15,  -119, -92,
          3,   120, -9, 78,  106, 82,   33,  -16,  3,    -60, -1,  -31, -65, 126,  -125, -104, -79,
          120, 49,  97, -77, 56,  -34,  -3,  -128, 30,   84,  41,  -89, 8,   -60,  119,  97,   -81,
          2,   112, 88, 53,  35,  -118, 61,  -7,   -105, -66, 10,  58,  1,   28,   95});
  Tensor w = i8({4, 2, 3, 3},
                {47,  -36,  36,   25,  -101, -113, 41,   -29, 25,  -46, -71,  -90, -31,  80,  -26,
                 -31, 19,   122,  -28, 23,   -16,  26,   -14, 35,  12,  45,   116, -90,  15,  -16,
                 -37, -67,  -115, -25, 83,   -104, -25,  119, 115, -73, -127, 43,  -125, -52, -1,
                 95,  -105, 41,   8,   -95,  88,   88,   -5,  113, 27,  103,  117, 17,   -57, -91,
                 16,  -79,  64,   109, -66,  13,   -116, -82, -32, 98,  120,  36});
  auto y =
      run_op("QLinearConv",
             qlinear_inputs({x, f32s({}, {0.05f}), i8({}, {-3}), w,
                             f32s({4}, {0.01f, 0.02f, 0.003f, 0.04f}), i8({4}, {0, 1, -2, 5}),
                             f32s({}, {0.9f}), i8({}, {7}), i32({4}, {100, -2000, 0, 37})}),
             attrs({{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"group", int64_t{2}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{1, 4, 3, 3}));
  EXPECT_EQ(
      values_of<int8_t>((*y)[0]),
      (std::vector<int8_t>{-5, 6, 4, -2, -3, 4, 8, 5, -6, 7,  -27, 7, -3, 5,   -7,  17,  33, 24,
                           9,  3, 9, 15, 6,  3, 3, 9, 6,  29, -18, 0, 31, -18, -43, -31, 7,  -17}));
}

TEST(QLinearConv, SymbolicShapeAndBadInputs) {
  auto ok = infer_op(
      "QLinearConv",
      {type(DType::kU8, {sym("N"), 3, sym("H"), 8}), type(DType::kF32, {}), type(DType::kU8, {}),
       type(DType::kI8, {6, 3, 3, 3}), type(DType::kF32, {6}), type(DType::kI8, {6}),
       type(DType::kF32, {}), type(DType::kI8, {}), type(DType::kI32, {6})},
      attrs({{"pads", Ints{1, 1, 1, 1}}}));
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)[0].dtype, DType::kI8);
  EXPECT_EQ(shape_to_string((*ok)[0].shape), "[N,6,H,8]");
  auto base = [](int which, ValueType replacement) {
    std::vector<std::optional<ValueType>> t = {
        type(DType::kU8, {1, 3, 5, 5}), type(DType::kF32, {}),  type(DType::kU8, {}),
        type(DType::kI8, {6, 3, 3, 3}), type(DType::kF32, {6}), type(DType::kI8, {6}),
        type(DType::kF32, {}),          type(DType::kU8, {})};
    t[static_cast<size_t>(which)] = std::move(replacement);
    return error_of(infer_op("QLinearConv", t));
  };
  EXPECT_TRUE(contains(base(4, type(DType::kF32, {5})), "input 4 'w_scale' dim 0"))
      << base(4, type(DType::kF32, {5}));
  EXPECT_TRUE(
      contains(base(5, type(DType::kU8, {6})), "input 5 'w_zero_point' must have dtype i8"));
  EXPECT_TRUE(contains(base(1, type(DType::kF32, {3})), "input 1 'x_scale' must be a scalar"));
  EXPECT_TRUE(contains(base(2, type(DType::kU8, {3})), "input 2 'x_zero_point' must be a scalar"));
  EXPECT_TRUE(contains(base(7, type(DType::kI32, {})), "input 7 'y_zero_point' must have dtype"));
  EXPECT_TRUE(contains(base(6, type(DType::kF64, {})), "input 6 'y_scale' must have dtype f32"));
  EXPECT_TRUE(contains(base(3, type(DType::kI8, {6, 2, 3, 3})), "input 3 'w' dim 1"))
      << base(3, type(DType::kI8, {6, 2, 3, 3}));
  auto missing = infer_op("QLinearConv", {type(DType::kU8, {1, 3, 5, 5}), type(DType::kF32, {})});
  EXPECT_FALSE(missing.ok());
}

TEST(QLinearMatMul, OnnxExampleTiesAndPerColumn) {
  // test_qlinearmatmul_2D.
  Tensor a = u8({2, 4}, {208, 236, 0, 238, 3, 214, 255, 29});
  Tensor b = u8({4, 3}, {152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247});
  auto y = run_op("QLinearMatMul",
                  qlinear_inputs({a, f32s({1}, {0.0066f}), u8({1}, {113}), b, f32s({1}, {0.00705f}),
                                  u8({1}, {114}), f32s({1}, {0.0107f}), u8({1}, {118})}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<uint8_t>((*y)[0]), (std::vector<uint8_t>{168, 115, 255, 1, 66, 151}));
  // Ties: sums [1, 3, 5, 7] * 0.5 = [0.5, 1.5, 2.5, 3.5] -> np.rint [0, 2, 2, 4], then + 1 (the
  // zero point is added after rounding).
  auto t = run_op("QLinearMatMul", qlinear_inputs({u8({1, 1}, {1}), f32s({}, {0.5f}), u8({}, {0}),
                                                   u8({1, 4}, {1, 3, 5, 7}), f32s({}, {1}),
                                                   u8({}, {0}), f32s({}, {1}), u8({}, {1})}));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(values_of<uint8_t>((*t)[0]), (std::vector<uint8_t>{1, 3, 3, 5}));
  // Per-column b scale and zero point, i8 output saturating: columns scale [1, 100]:
  // a = [2, -1] (zp 0), b columns [1, 3] - 0 and [4, 5] - 1 -> sums [-1, 2] -> [-1, 127].
  auto c = run_op("QLinearMatMul", qlinear_inputs({i8({1, 2}, {2, -1}), f32s({}, {1}), i8({}, {0}),
                                                   i8({2, 2}, {1, 4, 3, 5}), f32s({2}, {1, 100}),
                                                   i8({2}, {0, 1}), f32s({}, {1}), i8({}, {0})}));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(values_of<int8_t>((*c)[0]), (std::vector<int8_t>{-1, 127}));
}

TEST(QLinearMatMul, SymbolicShapeAndBadInputs) {
  auto ok = infer_op("QLinearMatMul",
                     {type(DType::kU8, {sym("B"), sym("S"), 8}), type(DType::kF32, {}),
                      type(DType::kU8, {}), type(DType::kI8, {8, 5}), type(DType::kF32, {5}),
                      type(DType::kI8, {5}), type(DType::kF32, {}), type(DType::kU8, {})});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(shape_to_string((*ok)[0].shape), "[B,S,5]");
  auto cols = infer_op("QLinearMatMul",
                       {type(DType::kU8, {2, 8}), type(DType::kF32, {}), type(DType::kU8, {}),
                        type(DType::kI8, {8, 5}), type(DType::kF32, {4}), type(DType::kI8, {}),
                        type(DType::kF32, {}), type(DType::kU8, {})});
  EXPECT_TRUE(contains(error_of(cols), "input 4 'b_scale' dim 0 (one per column of b)"))
      << error_of(cols);
  auto k = infer_op("QLinearMatMul",
                    {type(DType::kU8, {2, 7}), type(DType::kF32, {}), type(DType::kU8, {}),
                     type(DType::kI8, {8, 5}), type(DType::kF32, {}), type(DType::kI8, {}),
                     type(DType::kF32, {}), type(DType::kU8, {})});
  EXPECT_TRUE(contains(error_of(k), "input 3 'b'")) << error_of(k);
  auto zd = infer_op("QLinearMatMul",
                     {type(DType::kU8, {2, 8}), type(DType::kF32, {}), type(DType::kI8, {}),
                      type(DType::kI8, {8, 5}), type(DType::kF32, {}), type(DType::kI8, {}),
                      type(DType::kF32, {}), type(DType::kU8, {})});
  EXPECT_TRUE(contains(error_of(zd), "input 2 'a_zero_point' must have dtype u8 like input 0 'a'"))
      << error_of(zd);
}

}  // namespace
}  // namespace kiln::kernels
