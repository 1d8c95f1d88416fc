// Broadcasting binary and variadic kernels (binary.cc) and the broadcast iterator. Expected values
// are hand-computed or taken from the ONNX operator documentation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kiln/base/half.h"
#include "kiln/kernels/broadcast.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/kernel.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

using namespace ::kiln::testing;  // NOLINT

bool has_message(const Status& s, StatusCode code, std::string_view text) {
  return !s.ok() && s.code() == code && s.message().find(text) != std::string::npos;
}

Attributes attr(std::string name, Attribute value) {
  Attributes a;
  a.set(std::move(name), std::move(value));
  return a;
}

// Symbolic inference: one call of `op`'s infer on the given types (and known values).
struct Infer {
  Attributes attributes;
  std::vector<std::optional<ValueType>> inputs;
  std::vector<std::vector<DimExpr>> values;  // per input; empty: unknown
  InferArgs args{attributes, {}, {}, 1, {}};

  Status run(std::string_view op) {
    args.inputs = inputs;
    args.constants.assign(inputs.size(), nullptr);
    values.resize(inputs.size());
    args.values.clear();
    for (const auto& v : values) args.values.push_back(v.empty() ? nullptr : &v);
    return find_op_def(op)->infer(args);
  }
};

DimExpr sym(const char* name) { return DimExpr::symbol(name); }

TEST(BroadcastIter, CollapsesDimsAndCoversEveryElement) {
  // [2,3,4] with [3,1] and [4]: visit each output element once with the right input offsets.
  std::vector<ConcreteShape> ins = {{2, 3, 4}, {3, 1}, {4}};
  auto it = BroadcastIter::make(ins, {2, 3, 4});
  ASSERT_TRUE(it.ok()) << it.status().to_string();
  std::vector<int> seen(24, 0);
  it->for_each<3>([&](int64_t o, int64_t n, const std::array<int64_t, 3>& off,
                      const std::array<int64_t, 3>& st) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t flat = o + j;
      const int64_t i0 = flat / 12, i1 = (flat / 4) % 3, i2 = flat % 4;
      ++seen[flat];
      EXPECT_EQ(off[0] + j * st[0], flat);
      EXPECT_EQ(off[1] + j * st[1], i1);
      EXPECT_EQ(off[2] + j * st[2], i2);
      (void)i0;
    }
  });
  for (int s : seen) EXPECT_EQ(s, 1);
  // Same shapes collapse to one run.
  std::vector<ConcreteShape> same = {{5, 6}, {5, 6}};
  int runs = 0;
  BroadcastIter::make(same, {5, 6})->for_each<2>([&](int64_t, int64_t n, const auto&, const auto&) {
    ++runs;
    EXPECT_EQ(n, 30);
  });
  EXPECT_EQ(runs, 1);
  std::vector<ConcreteShape> bad = {{3}};
  EXPECT_FALSE(BroadcastIter::make(bad, {4}).ok());
}

TEST(Binary, ArithmeticBroadcastsBothWays) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(values_of<float>(run_one("Add", {a, f32({3}, {10, 20, 30})})),
            (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(values_of<float>(run_one("Sub", {f32({2, 1}, {1, 2}), f32({1, 3}, {1, 2, 3})})),
            (std::vector<float>{0, -1, -2, 1, 0, -1}));
  EXPECT_EQ(values_of<double>(run_one("Mul", {f64({}, {2}), f64({2}, {3, -4})})),
            (std::vector<double>{6, -8}));
  EXPECT_EQ(values_of<float>(run_one("Div", {f32({2}, {1, -3}), f32({1}, {2})})),
            (std::vector<float>{0.5f, -1.5f}));
}

TEST(Binary, LargeBroadcastMatchesFormula) {
  // [700, 1, 50] + [300, 1]: 10.5M outputs, split across threads and chunks.
  const int64_t A = 700, B = 300, C = 50;
  std::vector<int32_t> av(A * C), bv(B);
  for (int64_t i = 0; i < A * C; ++i) av[i] = static_cast<int32_t>(i * 1000);
  for (int64_t j = 0; j < B; ++j) bv[j] = static_cast<int32_t>(j);
  auto y = run_one("Add", {i32({A, 1, C}, av), i32({B, 1}, bv)});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ(y->shape(), (ConcreteShape{A, B, C}));
  auto v = y->values<int32_t>();
  int64_t bad = 0;
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) {
        bad += v[(a * B + b) * C + c] != static_cast<int32_t>((a * C + c) * 1000 + b);
      }
  EXPECT_EQ(bad, 0);
}

