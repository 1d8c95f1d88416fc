// ResNet-50 (v1 layout, as in the ONNX model zoo's resnet50-v1) built in the IR: symbolic shapes
// must flow from [N,3,H,W] to [N,1000], and reference evaluation at batch 1 must be practical.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "tests/support/expect.h"
#include "tests/support/graph_eval/op_graph.h"

namespace kiln::graph_eval {
namespace {

using testing::f32;
using testing::sym;
using Ints = std::vector<int64_t>;

class ResNetBuilder {
 public:
  // With `weights`, parameters are constants with deterministic data; otherwise they are plain
  // typed values (enough for shape inference).
  ResNetBuilder(Shape input, bool weights) : weights_(weights) {
    x_ = g_.add_input("data", DType::kF32, std::move(input));
  }

  ir::Graph build() {
    ir::ValueId h = conv_bn(x_, 3, 64, 7, 2, 3, true);
    h = node("MaxPool", {h},
             {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
    int64_t channels = 64;
    const int64_t blocks[] = {3, 4, 6, 3};
    for (int stage = 0; stage < 4; ++stage) {
      int64_t width = 64 << stage;
      for (int64_t b = 0; b < blocks[stage]; ++b) {
        int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
        ir::ValueId shortcut = h;
        if (b == 0) shortcut = conv_bn(h, channels, width * 4, 1, stride, 0, false);
        ir::ValueId y = conv_bn(h, channels, width, 1, stride, 0, true);
        y = conv_bn(y, width, width, 3, 1, 1, true);
        y = conv_bn(y, width, width * 4, 1, 1, 0, false);
        y = node("Add", {y, shortcut}, {});
        h = node("Relu", {y}, {});
        channels = width * 4;
      }
    }
    h = node("GlobalAveragePool", {h}, {});
    h = node("Reshape", {h, constant("shape", DType::kI64, {2}, {0, -1})}, {});
    ir::ValueId fc_w = param({1000, 2048}, 2048);
    ir::ValueId fc_b = param({1000}, 0);
    h = node("Gemm", {h, fc_w, fc_b}, {{"transB", int64_t{1}}});
    g_.add_output(h);
    return std::move(g_);
  }

 private:
  ir::ValueId conv_bn(ir::ValueId x, int64_t in, int64_t out, int64_t k, int64_t stride,
                      int64_t pad, bool relu) {
    ir::ValueId w = param({out, in, k, k}, in * k * k);
    ir::ValueId y = node("Conv", {x, w},
                         {{"kernel_shape", Ints{k, k}},
                          {"strides", Ints{stride, stride}},
                          {"pads", Ints{pad, pad, pad, pad}}});
    ir::ValueId scale = constant("scale", DType::kF32, {out}, std::vector<double>(out, 1.0));
    ir::ValueId bias = param({out}, 0);
    ir::ValueId mean = param({out}, 0);
    ir::ValueId var = constant("var", DType::kF32, {out}, std::vector<double>(out, 1.0));
    y = node("BatchNormalization", {y, scale, bias, mean, var}, {{"epsilon", 1e-5}});
    return relu ? node("Relu", {y}, {}) : y;
  }

  ir::ValueId constant(const std::string& base, DType dtype, ConcreteShape shape,
                       const std::vector<double>& values) {
    return g_.add_constant(g_.unique_value_name(base),
                           testing::make_tensor(dtype, std::move(shape), values));
  }

  // Weights scaled by 1/sqrt(fan_in) keep activations O(1) through 50 layers.
  ir::ValueId param(ConcreteShape shape, int64_t fan_in) {
    std::string name = g_.unique_value_name("p");
    if (!weights_) return g_.add_value({name, DType::kF32, shape_from_concrete(shape), {}, {}});
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    double scale = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.01;
    std::vector<double> values = testing::pattern(
        count, 7919, static_cast<int64_t>(g_.values().size()), 101, 50.0 / scale / 1.5);
    return g_.add_constant(name, f32(std::move(shape), values));
  }

  ir::ValueId node(const char* op, std::vector<ir::ValueId> inputs,
                   std::vector<std::pair<std::string, Attribute>> attrs) {
    std::string name = fmt::format("{}{}", op, g_.nodes().size());
    ir::ValueId out = g_.add_value({name + "_out", DType::kF32, {}, {}, {}});
    ir::Node n{name, op, std::move(inputs), {out}, {}, {}};
    for (auto& [k, v] : attrs) n.attributes.set(k, v);
    g_.add_node(std::move(n));
    return out;
  }

  ir::Graph g_;
  ir::ValueId x_;
  bool weights_;
};

TEST(ResNet50, SymbolicBatchFlowsToTheLogits) {
  ir::Graph g = ResNetBuilder({sym("N"), 3, 224, 224}, false).build();
  EXPECT_TRUE(unsupported_ops(g).empty());
  ASSERT_TRUE(infer_graph(g).ok()) << infer_graph(g).to_string();
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[0]).shape), "[N,1000]");
  // The last stage runs at 7x7.
  const ir::Node& gap = *std::find_if(g.nodes().begin(), g.nodes().end(), [](const ir::Node& n) {
    return n.op_type == "GlobalAveragePool";
  });
  EXPECT_EQ(shape_to_string(g.value(gap.inputs[0]).shape), "[N,2048,7,7]");
}

TEST(ResNet50, SymbolicImageSizeFlowsToo) {
  ir::Graph g = ResNetBuilder({sym("N"), 3, sym("H"), sym("W")}, false).build();
  ASSERT_TRUE(infer_graph(g).ok()) << infer_graph(g).to_string();
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[0]).shape), "[N,1000]");
  const ir::Node& gap = *std::find_if(g.nodes().begin(), g.nodes().end(), [](const ir::Node& n) {
    return n.op_type == "GlobalAveragePool";
  });
  const Shape& last = g.value(gap.inputs[0]).shape;
  // Five stride-2 stages: 224 -> 7, 225 -> 8, 100 -> 4.
  for (auto [h, expected] : {std::pair<int64_t, int64_t>{224, 7}, {225, 8}, {100, 4}, {32, 1}}) {
    EXPECT_EQ(last[2].evaluate({{"H", h}}).value(), expected) << h << ": " << last[2].to_string();
  }
}

// Timing check for the reference path, run by hand:
//   kiln_ops_test --gtest_also_run_disabled_tests --gtest_filter='*ResNet50*Evaluate*'
TEST(ResNet50, DISABLED_EvaluatesAtBatch1) {
  ir::Graph g = ResNetBuilder({sym("N"), 3, 224, 224}, true).build();
  ASSERT_TRUE(infer_graph(g).ok());
  Tensor x = f32({1, 3, 224, 224}, testing::pattern(3 * 224 * 224, 31, 7, 97, 48.0));
  auto start = std::chrono::steady_clock::now();
  auto out = evaluate_graph(g, std::vector<Tensor>{x});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ((*out)[0].shape(), (ConcreteShape{1, 1000}));
  for (float v : (*out)[0].values<float>()) ASSERT_TRUE(std::isfinite(v));
  std::printf("ResNet-50 reference evaluation at batch 1: %.2f s\n", seconds);
}

}  // namespace
}  // namespace kiln::graph_eval
