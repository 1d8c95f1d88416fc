// Signal kernels (signal.cc, fft.h): the FFT against the defining sum, DFT and STFT against
// numpy.fft, MelWeightMatrix against the ONNX reference implementation's formula (run in numpy;
// its ONNX backend test case is all zeros and ones), symbolic shapes and the bad inputs each
// shape rule rejects.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>

#include "kiln/kernels/fft.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/kernel.h"
#include "tests/support/expect.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT
using Complex = std::complex<double>;

// out[k] = sum_j x[j] exp(-+2 pi i j k / n), summed directly in long double.
std::vector<Complex> direct_dft(const std::vector<Complex>& x, bool inverse) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<Complex> out(x.size());
  const long double sign = inverse ? 1 : -1;
  for (int64_t k = 0; k < n; ++k) {
    long double re = 0, im = 0;
    for (int64_t j = 0; j < n; ++j) {
      const long double angle =
          sign * 2 * 3.141592653589793238462643383279502884L * ((j * k) % n) / n;
      re += x[j].real() * std::cos(angle) - x[j].imag() * std::sin(angle);
      im += x[j].real() * std::sin(angle) + x[j].imag() * std::cos(angle);
    }
    out[k] = Complex(static_cast<double>(re), static_cast<double>(im));
  }
  return out;
}

TEST(FftPlan, MatchesTheDefiningSumForMixedRadixAndBluesteinLengths) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  // Powers of two, small mixed radices, primes below and above kMaxDirectRadix (37, 97, 101 run
  // Bluestein), and a composite with a large prime factor (2 * 53).
  for (int64_t n : {1,  2,  3,  4,  5,  6,   7,   8,   9,   12,  15,  16, 30,
                    31, 37, 60, 64, 97, 100, 101, 106, 128, 360, 400, 512}) {
    std::vector<Complex> x(static_cast<size_t>(n));
    for (Complex& c : x) c = Complex(u(rng), u(rng));
    FftPlan plan(n);
    for (bool inverse : {false, true}) {
      std::vector<Complex> got(x.size());
      plan.run(x.data(), got.data(), inverse);
      const std::vector<Complex> want = direct_dft(x, inverse);
      double worst = 0;
      for (int64_t k = 0; k < n; ++k) worst = std::max(worst, std::abs(got[k] - want[k]));
      EXPECT_LT(worst, 1e-12 * static_cast<double>(n)) << "n = " << n << " inverse " << inverse;
    }
  }
}

// ---- DFT ----