TEST(Binary, IntegerArithmeticWrapsAndTruncates) {
  EXPECT_EQ(values_of<uint8_t>(run_one("Add", {u8({2}, {250, 1}), u8({2}, {10, 2})})),
            (std::vector<uint8_t>{4, 3}));
  EXPECT_EQ(values_of<int32_t>(run_one("Mul", {i32({1}, {1 << 30}), i32({1}, {4})})),
            (std::vector<int32_t>{0}));
  EXPECT_EQ(
      values_of<int64_t>(run_one("Div", {i64({4}, {-7, 7, -7, 7}), i64({4}, {2, 2, -2, -2})})),
      (std::vector<int64_t>{-3, 3, 3, -3}));
  const int64_t lo = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(values_of<int64_t>(run_one("Div", {i64({1}, {lo}), i64({1}, {-1})})),
            (std::vector<int64_t>{lo}));
  auto zero = run_one("Div", {i32({3}, {1, 2, 3}), i32({3}, {1, 1, 0})});
  EXPECT_TRUE(has_message(zero.status(), StatusCode::kInvalidArgument,
                          "integer division by zero: input 1 'B' element 2 is 0"));
  // Float division by zero is IEEE.
  EXPECT_EQ(values_of<float>(run_one("Div", {f32({1}, {1}), f32({1}, {0})}))[0], INFINITY);
}

TEST(Binary, ModFollowsFmodAttribute) {
  // ONNX Mod docs: np.mod (sign of the divisor) and np.fmod (sign of the dividend).
  Tensor a = i64({6}, {-4, 7, 5, 4, -7, 8});
  Tensor b = i64({6}, {2, -3, 8, -2, 3, 5});
  EXPECT_EQ(values_of<int64_t>(run_one("Mod", {a, b})), (std::vector<int64_t>{0, -2, 5, 0, 2, 3}));
  EXPECT_EQ(values_of<int64_t>(run_one("Mod", {a, b}, attr("fmod", int64_t{1}))),
            (std::vector<int64_t>{0, 1, 5, 0, -1, 3}));
  auto f = values_of<double>(
      run_one("Mod", {f64({2}, {-4.3, 7.2}), f64({2}, {2.1, -3.4})}, attr("fmod", int64_t{1})));
  EXPECT_NEAR(f[0], -0.1, 1e-12);
  EXPECT_NEAR(f[1], 0.4, 1e-12);
  EXPECT_TRUE(has_message(run_one("Mod", {f32({1}, {1}), f32({1}, {1})}).status(),
                          StatusCode::kInvalidArgument, "'fmod' must be 1"));
  EXPECT_TRUE(has_message(run_one("Mod", {i32({1}, {1}), i32({1}, {0})}).status(),
                          StatusCode::kInvalidArgument, "division by zero"));
  EXPECT_TRUE(has_message(run_one("Mod", {a, b}, attr("fmod", int64_t{2})).status(),
                          StatusCode::kInvalidArgument, "'fmod' must be 0 or 1"));
}

