// LSTM, GRU and RNN: shape rules (symbolic dims, every input checked) and kernels. The
// bidirectional runs with biases, initial states and per-entry sequence lengths are checked
// against PyTorch (testdata/recurrent_cases.py, same pattern() inputs); the one-unit cases
// (peepholes, clip, input_forget, linear_before_reset = 0, every activation function) are worked
// out by hand from the ONNX equations.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/support/expect.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

constexpr int64_t kSeq = 3, kBatch = 3, kInput = 2, kHidden = 3;

// From testdata/recurrent_cases.py (PyTorch).
const std::vector<double> kLstmY = {-0.0395473317,
                                    0.234392308,
                                    0.249911355,
                                    -0.16686142,
                                    0.264966637,
                                    -0.0580404097,
                                    0.0404684257,
                                    -0.174036835,
                                    0.014774359,
                                    -0.159807452,
                                    -0.174120085,
                                    0.0113415356,
                                    -0.0981115724,
                                    -0.0197212758,
                                    -0.0988254585,
                                    -0.0341560417,
                                    -0.0658894617,
                                    0.0493186027,
                                    0.111921513,
                                    0.275185452,
                                    0.269393945,
                                    0,
                                    0,
                                    0,
                                    -0.0152035543,
                                    -0.0328177687,
                                    0.00370229401,
                                    -0.0833009035,
                                    -0.118976827,
                                    0.124676158,
                                    0,
                                    0,
                                    0,
                                    0.0569626948,
                                    0.0430655766,
                                    -0.0301897445,
                                    0.0396822196,
                                    0.267205267,
                                    0.183864795,
                                    0,
                                    0,
                                    0,
                                    0,
                                    0,
                                    0,
                                    0.0307696762,
                                    -0.157619618,
                                    0.131249587,
                                    0,
                                    0,
                                    0,
                                    0,
                                    0,
                                    0};
const std::vector<double> kLstmYh = {
    0.0396822196,  0.267205267,   0.183864795,   -0.16686142,   0.264966637,   -0.0580404097,
    -0.0152035543, -0.0328177687, 0.00370229401, -0.159807452,  -0.174120085,  0.0113415356,
    -0.0981115724, -0.0197212758, -0.0988254585, -0.0341560417, -0.0658894617, 0.0493186027};
const std::vector<double> kLstmYc = {
    0.0925610198,  0.434685237,   0.305331141,   -0.278245666,  0.376246574,  -0.0995245274,
    -0.0282957738, -0.0494360715, 0.00582673895, -0.518685935,  -0.671057033, 0.0197213624,
    -0.227957517,  -0.0543867532, -0.242856162,  -0.0687299016, -0.140849298, 0.136504031};
const std::vector<double> kGruY = {-0.336068357,
                                   0.0729871185,
                                   -0.222385339,
                                   -0.0922223669,
                                   0.345033318,
                                   -0.412114562,
                                   0.13953825,
                                   -0.057239389,
                                   -0.291457643,
                                   -0.013043797,
                                   -0.212992065,
                                   0.165927527,
                                   -0.0755155181,
                                   -0.109635443,
                                   0.115455976,
                                   0.276766995,
                                   0.189658612,
                                   -0.288374322,
                                   -0.413301997,
                                   -0.135071455,
                                   0.0352518493,
                                   0,
                                   0,
                                   0,
                                   -0.0124354601,
                                   0.123945469,
                                   -0.404481912,
                                   0.151435308,
                                   -0.0938411004,
                                   0.0632026045,
                                   0,
                                   0,
                                   0,
                                   0.069197905,
                                   0.0273960452,
                                   -0.248843088,
                                   -0.055888824,
                                   0.239308441,
                                   -0.389547308,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0.499051718,
                                   0.313715985,
                                   -0.166732979,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0};
const std::vector<double> kGruYh = {
    -0.055888824,  0.239308441,  -0.389547308, -0.0922223669, 0.345033318,  -0.412114562,
    -0.0124354601, 0.123945469,  -0.404481912, -0.013043797,  -0.212992065, 0.165927527,
    -0.0755155181, -0.109635443, 0.115455976,  0.276766995,   0.189658612,  -0.288374322};
