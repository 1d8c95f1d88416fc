// Windowed kernels (spatial.cc). Expected values are hand-computed or taken from the ONNX operator
// documentation examples.
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/base/half.h"
#include "kiln/kernels/conv_geometry.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/kernel.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

std::vector<float> iota(int n) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(static_cast<float>(i));
  return v;
}

// Runs `op`; an input Tensor with no storage stands for an absent optional input.
StatusOr<std::vector<Tensor>> run_op(std::string_view op, const std::vector<Tensor>& inputs,
                                     const Attributes& attributes = {}, size_t outputs = 1) {
  const OpDef* k = find_op_def(op);
  if (k == nullptr) return not_found("no kernel {}", op);
  std::vector<ConcreteInput> concrete;
  for (const Tensor& t : inputs) {
    if (t.empty_storage()) {
      concrete.push_back({});
    } else {
      concrete.push_back({true, t.dtype(), t.shape(), nullptr});
    }
  }
  KILN_ASSIGN_OR_RETURN(Planned p, plan_concrete(*k, attributes, concrete, outputs, nullptr));
  std::vector<Tensor> ys;
  for (const ConcreteOutput& o : p.outputs) {
    KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::create(o.dtype, o.dims));
    ys.push_back(std::move(y));
  }
  std::vector<ConstBuffer> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(
        {inputs[i].dtype(), inputs[i].shape(), concrete[i].present ? inputs[i].data() : nullptr});
  }
  std::vector<MutableBuffer> out;
  for (Tensor& y : ys) out.push_back({y.dtype(), y.shape(), y.mutable_data()});
  KILN_RETURN_IF_ERROR(p.kernel->run(in, out));
  return ys;
}

using Ints = std::vector<int64_t>;

Status infer(std::string_view op, std::vector<ValueType> inputs, const Attributes& attributes,
             std::vector<ValueType>* outputs, size_t output_count = 1) {
  InferArgs args{attributes, {}, {}, output_count, {}, {}, {}, {}};
  for (ValueType& v : inputs) {
    args.inputs.emplace_back(std::move(v));
    args.constants.push_back(nullptr);
  }
  KILN_RETURN_IF_ERROR(find_op_def(op)->infer(args));
  *outputs = std::move(args.outputs);
  return ok_status();
}