TEST(Binary, BitShift) {
  Tensor x = u8({4}, {16, 4, 1, 255});
  Tensor y = u8({4}, {1, 2, 3, 8});
  EXPECT_EQ(
      values_of<uint8_t>(run_one("BitShift", {x, y}, attr("direction", std::string("RIGHT")))),
      (std::vector<uint8_t>{8, 1, 0, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_one("BitShift", {x, y}, attr("direction", std::string("LEFT")))),
            (std::vector<uint8_t>{32, 16, 8, 0}));
  EXPECT_TRUE(has_message(run_one("BitShift", {x, y}).status(), StatusCode::kInvalidArgument,
                          "'direction' is required"));
  EXPECT_TRUE(
      has_message(run_one("BitShift", {x, y}, attr("direction", std::string("UP"))).status(),
                  StatusCode::kInvalidArgument, "LEFT or RIGHT, got 'UP'"));
  EXPECT_TRUE(has_message(
      run_one("BitShift", {i32({1}, {1}), i32({1}, {1})}, attr("direction", std::string("LEFT")))
          .status(),
      StatusCode::kUnimplemented, "must have dtype u8 or u16"));
}

TEST(Binary, LogicAndComparison) {
  Tensor a = boolean({2, 2}, {0, 0, 1, 1});
  Tensor b = boolean({2}, {0, 1});
  EXPECT_EQ(values_of<uint8_t>(run_one("And", {a, b})), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(values_of<uint8_t>(run_one("Or", {a, b})), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(values_of<uint8_t>(run_one("Xor", {a, b})), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_one("Equal", {a, b})), (std::vector<uint8_t>{1, 0, 0, 1}));
  Tensor x = f64({4}, {1, 2, 3, kNaN});
  Tensor y = f64({1}, {2});
  auto lt = run_one("Less", {x, y});
  ASSERT_TRUE(lt.ok());
  EXPECT_EQ(lt->dtype(), DType::kBool);
  EXPECT_EQ(values_of<uint8_t>(lt), (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_one("LessOrEqual", {x, y})), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_one("Greater", {x, y})), (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_one("GreaterOrEqual", {x, y})),
            (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_one("Equal", {x, f64({4}, {1, 0, 3, kNaN})})),
            (std::vector<uint8_t>{1, 0, 1, 0}));  // NaN is never equal
  EXPECT_TRUE(has_message(run_one("And", {f32({1}, {1}), f32({1}, {1})}).status(),
                          StatusCode::kUnimplemented, "input 0 'A' must have dtype bool"));
  EXPECT_TRUE(
      has_message(run_one("Less", {a, b}).status(), StatusCode::kUnimplemented, "got bool"));
}

TEST(Binary, PReluSlopeBroadcastsToX) {
  Tensor x = f32({2, 3}, {-1, 2, -3, 4, -5, 6});
  EXPECT_EQ(values_of<float>(run_one("PRelu", {x, f32({3}, {0.5f, 2, 3})})),
            (std::vector<float>{-0.5f, 2, -9, 4, -10, 6}));
  auto bad = run_one("PRelu", {f32({3}, {1, 2, 3}), f32({2, 1}, {1, 1})});
  EXPECT_TRUE(
      has_message(bad.status(), StatusCode::kInvalidArgument,
                  "input 1 'slope' shape [2,1] does not broadcast to input 0 'X' shape [3]"));
}

TEST(Binary, WhereBroadcastsThreeWays) {
  Tensor c = boolean({2, 1}, {1, 0});
  Tensor x = i64({3}, {1, 2, 3});
  Tensor y = i64({}, {-1});
  EXPECT_EQ(values_of<int64_t>(run_one("Where", {c, x, y})),
            (std::vector<int64_t>{1, 2, 3, -1, -1, -1}));
  EXPECT_TRUE(has_message(run_one("Where", {x, x, x}).status(), StatusCode::kUnimplemented,
                          "input 0 'condition' must have dtype bool"));
  EXPECT_TRUE(has_message(run_one("Where", {c, x, f32({1}, {1})}).status(),
                          StatusCode::kInvalidArgument, "input 2 'Y' must have dtype i64"));
}

TEST(Binary, VariadicMinMaxSumMean) {
  Tensor a = f32({3}, {3, 2, 1});
  Tensor b = f32({3}, {1, 4, 4});
  Tensor c = f32({1}, {2});
  EXPECT_EQ(values_of<float>(run_one("Min", {a, b, c})), (std::vector<float>{1, 2, 1}));
  EXPECT_EQ(values_of<float>(run_one("Max", {a, b, c})), (std::vector<float>{3, 4, 4}));
  EXPECT_EQ(values_of<float>(run_one("Sum", {a, b, c})), (std::vector<float>{6, 8, 7}));
  EXPECT_EQ(values_of<float>(run_one("Mean", {a, b, c})),
            (std::vector<float>{2, 8.f / 3, 7.f / 3}));
  EXPECT_EQ(values_of<float>(run_one("Sum", {a})), (std::vector<float>{3, 2, 1}));
  // The output may be bigger than the first input.
  EXPECT_EQ(values_of<float>(run_one("Max", {c, a})), (std::vector<float>{3, 2, 2}));
  // np.minimum / np.maximum propagate NaN.
  auto m = values_of<double>(run_one("Min", {f64({2}, {kNaN, 1}), f64({2}, {0, kNaN})}));
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]));
  EXPECT_EQ(values_of<uint8_t>(run_one("Max", {u8({2}, {1, 200}), u8({2}, {3, 100})})),
            (std::vector<uint8_t>{3, 200}));
  EXPECT_TRUE(has_message(run_one("Sum", {i64({1}, {1})}).status(), StatusCode::kUnimplemented,
                          "input 0 'data_0' must have dtype"));
  EXPECT_TRUE(has_message(run_one("Max", {a, f64({1}, {1})}).status(), StatusCode::kInvalidArgument,
                          "input 1 'data_1' must have dtype f32 like input 0 'data_0'"));
  EXPECT_TRUE(
      has_message(run_one("Min", {}).status(), StatusCode::kInvalidArgument, "expects 1 to"));
}