const std::vector<double> kRnnY = {0.719327501,
                                   0.385283966,
                                   0.124353002,
                                   0.093476304,
                                   -0.532587286,
                                   -0.687790205,
                                   -0.330821117,
                                   -0.093476304,
                                   -0.274061589,
                                   -0.116863942,
                                   -0.490274923,
                                   -0.564620329,
                                   0.554599722,
                                   0.302709729,
                                   0,
                                   0.237226744,
                                   0.351356025,
                                   0.10916941,
                                   0.620191855,
                                   0.392019864,
                                   0.413789959,
                                   0,
                                   0,
                                   0,
                                   -0.0384820266,
                                   -0.363835066,
                                   -0.667316061,
                                   -0.148560777,
                                   -0.360976018,
                                   -0.54155054,
                                   0,
                                   0,
                                   0,
                                   0.687790205,
                                   0.437188785,
                                   -0.124353002,
                                   -0.292882664,
                                   -0.33702586,
                                   -0.0566722581,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   -0.0624187467,
                                   0,
                                   0.274061589,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0};
const std::vector<double> kRnnYh = {
    -0.292882664, -0.33702586,   -0.0566722581, 0.093476304,  -0.532587286,
    -0.687790205, -0.0384820266, -0.363835066,  -0.667316061, -0.116863942,
    -0.490274923, -0.564620329,  0.554599722,   0.302709729,  0,
    0.237226744,  0.351356025,   0.10916941};
const std::vector<double> kLstmBatchMajorY = {
    -0.0395473317, 0.234392308,   0.249911355,   -0.159807452,  -0.174120085,  0.0113415356,
    0.111921513,   0.275185452,   0.269393945,   -0.0833009035, -0.118976827,  0.124676158,
    0.0396822196,  0.267205267,   0.183864795,   0.0307696762,  -0.157619618,  0.131249587,
    -0.16686142,   0.264966637,   -0.0580404097, 0.0246761011,  -0.0629416451, 0.0406549455,
    -0.168077395,  0.181653686,   -0.034163358,  -0.029121346,  -0.0397727281, -0.0737056306,
    0.0670980322,  0.258817095,   0.139995214,   -0.175247993,  -0.0564549841, -0.353314941,
    0.0404684257,  -0.174036835,  0.014774359,   -0.0394616412, -0.105344128,  0.0871986106,
    -0.0152035543, -0.0328177687, 0.00370229401, 0.0759360293,  -0.0254269891, 0.0618458411,
    -0.0548158454, 0.0400781467,  -0.0196313061, 0.115264025,   0.0495062468,  -0.0274138657};
const std::vector<double> kLstmBatchMajorYh = {
    0.0396822196,  0.267205267,  0.183864795,   -0.159807452,  -0.174120085,  0.0113415356,
    0.0670980322,  0.258817095,  0.139995214,   0.0246761011,  -0.0629416451, 0.0406549455,
    -0.0548158454, 0.0400781467, -0.0196313061, -0.0394616412, -0.105344128,  0.0871986106};
const std::vector<double> kLstmBatchMajorYc = {
    0.0925610198,  0.434685237, 0.305331141,   -0.518685935,  -0.671057033, 0.0197213624,
    0.177927043,   0.538898165, 0.337316438,   0.054160351,   -0.170920656, 0.093193786,
    -0.0905138455, 0.057061763, -0.0314908979, -0.0783394044, -0.222837486, 0.25257507};
const std::vector<double> kRnnFullYh = {
    -0.292882664, -0.33702586,  -0.0566722581, 0.688031681,  0.53270355,   0.122661019,
    0.0181784993, -0.296677153, -0.739003558,  -0.116863942, -0.490274923, -0.564620329,
    0.475176776,  0.474891875,  0.173855908,   0.216364204,  0.340595081,  0.0663832314};
const std::vector<double> kRnnReluY = {
    0.90625,     0.40625,    0.125,      0.09375,   0,         0,         0,         0,
    0,           0,          0,          0,         0.4921875, 0.5546875, 0.1796875, 0.218261719,
    0.364746094, 0.04296875, 0.70703125, 0.4296875, 0.5078125, 0,         0,         0,
    0,           0,          0,          0,         0,         0,         0.9375,    0.5,
    0.0625,      0.36328125, 0.53515625, 0.1875,    0,         0,         0,         0.71875,
    0.5,         0.28125,    0,          0,         0,         0,         0,         0.28125,
    0,           0,          0,          1.09375,   0.59375,   0};