TEST(Conv, GroupedOneDWithBiasResidualAndRelu) {
  // Two groups of one channel: y[m] = sum_k w[m, k] * x[m, 2 * o + k - 1] + b[m] + r.
  Tensor x = f64({1, 2, 5}, {1, 2, 3, 4, 5, 10, 20, 30, 40, 50});
  Tensor w = f64({2, 1, 3}, {1, 0, -1, 0, 1, 0});
  Tensor b = f64({2}, {0.5, -100});
  Tensor r = f64({1, 2, 3}, {0, 0, -10, 0, 0, 0});
  auto y = run_op("Conv", {x, w, b, r},
                  attrs({{"group", int64_t{2}},
                         {"strides", Ints{2}},
                         {"pads", Ints{1, 1}},
                         {"kiln_activation", std::string("relu")}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ((*y)[0].shape(), (ConcreteShape{1, 2, 3}));
  // Channel 0: windows [0,1,2] [2,3,4] [4,5,0] -> -2, -2, 4 (+0.5, then residual -10 on the last).
  // Channel 1: the centre taps 10, 30, 50, minus 100: all negative, relu gives 0.
  EXPECT_EQ(values_of<double>((*y)[0]), (std::vector<double>{0, 0, 0, 0, 0, 0}));
  auto plain = run_op("Conv", {x, w, b},
                      attrs({{"group", int64_t{2}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}}));
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(values_of<double>((*plain)[0]), (std::vector<double>{-1.5, -1.5, 4.5, -90, -70, -50}));
}

// kiln_residual_after_activation = 1 adds the residual after the activation: relu(conv) + r, where
// the residual before it gives relu(conv + r).
TEST(Conv, ResidualAfterTheActivation) {
  Tensor x = f64({1, 1, 4}, {1, -2, 3, -4});
  Tensor w = f64({1, 1, 1}, {1});
  Tensor r = f64({1, 1, 4}, {-10, -10, 10, 10});
  auto after = run_op("Conv", {x, w, Tensor(), r},
                      attrs({{"kiln_activation", std::string("relu")},
                             {"kiln_residual_after_activation", int64_t{1}}}));
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_EQ(values_of<double>((*after)[0]), (std::vector<double>{-9, -10, 13, 10}));
  auto before =
      run_op("Conv", {x, w, Tensor(), r}, attrs({{"kiln_activation", std::string("relu")}}));
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  EXPECT_EQ(values_of<double>((*before)[0]), (std::vector<double>{0, 0, 13, 6}));
}

// The attribute needs a residual and an activation, and is 0 or 1; otherwise the Conv is refused,
// naming it.
TEST(Conv, ResidualAfterTheActivationNeedsBothAndABoolean) {
  const ValueType x{DType::kF32, {1, 1, 4}}, w{DType::kF32, {1, 1, 1}};
  std::vector<ValueType> outputs;
  const Status no_residual = infer("Conv", {x, w},
                                   attrs({{"kiln_activation", std::string("relu")},
                                          {"kiln_residual_after_activation", int64_t{1}}}),
                                   &outputs);
  EXPECT_TRUE(has_error(no_residual, StatusCode::kInvalidArgument,
                        {"kiln_residual_after_activation", "input 3 'residual'"}))
      << no_residual.to_string();
  Tensor xt = f64({1, 1, 4}, {1, -2, 3, -4}), wt = f64({1, 1, 1}, {1});
  Tensor rt = f64({1, 1, 4}, {0, 0, 0, 0});
  auto no_activation = run_op("Conv", {xt, wt, Tensor(), rt},
                              attrs({{"kiln_residual_after_activation", int64_t{1}}}));
  EXPECT_TRUE(has_error(no_activation.status(), StatusCode::kInvalidArgument,
                        {"kiln_residual_after_activation", "kiln_activation"}))
      << no_activation.status().to_string();
  auto two = run_op("Conv", {xt, wt, Tensor(), rt},
                    attrs({{"kiln_activation", std::string("relu")},
                           {"kiln_residual_after_activation", int64_t{2}}}));
  EXPECT_TRUE(has_error(two.status(), StatusCode::kInvalidArgument,
                        {"kiln_residual_after_activation", "0 or 1", "2"}))
      << two.status().to_string();
}

// GELU fuses into MatMul only: a Conv that names it is refused, naming the attribute.
TEST(Conv, RefusesAFusedGelu) {
  Tensor x = f64({1, 1, 4}, {1, 2, 3, 4});
  Tensor w = f64({1, 1, 2}, {1, 1});
  for (const char* form : {"gelu", "gelu_tanh"}) {
    auto y = run_op("Conv", {x, w}, attrs({{"kiln_activation", std::string(form)}}));
    EXPECT_TRUE(
        has_error(y.status(), StatusCode::kUnimplemented, {"kiln_activation", form, "MatMul only"}))
        << y.status().to_string();
  }
}

TEST(Conv, Float16AndAutoPadSameLower) {
  std::vector<uint16_t> xs, ws;
  for (float v : {1.f, 2.f, 3.f, 4.f}) xs.push_back(float_to_half_bits(v));
  for (float v : {1.f, 1.f}) ws.push_back(float_to_half_bits(v));
  Tensor x = make_tensor(DType::kF16, {1, 1, 4}, xs);
  Tensor w = make_tensor(DType::kF16, {1, 1, 2}, ws);
  auto y = run_op("Conv", {x, w}, attrs({{"auto_pad", std::string("SAME_LOWER")}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  // Total pad 1, at the beginning: [0+1, 1+2, 2+3, 3+4].
  std::vector<float> got;
  for (uint16_t h : values_of<uint16_t>((*y)[0])) got.push_back(half_bits_to_float(h));
  EXPECT_EQ(got, (std::vector<float>{1, 3, 5, 7}));
}

TEST(ConvInteger, SubtractsZeroPoints) {
  // ONNX ConvInteger example: x = 2..10 (3x3), w all 1, x_zero_point 1 -> 2x2 sums of (x - 1).
  std::vector<uint8_t> xs;
  for (uint8_t v = 2; v <= 10; ++v) xs.push_back(v);
  Tensor x = u8({1, 1, 3, 3}, xs);
  Tensor w = u8({1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor z = u8({}, {1});
  auto y = run_op("ConvInteger", {x, w, z});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].dtype(), DType::kI32);
  EXPECT_EQ(values_of<int32_t>((*y)[0]), (std::vector<int32_t>{12, 16, 24, 28}));
}

TEST(ConvTranspose, OneDAndStridesWithPads) {
  // ONNX doc example: x = [0, 1, 2], W all ones, 2 output channels.
  auto y = run_op("ConvTranspose", {f32({1, 1, 3}, {0, 1, 2}), f32({1, 2, 3}, {1, 1, 1, 1, 1, 1})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{1, 2, 5}));
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{0, 1, 3, 3, 2, 0, 1, 3, 3, 2}));
  // Stride 2 with one pad each side: full output [0,0,1,1,3,2,2], cropped to [0,1,1,3,2].
  auto p = run_op("ConvTranspose", {f32({1, 1, 3}, {0, 1, 2}), f32({1, 1, 3}, {1, 1, 1})},
                  attrs({{"strides", Ints{2}}, {"pads", Ints{1, 1}}}));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(values_of<float>((*p)[0]), (std::vector<float>{0, 1, 1, 3, 2}));
}

TEST(ConvTranspose, OutputShapePadsZerosAtTheEnd) {
  // Full output 7 long; output_shape 8 adds a zero at the end, output_shape 5 crops 1 + 1.
  Tensor x = f32({1, 1, 3}, {0, 1, 2});
  Tensor w = f32({1, 1, 3}, {1, 1, 1});
  auto y =
      run_op("ConvTranspose", {x, w}, attrs({{"strides", Ints{2}}, {"output_shape", Ints{8}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{0, 0, 1, 1, 3, 2, 2, 0}));
  auto c =
      run_op("ConvTranspose", {x, w}, attrs({{"strides", Ints{2}}, {"output_shape", Ints{5}}}));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(values_of<float>((*c)[0]), (std::vector<float>{0, 1, 1, 3, 2}));
}

TEST(ConvTranspose, GroupedWithBias) {
  // Two groups, one input and one output channel each, 1x1 kernels: y[m] = w[m] * x[m] + b[m].
  auto y = run_op("ConvTranspose",
                  {f64({1, 2, 1, 2}, {1, 2, 3, 4}), f64({2, 1, 1, 1}, {10, 100}), f64({2}, {1, 2})},
                  attrs({{"group", int64_t{2}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<double>((*y)[0]), (std::vector<double>{11, 21, 302, 402}));
}

TEST(ConvTranspose, SymbolicShapesAndBadAttributes) {
  std::vector<ValueType> out;
  ASSERT_TRUE(infer("ConvTranspose",
                    {{DType::kF32, {sym("N"), 1, sym("H")}}, {DType::kF32, {1, 4, 3}}},
                    attrs({{"strides", Ints{2}}, {"output_padding", Ints{1}}}), &out)
                  .ok());
  EXPECT_EQ(shape_to_string(out[0].shape), "[N,4,2*H + 2]");
  Status s = infer("ConvTranspose", {{DType::kF32, {1, 1, 3}}, {DType::kF32, {1, 4, 3}}},
                   attrs({{"output_padding", Ints{1}}}), &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'output_padding'"), std::string::npos) << s.to_string();
  s = infer("ConvTranspose", {{DType::kF32, {1, 2, 3}}, {DType::kF32, {1, 4, 3}}}, {}, &out);
  EXPECT_NE(s.message().find("input 1 'W' dim 0"), std::string::npos) << s.to_string();
}

TEST(MaxPool, IndicesInBothStorageOrders) {
  Tensor x = f32({1, 1, 5, 5}, iota(25));
  auto y =
      run_op("MaxPool", {x}, attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}), 2);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{6, 8, 16, 18}));
  EXPECT_EQ((*y)[1].dtype(), DType::kI64);
  EXPECT_EQ(values_of<int64_t>((*y)[1]), (std::vector<int64_t>{6, 8, 16, 18}));
  auto c = run_op(
      "MaxPool", {x},
      attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"storage_order", int64_t{1}}}),
      2);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  // Column-major: (h, w) = (1, 3) is 3 * 5 + 1 = 16.
  EXPECT_EQ(values_of<int64_t>((*c)[1]), (std::vector<int64_t>{6, 16, 8, 18}));
}

TEST(MaxPool, Uint8WithPadsAndNaNPropagation) {
  auto y = run_op("MaxPool", {u8({1, 1, 3}, {5, 200, 7})},
                  attrs({{"kernel_shape", Ints{2}}, {"pads", Ints{1, 1}}}));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<uint8_t>((*y)[0]), (std::vector<uint8_t>{5, 200, 200, 7}));
  auto n = run_op("MaxPool", {f32({1, 1, 4}, {1, NAN, 3, 4})}, attrs({{"kernel_shape", Ints{2}}}));
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  auto v = values_of<float>((*n)[0]);
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  EXPECT_EQ(v[2], 4.f);
}

TEST(AveragePool, CountIncludePadAndThreeD) {
  Tensor x = f64({1, 1, 3}, {3, 6, 9});
  auto ex = run_op("AveragePool", {x}, attrs({{"kernel_shape", Ints{2}}, {"pads", Ints{1, 1}}}));
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  EXPECT_EQ(values_of<double>((*ex)[0]), (std::vector<double>{3, 4.5, 7.5, 9}));
  auto in = run_op(
      "AveragePool", {x},
      attrs({{"kernel_shape", Ints{2}}, {"pads", Ints{1, 1}}, {"count_include_pad", int64_t{1}}}));
  ASSERT_TRUE(in.ok()) << in.status().to_string();
  EXPECT_EQ(values_of<double>((*in)[0]), (std::vector<double>{1.5, 4.5, 7.5, 4.5}));
  auto d3 = run_op("AveragePool", {f32({1, 1, 2, 2, 2}, iota(8))},
                   attrs({{"kernel_shape", Ints{2, 2, 2}}}));
  ASSERT_TRUE(d3.ok()) << d3.status().to_string();
  EXPECT_EQ(values_of<float>((*d3)[0]), (std::vector<float>{3.5f}));
}

TEST(GlobalPools, AnyRank) {
  Tensor x = f32({1, 2, 2, 1, 2}, {1, 2, 3, 4, -1, -2, -3, -4});
  auto avg = run_op("GlobalAveragePool", {x});
  ASSERT_TRUE(avg.ok()) << avg.status().to_string();
  EXPECT_EQ((*avg)[0].shape(), (ConcreteShape{1, 2, 1, 1, 1}));
  EXPECT_EQ(values_of<float>((*avg)[0]), (std::vector<float>{2.5f, -2.5f}));
  auto mx = run_op("GlobalMaxPool", {x});
  ASSERT_TRUE(mx.ok()) << mx.status().to_string();
  EXPECT_EQ(values_of<float>((*mx)[0]), (std::vector<float>{4, -1}));
  auto lp = run_op("GlobalLpPool", {f32({1, 1, 2}, {3, 4})});
  ASSERT_TRUE(lp.ok()) << lp.status().to_string();
  EXPECT_EQ(values_of<float>((*lp)[0]), (std::vector<float>{5}));
}

TEST(Pools, SymbolicShapesAndBadInputs) {
  std::vector<ValueType> out;
  ASSERT_TRUE(infer("MaxPool", {{DType::kF32, {sym("N"), 3, sym("H"), 8}}},
                    attrs({{"kernel_shape", Ints{3, 3}},
                           {"strides", Ints{2, 2}},
                           {"pads", Ints{1, 1, 1, 1}}}),
                    &out, 2)
                  .ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].shape[2], sym("H").ceil_div(2));
  EXPECT_EQ(out[1].dtype, DType::kI64);
  Status s =
      infer("AveragePool", {{DType::kU8, {1, 1, 4}}}, attrs({{"kernel_shape", Ints{2}}}), &out);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  s = infer("MaxPool", {{DType::kF32, {1, 1, 4, 4, 4, 4}}},
            attrs({{"kernel_shape", Ints{2, 2, 2, 2}}}), &out);
  EXPECT_NE(s.message().find("rank 3 to 5"), std::string::npos) << s.to_string();
  s = infer("LpPool", {{DType::kF32, {1, 1, 4}}},
            attrs({{"kernel_shape", Ints{2}}, {"p", int64_t{0}}}), &out);
  EXPECT_NE(s.message().find("attribute 'p'"), std::string::npos) << s.to_string();
}

// Pooling with ceil_mode on a symbolic dim: the output size expression (which drops a last window
// that would start in the end padding) equals the concrete rule at every size.
TEST(WindowGeometry, CeilModeOnSymbolicDimsMatchesConcreteSizes) {
  const DimExpr h = DimExpr::symbol("H");
  for (int64_t kernel : {1, 2, 3}) {
    for (int64_t stride : {1, 2, 3, 4}) {
      for (int64_t pad_begin : {0, 1}) {
        for (int64_t pad_end : {0, 1, 2}) {
          if (pad_begin >= kernel || pad_end >= kernel) continue;
          Attributes a;
          a.set("kernel_shape", std::vector<int64_t>{kernel});
          a.set("strides", std::vector<int64_t>{stride});
          a.set("pads", std::vector<int64_t>{pad_begin, pad_end});
          a.set("ceil_mode", int64_t{1});
          WindowOptions options;
          options.allow_ceil_mode = true;
          auto g = parse_window_geometry(a, 1, options);
          ASSERT_TRUE(g.ok()) << g.status().to_string();
          auto symbolic = window_output_dims(*g, std::vector<DimExpr>{h});
          ASSERT_TRUE(symbolic.ok()) << symbolic.status().to_string();
          for (int64_t size = kernel; size <= 13; ++size) {
            auto concrete = window_output_dims(*g, std::vector<DimExpr>{DimExpr(size)});
            ASSERT_TRUE(concrete.ok()) << concrete.status().to_string();
            EXPECT_EQ((*symbolic)[0].evaluate({{"H", size}}).value(), (*concrete)[0])
                << "kernel " << kernel << " stride " << stride << " pads " << pad_begin << ","
                << pad_end << " size " << size << ": " << (*symbolic)[0].to_string();
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::kernels