TEST(Dft, RealComplexOnesidedPaddedAndTruncatedMatchNumpy) {
  // np.fft.fft([1, 2, 3, 4, 5]) on [batch 1, 5, 1], axis 1.
  auto y = run_op("DFT", {value(f32({1, 5, 1}, {1, 2, 3, 4, 5}))});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {1, 5, 2},
               {15.0, 0.0, -2.5, 3.4409548011779334, -2.5, 0.8122992405822659, -2.5,
                -0.8122992405822659, -2.5, -3.4409548011779334});
  // np.fft.ifft([1+2j, -1+0.5j, 3-1j, 0.25], n=6): complex input, inverse, zero-padded, in f64.
  y = run_op("DFT",
             {value(f64({1, 4, 2}, {1, 2, -1, 0.5, 3, -1, 0.25, 0})), constant(i64({}, {6}))},
             attrs({{"inverse", int64_t{1}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {1, 6, 2},
               {0.5416666666666666, 0.25, -0.13616454968463004, 0.7470084679281462,
                -0.174839684279443, -0.20235026918962573, 0.7916666666666666, 0.0833333333333333,
                0.25817301761277633, 0.9523502691896257, -0.28050211698203653, 0.16965819873852042},
               1e-12, 1e-12);
  // np.fft.rfft([1, -2, 3, 0.5, 2, -1]): onesided keeps 6 / 2 + 1 bins.
  y = run_op("DFT", {value(f32({1, 6, 1}, {1, -2, 3, 0.5, 2, -1}))},
             attrs({{"onesided", int64_t{1}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {1, 4, 2}, {3.5, 0.0, -3.5, 0.0, 0.5, 1.7320508075688772, 8.5, 0.0});
  // np.fft.fft([1, 2, 3, 4, 5], n=3): dft_length truncates.
  y = run_op("DFT", {value(f32({1, 5, 1}, {1, 2, 3, 4, 5})), constant(i32({}, {3}))});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {1, 3, 2}, {6.0, 0.0, -1.5, 0.8660254037844386, -1.5, -0.8660254037844386});
}

TEST(Dft, AxisSelectsTheTransformedDim) {
  // np.fft.fft([[1, 2, 3], [4, -5, 6]], axis=1) as [1, 2, 3, 1] with axis 2, and axis -2.
  const std::vector<double> want = {6.0, 0.0, -1.5, 0.8660254037844386, -1.5, -0.8660254037844386,
                                    5.0, 0.0, 3.5,  9.526279441628825,  3.5,  -9.526279441628825};
  for (int64_t axis : {int64_t{2}, int64_t{-2}}) {
    auto y =
        run_op("DFT", {value(f32({1, 2, 3, 1}, {1, 2, 3, 4, -5, 6}))}, attrs({{"axis", axis}}));
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    expect_close((*y)[0], {1, 2, 3, 2}, want);
  }
  // NaN reaches every bin of its line and no other line.
  auto y = run_op("DFT", {value(f32({1, 2, 3, 1}, {1, NAN, 3, 4, -5, 6}))},
                  attrs({{"axis", int64_t{2}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const std::vector<double> v = values_of((*y)[0]);
  for (size_t i = 0; i < 6; ++i) EXPECT_TRUE(std::isnan(v[i])) << i;
  for (size_t i = 6; i < 12; ++i) EXPECT_NEAR(v[i], want[i], 1e-5) << i;
}

TEST(Dft, SymbolicShapes) {
  const DimExpr n = sym("N"), l = sym("L");
  auto out = infer_op("DFT", {type(DType::kF32, {n, l, 1})}, attrs({{"onesided", int64_t{1}}}));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].shape, (Shape{n, l.floor_div(2) + DimExpr(1), DimExpr(2)}));
  // dft_length from a shape computation.
  const std::vector<DimExpr> length = {l * DimExpr(2)};
  out = infer_op("DFT", {type(DType::kF16, {n, l, 4, 2}), type(DType::kI64, {})},
                 attrs({{"axis", int64_t{1}}}), 1, {}, {nullptr, &length});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].shape, (Shape{n, l * DimExpr(2), DimExpr(4), DimExpr(2)}));
  EXPECT_EQ((*out)[0].dtype, DType::kF16);
}

TEST(Dft, RejectsBadInputs) {
  auto error = [](std::vector<std::optional<ValueType>> types, const Attributes& a,
                  std::vector<const Tensor*> constants = {}) {
    auto r = infer_op("DFT", types, a, 1, std::move(constants));
    return r.ok() ? std::string() : r.status().to_string();
  };
  EXPECT_TRUE(contains(error({type(DType::kF32, {1, 4, 3})}, {}),
                       "input 0 'input' last dim must be 1 (real) or 2 (complex), got 3"));
  EXPECT_TRUE(contains(error({type(DType::kF32, {1, 4, 1})}, attrs({{"axis", int64_t{-1}}})),
                       "attribute 'axis' = -1 must be in [-3, -2] or [0, 1]"));
  EXPECT_TRUE(contains(error({type(DType::kF32, {1, 4, 1})}, attrs({{"axis", int64_t{2}}})),
                       "attribute 'axis' = 2"));
  EXPECT_TRUE(contains(error({type(DType::kF32, {1, 4, 1})}, attrs({{"inverse", int64_t{2}}})),
                       "attribute 'inverse' must be 0 or 1, got 2"));
  EXPECT_TRUE(contains(error({type(DType::kI32, {1, 4, 1})}, {}), "input 0 'input' must have"));
  EXPECT_TRUE(contains(error({type(DType::kF32, {1, 0, 1})}, {}), "must not be empty"));
  EXPECT_TRUE(contains(error({type(DType::kF32, {4})}, {}), "rank"));
  const Tensor zero = i64({}, {0});
  EXPECT_TRUE(
      contains(error({type(DType::kF32, {1, 4, 1}), type(DType::kI64, {})}, {}, {nullptr, &zero}),
               "input 1 'dft_length' = 0 must be positive"));
  auto unknown = infer_op("DFT", {type(DType::kF32, {1, 4, 1}), type(DType::kI64, {})});
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(unknown.status().to_string(), "input 1 'dft_length' must be known"));
  EXPECT_TRUE(contains(error({type(DType::kF32, {1, 4, 1})}, attrs({{"norm", int64_t{1}}})),
                       "attribute 'norm'"));
  // A transform too long to plan is refused before anything is allocated.
  auto huge =
      run_op("DFT", {value(f32({1, 4, 1}, {1, 2, 3, 4})), constant(i64({}, {int64_t{1} << 40}))});
  EXPECT_EQ(huge.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(error_of(huge), "above kiln's limit")) << error_of(huge);
  EXPECT_EQ(find_op_def("DFT")->compile_time_inputs, 1u << 1);
}

TEST(Dft, CostCountsOneTransformPerLine) {
  // 8 lines of 16000 points: 8 * 16000 * ceil(log2(16001)) * 4 = 7168000 (n log n butterflies
  // of 4 real multiply-adds); STFT: 2 * 9 frames of 16 points (9 onesided bins) = 18 * 16 * 5 * 4.
  const ConcreteShape x = {8, 16000, 1}, y = {8, 16000, 2};
  const ConcreteShape* in[] = {&x};
  const ConcreteShape* out[] = {&y};
  EXPECT_DOUBLE_EQ(multiply_adds("DFT", {}, in, out), 7168000.0);
  const ConcreteShape frames = {2, 9, 9, 2};
  const ConcreteShape* stft_out[] = {&frames};
  EXPECT_DOUBLE_EQ(multiply_adds("STFT", {}, {}, stft_out), 18.0 * 16 * 5 * 4);
}

// ---- STFT ----

TEST(Stft, WindowedRealFramesMatchNumpy) {
  // frames sig[2f : 2f + 4] * w, np.fft.rfft each.
  auto y = run_op("STFT", {value(f32({1, 8, 1}, {0.5, 1, -1, 2, 3, -0.5, 1.5, 0})),
                           constant(i64({}, {2})), value(f32({4}, {0, 0.5, 1, 0.5}))});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {1, 3, 3, 2},
               {0.5, 0.0, 1.0, 0.5, -2.5, 0.0, 3.75, 0.0, -3.0, -1.25, 2.25, 0.0, 1.25, 0.0, -1.5,
                0.25, 1.75, 0.0});
  // Complex signal, frame_length 3 without a window, all bins: np.fft.fft(sc[f : f + 3]).
  y = run_op("STFT",
             {value(f64({1, 5, 2}, {1, 1, 2, -1, 0, 0.5, -1, 0, 3, 2})), constant(i32({}, {1})),
              absent(), constant(i32({}, {3}))},
             attrs({{"onesided", int64_t{0}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close(
      (*y)[0], {1, 3, 3, 2},
      {3.0, 0.5, -1.299038105676658, -0.4820508075688772, 1.299038105676658, 2.982050807568877, 1.0,
       -0.5, 2.933012701892219, -2.1160254037844384, 2.066987298107781, -0.3839745962155614, 2.0,
       2.5, -2.732050807568877, 2.9641016151377544, 0.7320508075688772, -3.9641016151377544},
      1e-12, 1e-12);
}

TEST(Stft, SymbolicShapes) {
  const DimExpr n = sym("N"), l = sym("L");
  const Tensor step = i64({}, {160});
  auto out = infer_op(
      "STFT", {type(DType::kF32, {n, l, 1}), type(DType::kI64, {}), type(DType::kF32, {400})}, {},
      1, {nullptr, &step, nullptr});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].shape,
            (Shape{n, (l - DimExpr(400)).floor_div(160) + DimExpr(1), DimExpr(201), DimExpr(2)}));
}

TEST(Stft, RejectsBadInputs) {
  const Tensor step = i64({}, {2}), zero = i64({}, {0}), length = i64({}, {5});
  auto error = [](std::vector<std::optional<ValueType>> types, std::vector<const Tensor*> c,
                  const Attributes& a = {}) {
    auto r = infer_op("STFT", types, a, 1, std::move(c));
    return r.ok() ? std::string() : r.status().to_string();
  };
  const ValueType signal = type(DType::kF32, {1, 8, 1});
  const ValueType scalar = type(DType::kI64, {});
  EXPECT_TRUE(contains(
      error({signal, scalar, type(DType::kF32, {4}), scalar}, {nullptr, &step, nullptr, &length}),
      "input 2 'window' length (input 3 'frame_length')"));
  EXPECT_TRUE(contains(error({signal, scalar, type(DType::kF32, {9})}, {nullptr, &step}),
                       "the frame length 9 is longer than input 0 'signal' (8 samples)"));
  EXPECT_TRUE(contains(error({signal, scalar}, {nullptr, &zero}),
                       "input 1 'frame_step' = 0 must be positive"));
  EXPECT_TRUE(contains(error({signal, scalar}, {nullptr, nullptr}),
                       "input 1 'frame_step' must be known at compile time"));
  EXPECT_TRUE(contains(error({signal, scalar, type(DType::kF64, {4})}, {nullptr, &step}),
                       "input 2 'window' must have dtype f32 like input 0 'signal'"));
  EXPECT_TRUE(contains(error({type(DType::kF32, {8, 1}), scalar}, {nullptr, &step}),
                       "input 0 'signal' must have rank 3"));
  EXPECT_TRUE(contains(error({signal, scalar}, {nullptr, &step}, attrs({{"onesided", int64_t{3}}})),
                       "attribute 'onesided' must be 0 or 1, got 3"));
  EXPECT_EQ(find_op_def("STFT")->compile_time_inputs, (1u << 1) | (1u << 3));
}

// ---- MelWeightMatrix ----

std::vector<In> mel_inputs(int32_t mel_bins, int32_t dft_length, int32_t rate, float lower,
                           float upper) {
  return {constant(i32({}, {mel_bins})), constant(i32({}, {dft_length})), value(i32({}, {rate})),
          value(f32({}, {lower})), value(f32({}, {upper}))};
}

TEST(MelWeightMatrix, TrianglesMatchTheOnnxReference) {
  // The ONNX reference's formula in numpy for (4, 32, 16000, 100, 7000): points [0 0 2 3 6 9].
  auto y = run_op("MelWeightMatrix", mel_inputs(4, 32, 16000, 100, 7000));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  std::vector<double> want(17 * 4, 0.0);
  const std::vector<double> head = {
      1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0,     0.0,     0.0, 1.0, 0.0,     0.0,
      0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0 / 3, 1.0 / 3, 0.0, 0.0, 1.0 / 3, 2.0 / 3,
      0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0,     2.0 / 3, 0.0, 0.0, 0.0,     1.0 / 3};
  std::copy(head.begin(), head.end(), want.begin());
  expect_close((*y)[0], {17, 4}, want);
  EXPECT_EQ((*y)[0].dtype(), DType::kF32);
  // The ONNX backend case (8, 16, 8192, 0, 4096): points [0 0 0 1 1 2 3 4 5 6], in f64.
  y = run_op("MelWeightMatrix", mel_inputs(8, 16, 8192, 0, 4096),
             attrs({{"output_datatype", int64_t{11}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  std::vector<double> onnx_case(9 * 8, 0.0);
  const int ones[][2] = {{0, 0}, {0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 5}, {4, 6}, {5, 7}};
  for (const auto& one : ones) onnx_case[one[0] * 8 + one[1]] = 1;
  expect_close((*y)[0], {9, 8}, onnx_case);
  EXPECT_EQ((*y)[0].dtype(), DType::kF64);
}

TEST(MelWeightMatrix, SymbolicShapeAndBadInputs) {
  const DimExpr l = sym("L");
  const std::vector<DimExpr> mel = {DimExpr(40)}, dft = {l};
  const ValueType i = type(DType::kI64, {}), f = type(DType::kF32, {});
  auto out = infer_op("MelWeightMatrix", {i, i, i, f, f}, {}, 1, {}, {&mel, &dft});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].shape, (Shape{l.floor_div(2) + DimExpr(1), DimExpr(40)}));
  auto bad =
      infer_op("MelWeightMatrix", {i, i, i, f, type(DType::kF64, {})}, {}, 1, {}, {&mel, &dft});
  EXPECT_TRUE(contains(bad.status().to_string(),
                       "input 4 'upper_edge_hertz' must have dtype f32 like input 3"));
  bad = infer_op("MelWeightMatrix", {i, i, i, f, f}, attrs({{"output_datatype", int64_t{9}}}), 1,
                 {}, {&mel, &dft});
  EXPECT_TRUE(contains(bad.status().to_string(), "(bool) is not a numeric type"));
  bad = infer_op("MelWeightMatrix", {i, i, i, f, f});
  EXPECT_TRUE(contains(bad.status().to_string(), "input 0 'num_mel_bins' must be known"));
  // Data the kernel refuses: an upper edge past the Nyquist bins, edges out of order, NaN.
  auto y = run_op("MelWeightMatrix", mel_inputs(4, 32, 16000, 100, 20000));
  EXPECT_TRUE(contains(error_of(y), "input 4 'upper_edge_hertz' = 20000 reaches past the 17 bins"));
  y = run_op("MelWeightMatrix", mel_inputs(4, 32, 16000, 500, 100));
  EXPECT_TRUE(contains(error_of(y), "must be finite with 0 <= lower <= upper"));
  y = run_op("MelWeightMatrix", mel_inputs(4, 32, 16000, NAN, 100));
  EXPECT_TRUE(contains(error_of(y), "must be finite with 0 <= lower <= upper"));
  y = run_op("MelWeightMatrix", mel_inputs(4, 32, 0, 0, 100));
  EXPECT_TRUE(contains(error_of(y), "input 2 'sample_rate' = 0 must be positive"));
  EXPECT_EQ(find_op_def("MelWeightMatrix")->compile_time_inputs, 0b11u);
}

}  // namespace
}  // namespace kiln::kernels