// The inputs recurrent_cases.py builds, bidirectional, in `dtype`.
struct Inputs {
  Tensor x, w, r, b, h0, c0;
};
Inputs make_inputs(DType dtype, int64_t gates) {
  auto t = [&](ConcreteShape shape, std::vector<double> v) { return make_tensor(dtype, shape, v); };
  const int64_t gh = gates * kHidden;
  return {t({kSeq, kBatch, kInput}, pattern(kSeq * kBatch * kInput, 7, 3, 11, 4)),
          t({2, gh, kInput}, pattern(2 * gh * kInput, 5, 1, 9, 8)),
          t({2, gh, kHidden}, pattern(2 * gh * kHidden, 3, 2, 7, 8)),
          t({2, 2 * gh}, pattern(4 * gh, 11, 4, 13, 16)),
          t({2, kBatch, kHidden}, pattern(2 * kBatch * kHidden, 2, 1, 5, 4)),
          t({2, kBatch, kHidden}, pattern(2 * kBatch * kHidden, 3, 0, 7, 4))};
}

const Attributes kBidirectional = attrs({{"direction", std::string("bidirectional")}});

TEST(RecurrentKernels, BidirectionalLstmWithLengthsMatchesTorch) {
  for (DType dtype : {DType::kF32, DType::kF64}) {
    const Inputs in = make_inputs(dtype, 4);
    auto y = run_op("LSTM",
                    {value(in.x), value(in.w), value(in.r), value(in.b),
                     value(i32({kBatch}, {3, 1, 2})), value(in.h0), value(in.c0)},
                    kBidirectional, 3);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    expect_close((*y)[0], {kSeq, 2, kBatch, kHidden}, kLstmY);
    expect_close((*y)[1], {2, kBatch, kHidden}, kLstmYh);
    expect_close((*y)[2], {2, kBatch, kHidden}, kLstmYc);
  }
}

TEST(RecurrentKernels, BidirectionalGruWithLengthsMatchesTorch) {
  // torch's GRU is ONNX's linear_before_reset = 1.
  Attributes a = kBidirectional;
  a.set("linear_before_reset", int64_t{1});
  for (DType dtype : {DType::kF32, DType::kF64}) {
    const Inputs in = make_inputs(dtype, 3);
    auto y = run_op("GRU",
                    {value(in.x), value(in.w), value(in.r), value(in.b),
                     value(i32({kBatch}, {3, 1, 2})), value(in.h0)},
                    a, 2);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    expect_close((*y)[0], {kSeq, 2, kBatch, kHidden}, kGruY);
    expect_close((*y)[1], {2, kBatch, kHidden}, kGruYh);
  }
}

TEST(RecurrentKernels, BidirectionalRnnWithLengthsMatchesTorch) {
  for (DType dtype : {DType::kF32, DType::kF64}) {
    const Inputs in = make_inputs(dtype, 1);
    auto y = run_op("RNN",
                    {value(in.x), value(in.w), value(in.r), value(in.b),
                     value(i32({kBatch}, {3, 1, 2})), value(in.h0)},
                    kBidirectional, 2);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    expect_close((*y)[0], {kSeq, 2, kBatch, kHidden}, kRnnY);
    expect_close((*y)[1], {2, kBatch, kHidden}, kRnnYh);
  }
}

// [d0, d1, rest] -> [d1, d0, rest].
Tensor swap_leading(const Tensor& t) {
  const ConcreteShape& s = t.shape();
  ConcreteShape out = s;
  std::swap(out[0], out[1]);
  const int64_t rest = t.element_count() / (s[0] * s[1]);
  const std::vector<double> v = values_of(t);
  std::vector<double> swapped(v.size());
  for (int64_t i = 0; i < s[0]; ++i) {
    for (int64_t j = 0; j < s[1]; ++j) {
      for (int64_t k = 0; k < rest; ++k)
        swapped[(j * s[0] + i) * rest + k] = v[(i * s[1] + j) * rest + k];
    }
  }
  return make_tensor(t.dtype(), out, swapped);
}

TEST(RecurrentKernels, BatchMajorLayoutMatchesTorch) {
  const Inputs in = make_inputs(DType::kF32, 4);
  Attributes a = kBidirectional;
  a.set("layout", int64_t{1});
  auto y = run_op("LSTM",
                  {value(swap_leading(in.x)), value(in.w), value(in.r), value(in.b), absent(),
                   value(swap_leading(in.h0)), value(swap_leading(in.c0))},
                  a, 3);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {kBatch, kSeq, 2, kHidden}, kLstmBatchMajorY);
  expect_close((*y)[1], {kBatch, 2, kHidden}, kLstmBatchMajorYh);
  expect_close((*y)[2], {kBatch, 2, kHidden}, kLstmBatchMajorYc);
}