TEST(Binary, PowMixedTypes) {
  EXPECT_EQ(values_of<float>(run_one("Pow", {f32({3}, {1, 2, 3}), i64({3}, {4, 5, 6})})),
            (std::vector<float>{1, 32, 729}));
  // Integer base, float exponent: the real power truncated (2^0.5 = 1.414 -> 1).
  EXPECT_EQ(values_of<int64_t>(run_one("Pow", {i64({3}, {2, 3, 4}), f32({3}, {0.5f, 2, -1})})),
            (std::vector<int64_t>{1, 9, 0}));
  EXPECT_EQ(
      values_of<int32_t>(run_one("Pow", {i32({4}, {2, -3, -1, 5}), i32({4}, {10, 3, -3, -1})})),
      (std::vector<int32_t>{1024, -27, -1, 0}));
  // 3^40 wraps like int64 multiplication.
  int64_t p = 1;
  for (int i = 0; i < 40; ++i) p = static_cast<int64_t>(static_cast<uint64_t>(p) * 3u);
  EXPECT_EQ(values_of<int64_t>(run_one("Pow", {i64({1}, {3}), i64({1}, {40})}))[0], p);
  auto h = run_one(
      "Pow", {make_tensor<uint16_t>(DType::kF16, {1}, {float_to_half_bits(3.f)}), f32({1}, {2})});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->dtype(), DType::kF16);
  EXPECT_EQ(half_bits_to_float(h->values<uint16_t>()[0]), 9.f);
  EXPECT_TRUE(has_message(run_one("Pow", {f32({1}, {1}), boolean({1}, {1})}).status(),
                          StatusCode::kUnimplemented, "input 1 'Y' must have dtype"));
}

TEST(Binary, PowSquaringAndCubingMatchTheGeneralPathBitwise) {
  // A scalar exponent of 2 or 3 takes the squaring or cubing path; a two-element exponent [e, e]
  // the general one (std::pow in double). Edge values: subnormals, overflow to inf, inf, NaN,
  // signed zeros.
  const float big = std::numeric_limits<float>::max();
  const float tiny = std::numeric_limits<float>::denorm_min();
  std::vector<float> xs{0.0f,          -0.0f, 1.5f, -3.25f, 1e-20f,
                        tiny,          1e20f, big,  -big,   std::numeric_limits<float>::infinity(),
                        std::nanf(""), 0.1f};
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  while (xs.size() < 1000) xs.push_back(normal(rng));
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> pairs;
  for (float v : xs) pairs.insert(pairs.end(), {v, v});
  for (float e : {2.0f, 3.0f}) {
    SCOPED_TRACE(e);
    auto fast = run_one("Pow", {f32({n}, xs), f32({}, {e})});
    auto general = run_one("Pow", {f32({n, 2}, pairs), f32({2}, {e, e})});
    ASSERT_TRUE(fast.ok() && general.ok());
    const auto got = values_of<float>(*fast);
    const auto gen = values_of<float>(*general);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t a, b;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &gen[2 * i], 4);
      EXPECT_EQ(a, b) << "x = " << xs[i];
    }
    EXPECT_EQ(got[3], e == 2.0f ? 10.5625f : -34.328125f);
    EXPECT_TRUE(std::isinf(got[7]));
    EXPECT_TRUE(std::isnan(got[10]));
  }
}