TEST(RecurrentKernels, OneActivationListServesBothDirections) {
  const Inputs in = make_inputs(DType::kF32, 1);
  Attributes a = kBidirectional;
  a.set("activations", std::vector<std::string>{"Relu"});
  auto y = run_op("RNN",
                  {value(in.x), value(in.w), value(in.r), value(in.b), absent(), value(in.h0)}, a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {kSeq, 2, kBatch, kHidden}, kRnnReluY);
  // The same list spelled out per direction, in another case.
  a.set("activations", std::vector<std::string>{"relu", "RELU"});
  auto twice = run_op(
      "RNN", {value(in.x), value(in.w), value(in.r), value(in.b), absent(), value(in.h0)}, a);
  ASSERT_TRUE(twice.ok()) << twice.status().to_string();
  expect_close((*twice)[0], {kSeq, 2, kBatch, kHidden}, kRnnReluY);
}

TEST(RecurrentKernels, ZeroLengthGivesZeroOutputsAndStates) {
  // Entry 1 has length 0: its Y, Y_h and Y_c are 0 (ONNX Runtime's convention), whatever its
  // initial state; entry 0 runs one step.
  const Tensor x = f32({2, 2, 1}, {1, 1, 1, 1});
  const Tensor w = f32({1, 4, 1}, {1, 1, 1, 1});
  const Tensor r = f32({1, 4, 1}, {0, 0, 0, 0});
  const Tensor h0 = f32({1, 2, 1}, {0.5, 0.5});
  const Tensor c0 = f32({1, 2, 1}, {0.5, 0.5});
  auto y = run_op(
      "LSTM",
      {value(x), value(w), value(r), absent(), value(i32({2}, {1, 0})), value(h0), value(c0)}, {},
      3);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const double s = 1 / (1 + std::exp(-1.0));
  const double c = s * 0.5 + s * std::tanh(1.0);
  const double h = s * std::tanh(c);
  expect_close((*y)[0], {2, 1, 2, 1}, {h, 0, 0, 0});
  expect_close((*y)[1], {1, 2, 1}, {h, 0});
  expect_close((*y)[2], {1, 2, 1}, {c, 0});
}

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