TEST(Binary, SymbolicShapes) {
  Infer ok;
  ok.inputs = {ValueType{DType::kF32, {sym("N"), 1, 4}}, ValueType{DType::kF32, {sym("C"), 1}}};
  ASSERT_TRUE(ok.run("Add").ok());
  EXPECT_EQ(shape_to_string(ok.args.outputs[0].shape), "[N,C,4]");
  // Equal only at run time: assumed, and recorded for the runtime to check.
  AssumptionRecorder recorder;
  Infer unprovable;
  unprovable.inputs = {ValueType{DType::kF32, {sym("N")}}, ValueType{DType::kF32, {sym("M")}}};
  ASSERT_TRUE(unprovable.run("Mul").ok());
  EXPECT_EQ(shape_to_string(unprovable.args.outputs[0].shape), "[N]");
  ASSERT_EQ(recorder.assumptions().size(), 1u);
  EXPECT_EQ(recorder.assumptions()[0].to_string(), "M == N");
  Infer mismatch;
  mismatch.inputs = {ValueType{DType::kF32, {2, 3}}, ValueType{DType::kF32, {4, 3}}};
  EXPECT_TRUE(has_message(mismatch.run("Sub"), StatusCode::kInvalidArgument, "2 vs 4"));
  Infer where;
  where.inputs = {ValueType{DType::kBool, {sym("N"), 1}}, ValueType{DType::kF16, {1, sym("M")}},
                  ValueType{DType::kF16, {}}};
  ASSERT_TRUE(where.run("Where").ok());
  EXPECT_EQ(shape_to_string(where.args.outputs[0].shape), "[N,M]");
  EXPECT_EQ(where.args.outputs[0].dtype, DType::kF16);
  Infer legacy;
  legacy.attributes.set("axis", int64_t{1});
  legacy.inputs = {ValueType{DType::kF32, {2, 3}}, ValueType{DType::kF32, {3}}};
  EXPECT_TRUE(has_message(legacy.run("Add"), StatusCode::kUnimplemented,
                          "attribute 'axis' is not supported"));
}

TEST(Binary, ShapeComputationValues) {
  // Mul(Shape(x) = [N, 3], 2) = [2N, 6]; Add, Sub alike.
  Infer mul;
  mul.inputs = {ValueType{DType::kI64, {2}}, ValueType{DType::kI64, {}}};
  mul.values = {{sym("N"), 3}, {2}};
  ASSERT_TRUE(mul.run("Mul").ok());
  ASSERT_EQ(mul.args.output_values.size(), 1u);
  ASSERT_TRUE(mul.args.output_values[0].has_value());
  EXPECT_EQ((*mul.args.output_values[0])[0], DimExpr(2) * sym("N"));
  EXPECT_EQ((*mul.args.output_values[0])[1], DimExpr(6));
  Infer sub;
  sub.inputs = {ValueType{DType::kI64, {2}}, ValueType{DType::kI64, {2}}};
  sub.values = {{sym("N"), 3}, {1, 5}};
  ASSERT_TRUE(sub.run("Sub").ok());
  EXPECT_EQ((*sub.args.output_values[0])[0], sym("N") - DimExpr(1));
  EXPECT_EQ((*sub.args.output_values[0])[1], DimExpr(-2));
  // Div of a dim by a positive constant is floor division; -7 / 2 truncates.
  Infer div;
  div.inputs = {ValueType{DType::kI64, {2}}, ValueType{DType::kI64, {1}}};
  div.values = {{sym("N"), -7}, {2}};
  ASSERT_TRUE(div.run("Div").ok());
  EXPECT_EQ((*div.args.output_values[0])[0], sym("N").floor_div(2));
  EXPECT_EQ((*div.args.output_values[0])[1], DimExpr(-3));
  // N - 5 may be negative: truncation toward zero, as an expression exact at every N; Mod by a
  // positive constant takes its sign (x - 2*floor(x/2)).
  for (const char* op : {"Div", "Mod"}) {
    Infer signed_values;
    signed_values.inputs = {ValueType{DType::kI64, {1}}, ValueType{DType::kI64, {1}}};
    signed_values.values = {{sym("N") - DimExpr(5)}, {2}};
    ASSERT_TRUE(signed_values.run(op).ok());
    ASSERT_TRUE(!signed_values.args.output_values.empty() && signed_values.args.output_values[0]);
    const DimExpr& value = (*signed_values.args.output_values[0])[0];
    for (int64_t n = 0; n <= 12; ++n) {
      const int64_t x = n - 5;
      const int64_t want = std::string(op) == "Div" ? x / 2 : ((x % 2) + 2) % 2;
      EXPECT_EQ(value.evaluate({{"N", n}}).value(), want) << op << " at N = " << n;
    }
  }
  // Division by a constant 0 leaves the values unknown (the kernel reports the error).
  Infer by_zero;
  by_zero.inputs = {ValueType{DType::kI64, {1}}, ValueType{DType::kI64, {1}}};
  by_zero.values = {{4}, {0}};
  ASSERT_TRUE(by_zero.run("Div").ok());
  EXPECT_TRUE(by_zero.args.output_values.empty() || !by_zero.args.output_values[0]);
}

}  // namespace
}  // namespace kiln::kernels