TEST(RecurrentKernels, LstmPeepholesClipAndInputForget) {
  // One unit, one entry, two steps; W = [i, o, f, c], R the same order, P = [i, o, f].
  const Tensor x = f64({2, 1, 1}, {1.0, -2.0});
  const Tensor w = f64({1, 4, 1}, {0.5, -1.0, 2.0, 1.5});
  const Tensor r = f64({1, 4, 1}, {0.25, 0.5, -0.5, 1.0});
  const Tensor b = f64({1, 8}, {0.1, 0.2, 0.3, 0.4, -0.1, 0.0, 0.1, -0.2});
  const Tensor p = f64({1, 3}, {0.3, -0.4, 0.6});
  const Tensor h0 = f64({1, 1, 1}, {0.2});
  const Tensor c0 = f64({1, 1, 1}, {-0.3});
  const double wi = 0.5, wo = -1.0, wf = 2.0, wc = 1.5, ri = 0.25, ro = 0.5, rf = -0.5, rc = 1.0;
  const double bi = 0.0, bo = 0.2, bf = 0.4, bc = 0.2, pi = 0.3, po = -0.4, pf = 0.6;
  for (bool input_forget : {false, true}) {
    for (double clip : {0.0, 0.75}) {
      auto k = [&](double v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
      double h = 0.2, c = -0.3;
      std::vector<double> ys;
      for (double xt : {1.0, -2.0}) {
        const double i = sigmoid(k(wi * xt + ri * h + bi + pi * c));
        const double f = input_forget ? 1 - i : sigmoid(k(wf * xt + rf * h + bf + pf * c));
        const double g = std::tanh(k(wc * xt + rc * h + bc));
        c = f * c + i * g;
        const double o = sigmoid(k(wo * xt + ro * h + bo + po * c));
        h = o * std::tanh(c);
        ys.push_back(h);
      }
      Attributes a = attrs({{"input_forget", int64_t{input_forget ? 1 : 0}}});
      if (clip > 0) a.set("clip", clip);
      auto y = run_op(
          "LSTM",
          {value(x), value(w), value(r), value(b), absent(), value(h0), value(c0), value(p)}, a, 3);
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      expect_close((*y)[0], {2, 1, 1, 1}, ys, 1e-12);
      expect_close((*y)[1], {1, 1, 1}, {h}, 1e-12);
      expect_close((*y)[2], {1, 1, 1}, {c}, 1e-12);
    }
  }
}

TEST(RecurrentKernels, GruResetBeforeAndAfterTheProduct) {
  // One unit, gates [z, r, h]; Rbh sits inside the reset product only with linear_before_reset.
  const Tensor x = f64({2, 1, 1}, {1.0, -0.5});
  const Tensor w = f64({1, 3, 1}, {0.5, -1.0, 2.0});
  const Tensor r = f64({1, 3, 1}, {0.25, 0.75, -1.5});
  const Tensor b = f64({1, 6}, {0.1, 0.2, 0.3, -0.1, 0.4, 0.5});
  const Tensor h0 = f64({1, 1, 1}, {0.6});
  for (int64_t lbr : {0, 1}) {
    double h = 0.6;
    std::vector<double> ys;
    for (double xt : {1.0, -0.5}) {
      const double z = sigmoid(0.5 * xt + 0.25 * h + 0.1 - 0.1);
      const double rr = sigmoid(-1.0 * xt + 0.75 * h + 0.2 + 0.4);
      const double hh = lbr ? std::tanh(2.0 * xt + rr * (-1.5 * h + 0.5) + 0.3)
                            : std::tanh(2.0 * xt + -1.5 * (rr * h) + 0.5 + 0.3);
      h = (1 - z) * hh + z * h;
      ys.push_back(h);
    }
    auto y = run_op("GRU", {value(x), value(w), value(r), value(b), absent(), value(h0)},
                    attrs({{"linear_before_reset", lbr}}), 2);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    expect_close((*y)[0], {2, 1, 1, 1}, ys, 1e-12);
    expect_close((*y)[1], {1, 1, 1}, {h}, 1e-12);
  }
}

TEST(RecurrentKernels, EveryActivationFunction) {
  // RNN, one step, W = 1, R = 0, no bias: Y = f(x) for each x of the batch.
  const std::vector<double> xs = {-2.0, -0.5, 0.0, 0.5, 1.5, 3.0};
  const auto n = static_cast<int64_t>(xs.size());
  struct Case {
    std::string name;
    std::vector<double> alpha, beta;
    double (*f)(double);
  };
  const std::vector<Case> cases = {
      {"Relu", {}, {}, [](double v) { return std::max(v, 0.0); }},
      {"Tanh", {}, {}, [](double v) { return std::tanh(v); }},
      {"Sigmoid", {}, {}, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"Affine", {2.0}, {-1.0}, [](double v) { return 2 * v - 1; }},
      {"Affine", {}, {}, [](double v) { return v; }},  // defaults alpha 1, beta 0
      {"LeakyRelu", {0.1}, {}, [](double v) { return v >= 0 ? v : 0.1 * v; }},
      {"LeakyRelu", {}, {}, [](double v) { return v >= 0 ? v : 0.01 * v; }},
      {"ThresholdedRelu", {0.5}, {}, [](double v) { return v > 0.5 ? v : 0.0; }},
      {"ScaledTanh", {2.0}, {0.5}, [](double v) { return 2 * std::tanh(0.5 * v); }},
      {"HardSigmoid", {0.25}, {0.4}, [](double v) { return std::clamp(0.25 * v + 0.4, 0.0, 1.0); }},
      {"HardSigmoid", {}, {}, [](double v) { return std::clamp(0.2 * v + 0.5, 0.0, 1.0); }},
      {"Elu", {0.5}, {}, [](double v) { return v >= 0 ? v : 0.5 * (std::exp(v) - 1); }},
      {"Softsign", {}, {}, [](double v) { return v / (1 + std::fabs(v)); }},
      {"Softplus", {}, {}, [](double v) { return std::log(1 + std::exp(v)); }},
  };
  for (const Case& c : cases) {
    Attributes a = attrs({{"activations", std::vector<std::string>{c.name}}});
    if (!c.alpha.empty()) a.set("activation_alpha", c.alpha);
    if (!c.beta.empty()) a.set("activation_beta", c.beta);
    auto y = run_op(
        "RNN", {value(f64({1, n, 1}, xs)), value(f64({1, 1, 1}, {1})), value(f64({1, 1, 1}, {0}))},
        a);
    ASSERT_TRUE(y.ok()) << c.name << ": " << y.status().to_string();
    std::vector<double> expected;
    for (double v : xs) expected.push_back(c.f(v));
    EXPECT_TRUE(all_close((*y)[0], {1, 1, n, 1}, expected, {.atol = 1e-12, .rtol = 1e-12}))
        << c.name;
  }
}

TEST(RecurrentKernels, AlphasAreConsumedInOrderAcrossFunctions) {
  // GRU activations [f, g] = [Affine, LeakyRelu]: alphas {0.5, 0.2} go to Affine then LeakyRelu,
  // beta {0.1} to Affine. W = [0, 0, 1], R = 0: z = 0.5 * 0 + 0.1, h~ = LeakyRelu(x).
  const Tensor x = f64({1, 2, 1}, {-1.0, 2.0});
  auto y =
      run_op("GRU", {value(x), value(f64({1, 3, 1}, {0, 0, 1})), value(f64({1, 3, 1}, {0, 0, 0}))},
             attrs({{"activations", std::vector<std::string>{"Affine", "LeakyRelu"}},
                    {"activation_alpha", std::vector<double>{0.5, 0.2}},
                    {"activation_beta", std::vector<double>{0.1}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  // H = (1 - z) h~ + z * 0.
  expect_close((*y)[0], {1, 1, 2, 1}, {0.9 * -0.2, 0.9 * 2.0}, 1e-12);
}

TEST(RecurrentKernels, ClipBoundsTheGateInput) {
  auto y = run_op("RNN",
                  {value(f32({1, 3, 1}, {-3, 0.25, 3})), value(f32({1, 1, 1}, {1})),
                   value(f32({1, 1, 1}, {0}))},
                  attrs({{"activations", std::vector<std::string>{"Affine"}}, {"clip", 0.5}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {1, 1, 3, 1}, {-0.5, 0.25, 0.5});
}

TEST(RecurrentKernels, ReverseDirectionAndHiddenSizeAttribute) {
  // h_t = x_t + h_{t+1} with Affine (identity) run backwards: Y = suffix sums; Y_h = Y at t = 0.
  auto y = run_op(
      "RNN",
      {value(f32({3, 1, 1}, {1, 2, 4})), value(f32({1, 1, 1}, {1})), value(f32({1, 1, 1}, {1}))},
      attrs({{"direction", std::string("reverse")},
             {"hidden_size", int64_t{1}},
             {"activations", std::vector<std::string>{"Affine"}}}),
      2);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {3, 1, 1, 1}, {7, 6, 4});
  expect_close((*y)[1], {1, 1, 1}, {7});
}

Tensor f16(ConcreteShape shape, const std::vector<float>& values) {
  std::vector<uint16_t> bits;
  for (float v : values) bits.push_back(float_to_half_bits(v));
  return make_tensor<uint16_t>(DType::kF16, std::move(shape), bits);
}

TEST(RecurrentKernels, HalfPrecision) {
  // Affine (identity): h_t = x_t + 0.5 h_{t-1}.
  auto y = run_op("RNN",
                  {value(f16({2, 1, 1}, {0.5f, -1.0f})), value(f16({1, 1, 1}, {1.0f})),
                   value(f16({1, 1, 1}, {0.5f}))},
                  attrs({{"activations", std::vector<std::string>{"Affine"}}}), 2);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].dtype(), DType::kF16);
  expect_close((*y)[0], {2, 1, 1, 1}, {0.5, -0.75}, 1e-3);
  expect_close((*y)[1], {1, 1, 1}, {-0.75}, 1e-3);
}

TEST(RecurrentKernels, NaNPropagates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto y = run_op("LSTM",
                  {value(f64({2, 1, 1}, {nan, 1})), value(f64({1, 4, 1}, {1, 1, 1, 1})),
                   value(f64({1, 4, 1}, {1, 1, 1, 1}))},
                  {}, 2);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  for (double v : values_of((*y)[0])) EXPECT_TRUE(std::isnan(v));
  EXPECT_TRUE(std::isnan(values_of((*y)[1])[0]));
}

TEST(RecurrentKernels, AbsentOutputsAreSkipped) {
  // Only Y_h: output 0 declared absent (a null buffer), lengths absent (all full).
  const Inputs in = make_inputs(DType::kF32, 1);
  const OpDef* def = find_op_def("RNN");
  ASSERT_NE(def, nullptr);
  const std::vector<const Tensor*> given = {&in.x, &in.w, &in.r, &in.b, nullptr, &in.h0};
  std::vector<ConcreteInput> inputs;
  std::vector<ConstBuffer> buffers;
  for (const Tensor* t : given) {
    inputs.push_back(t ? ConcreteInput{true, t->dtype(), t->shape(), nullptr} : ConcreteInput{});
    buffers.push_back(t ? ConstBuffer{t->dtype(), t->shape(), t->data()} : ConstBuffer{});
  }
  auto planned = plan_concrete(*def, kBidirectional, inputs, 2, nullptr);
  ASSERT_TRUE(planned.ok()) << planned.status().to_string();
  Tensor yh = Tensor::create(DType::kF32, {2, kBatch, kHidden}).value();
  const ConcreteShape y_dims{kSeq, 2, kBatch, kHidden};
  const std::vector<MutableBuffer> outs = {{DType::kF32, y_dims, nullptr},
                                           {DType::kF32, yh.shape(), yh.mutable_data()}};
  ASSERT_TRUE(planned->kernel->run(buffers, outs).ok());
  expect_close(yh, {2, kBatch, kHidden}, kRnnFullYh);
}

TEST(RecurrentKernels, SequenceLengthOutOfRangeIsAnError) {
  const Inputs in = make_inputs(DType::kF32, 1);
  auto y = run_op(
      "RNN", {value(in.x), value(in.w), value(in.r), value(in.b), value(i32({kBatch}, {3, 4, 1}))},
      kBidirectional, 2);
  EXPECT_TRUE(contains(error_of(y), "input 4 'sequence_lens' element 1 = 4 is out of range [0, 3]"))
      << error_of(y);
}

// ---- Shape rules

TEST(RecurrentShapes, SymbolicSequenceAndBatch) {
  const Shape x{sym("S"), sym("N"), 8};
  auto lstm = infer_op("LSTM",
                       {type(DType::kF32, x), type(DType::kF32, {2, 64, 8}),
                        type(DType::kF32, {2, 64, 16}), type(DType::kF32, {2, 128}),
                        type(DType::kI32, {sym("N")}), type(DType::kF32, {2, sym("N"), 16}),
                        type(DType::kF32, {2, sym("N"), 16}), type(DType::kF32, {2, 48})},
                       kBidirectional, 3);
  ASSERT_TRUE(lstm.ok()) << lstm.status().to_string();
  EXPECT_EQ((*lstm)[0].shape, (Shape{sym("S"), 2, sym("N"), 16}));
  EXPECT_EQ((*lstm)[1].shape, (Shape{2, sym("N"), 16}));
  EXPECT_EQ((*lstm)[2].shape, (Shape{2, sym("N"), 16}));
  // Batch major, hidden_size from the attribute, f64.
  auto gru = infer_op("GRU",
                      {type(DType::kF64, {sym("N"), sym("S"), 4}), type(DType::kF64, {1, 15, 4}),
                       type(DType::kF64, {1, 15, 5})},
                      attrs({{"layout", int64_t{1}}, {"hidden_size", int64_t{5}}}), 2);
  ASSERT_TRUE(gru.ok()) << gru.status().to_string();
  EXPECT_EQ((*gru)[0].shape, (Shape{sym("N"), sym("S"), 1, 5}));
  EXPECT_EQ((*gru)[1].shape, (Shape{sym("N"), 1, 5}));
  EXPECT_EQ((*gru)[0].dtype, DType::kF64);
  // input_size and hidden_size symbolic too (assumed equal where not provable).
  auto rnn = infer_op("RNN", {type(DType::kF16, {sym("S"), sym("N"), sym("I")}),
                              type(DType::kF16, {1, sym("H"), sym("I")}),
                              type(DType::kF16, {1, sym("H"), sym("H")})});
  ASSERT_TRUE(rnn.ok()) << rnn.status().to_string();
  EXPECT_EQ((*rnn)[0].shape, (Shape{sym("S"), 1, sym("N"), sym("H")}));
}

TEST(RecurrentShapes, RejectsBadInputs) {
  const ValueType x = type(DType::kF32, {5, sym("N"), 8});
  const ValueType w = type(DType::kF32, {1, 64, 8});
  const ValueType r = type(DType::kF32, {1, 64, 16});
  auto lstm = [&](std::vector<std::optional<ValueType>> types, Attributes a = {}) {
    return error_of(infer_op("LSTM", types, a, 3));
  };
  auto expect = [](const std::string& error, std::string_view part) {
    EXPECT_TRUE(contains(error, part)) << error;
  };
  expect(lstm({type(DType::kF32, {5, 8}), w, r}), "input 0 'X' must have rank 3, got 2");
  expect(lstm({type(DType::kI64, {5, 2, 8}), w, r}), "input 0 'X' must have dtype");
  expect(lstm({x, type(DType::kF64, {1, 64, 8}), r}), "input 1 'W' must have dtype f32");
  expect(lstm({x, type(DType::kF32, {1, 60, 8}), r}), "input 1 'W' dim 1 (4 gates x hidden_size)");
  expect(lstm({x, type(DType::kF32, {1, 64, 7}), r}), "input 1 'W' dim 2 (input_size");
  expect(lstm({x, type(DType::kF32, {2, 64, 8}), r}),
         "input 1 'W' dim 0 (num_directions = 1 for direction 'forward')");
  expect(lstm({x, w, type(DType::kF32, {1, 60, 16})}), "input 2 'R' dim 1 (4 gates x hidden_size)");
  expect(lstm({x, w, type(DType::kF32, {1, 64, 15})}),
         "input 1 'W' dim 1 (4 gates x hidden_size) must be 60, got 64");
  expect(lstm({x, w, r}, attrs({{"hidden_size", int64_t{8}}})), "input 1 'W' dim 1");
  expect(lstm({x, w, r, type(DType::kF32, {1, 64})}), "input 3 'B' dim 1 (2 x gates x hidden_size");
  expect(lstm({x, w, r, std::nullopt, type(DType::kI64, {4})}),
         "input 4 'sequence_lens' must have dtype i32");
  expect(lstm({x, w, r, std::nullopt, type(DType::kI32, {4, 1})}),
         "input 4 'sequence_lens' must have rank 1");
  expect(lstm({x, w, r, std::nullopt, std::nullopt, type(DType::kF32, {1, sym("N"), 8})}),
         "input 5 'initial_h' dim 2 (hidden_size)");
  expect(lstm({x, w, r, std::nullopt, std::nullopt, std::nullopt, type(DType::kF32, {2, 3, 16})}),
         "input 6 'initial_c' dim 0");
  expect(lstm({x, w, r, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
               type(DType::kF32, {1, 64})}),
         "input 7 'P' dim 1 (3 x hidden_size");
  expect(lstm({x, w, r}, attrs({{"direction", std::string("sideways")}})),
         "attribute 'direction' must be 'forward', 'reverse' or 'bidirectional', got 'sideways'");
  expect(lstm({x, w, r}, attrs({{"activations", std::vector<std::string>{"Tanh", "Tanh"}}})),
         "attribute 'activations' must list 3 functions per direction");
  expect(lstm({x, w, r},
              attrs({{"activations", std::vector<std::string>{"Sigmoid", "Gelu", "Tanh"}}})),
         "attribute 'activations' element 1 'Gelu' is not an activation LSTM defines");
  expect(lstm({x, w, r}, attrs({{"layout", int64_t{2}}})), "attribute 'layout' must be 0 or 1");
  expect(lstm({x, w, r}, attrs({{"hidden_size", int64_t{0}}})),
         "attribute 'hidden_size' must be in [1, 1099511627776], got 0");
  expect(lstm({x, w, type(DType::kF32, {1, sym("G"), sym("H")})},
              attrs({{"hidden_size", int64_t{1} << 61}})),
         "attribute 'hidden_size' must be in [1, 1099511627776]");
  expect(lstm({x, w, r}, attrs({{"clip", -1.0}})), "attribute 'clip' must be > 0");
  expect(lstm({x, w, r}, attrs({{"input_forget", int64_t{3}}})),
         "attribute 'input_forget' must be 0 or 1");
  expect(lstm({x, w, r}, attrs({{"linear_before_reset", int64_t{1}}})),
         "attribute 'linear_before_reset' is not supported");
  expect(lstm({x, std::nullopt, r}), "input 1 'W' is required");
  // GRU takes no P or initial_c, and has 3 gates.
  auto gru = infer_op("GRU",
                      {x, type(DType::kF32, {1, 48, 8}), type(DType::kF32, {1, 48, 16}),
                       std::nullopt, std::nullopt, std::nullopt, type(DType::kF32, {1, 1, 16})},
                      {}, 2);
  EXPECT_FALSE(gru.ok());
  auto gru_gates = infer_op("GRU", {x, w, r}, {}, 2);
  expect(error_of(gru_gates), "input 1 'W' dim 1 (3 gates x hidden_size)");
  // The batch of initial_h in layout 1 is dim 0.
  auto batch_major = infer_op(
      "RNN",
      {type(DType::kF32, {4, 5, 8}), type(DType::kF32, {1, 16, 8}), type(DType::kF32, {1, 16, 16}),
       std::nullopt, std::nullopt, type(DType::kF32, {1, 4, 16})},
      attrs({{"layout", int64_t{1}}}), 2);
  expect(error_of(batch_major), "input 5 'initial_h' dim 0 (batch_size (layout 1))");
}

}  // namespace
}  // namespace kiln::kernels
