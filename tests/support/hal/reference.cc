#include "tests/support/hal/reference.h"

#include <cmath>

#include "tests/support/graph_eval/op_graph.h"
#include "tests/support/tensors.h"

namespace kiln::testing {

Tensor reference(const std::string& op_type, const std::vector<Tensor>& inputs,
                 const Attributes& attributes) {
  OpGraph graph(op_type);
  std::vector<Tensor> present;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].element_count() == 0 && inputs[i].shape().empty() &&
        inputs[i].data() == nullptr) {
      graph.absent();
      continue;
    }
    graph.input("x" + std::to_string(i), inputs[i].dtype(), shape_from_concrete(inputs[i].shape()));
    present.push_back(inputs[i]);
  }
  for (const auto& [name, value] : attributes.all()) graph.attr(name, value);
  auto out = graph.run(std::move(present));
  EXPECT_TRUE(out.ok()) << op_type << ": " << out.status().to_string();
  if (!out.ok() || out->empty()) return Tensor();
  return (*out)[0];
}

namespace {

// A Clip bound in x's dtype (Clip's min and max have its type).
Tensor bound(const Tensor& x, double v) {
  return make_tensor(x.dtype(), {}, std::vector<double>{v});
}

}  // namespace

Tensor reference_activation(const Tensor& x, const kernels::FusedActivation& activation) {
  using Kind = kernels::FusedActivation::Kind;
  switch (activation.kind) {
    case Kind::kNone: return x;
    case Kind::kRelu: return reference("Relu", {x});
    case Kind::kClip:
      return reference("Clip", {x, std::isinf(activation.min) ? Tensor() : bound(x, activation.min),
                                std::isinf(activation.max) ? Tensor() : bound(x, activation.max)});
    case Kind::kLeakyRelu: {
      Attributes a;
      a.set("alpha", activation.alpha);
      return reference("LeakyRelu", {x}, a);
    }
    case Kind::kSilu: return reference("Mul", {x, reference("Sigmoid", {x})});
    case Kind::kMish: return reference("Mul", {x, reference("Tanh", {reference("Softplus", {x})})});
    case Kind::kGelu:
    case Kind::kGeluTanh: {
      Attributes a;
      a.set("approximate", std::string(activation.kind == Kind::kGelu ? "none" : "tanh"));
      return reference("Gelu", {x}, a);
    }
  }
  return x;
}

Tensor ref_conv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                const ConvRef& p) {
  std::vector<int64_t> pads = p.pads_begin;
  pads.insert(pads.end(), p.pads_end.begin(), p.pads_end.end());
  Attributes a;
  a.set("strides", p.strides);
  a.set("pads", pads);
  a.set("dilations", p.dilations);
  a.set("group", p.group);
  std::vector<Tensor> inputs{x, w};
  if (bias != nullptr) inputs.push_back(*bias);
  Tensor y = reference("Conv", inputs, a);
  if (p.residual_after_activation) {
    y = reference_activation(y, p.activation);
    return residual != nullptr ? reference("Add", {y, *residual}) : y;
  }
  if (residual != nullptr) y = reference("Add", {y, *residual});
  return reference_activation(y, p.activation);
}

Tensor ref_pool(const Tensor& x, const PoolRef& p) {
  const size_t r = p.kernel.size();
  const std::vector<int64_t> ones(r, 1), zeros(r, 0);
  const std::vector<int64_t>& strides = p.strides.empty() ? ones : p.strides;
  const std::vector<int64_t>& dilations = p.dilations.empty() ? ones : p.dilations;
  const std::vector<int64_t>& begin = p.pads_begin.empty() ? zeros : p.pads_begin;
  const std::vector<int64_t>& end = p.pads_end.empty() ? zeros : p.pads_end;
  std::vector<int64_t> pads = begin;
  pads.insert(pads.end(), end.begin(), end.end());
  bool ceil = false;
  for (size_t i = 0; i < r; ++i) {
    const int64_t span =
        x.shape()[2 + i] + begin[i] + end[i] - (dilations[i] * (p.kernel[i] - 1) + 1);
    if (span / strides[i] + 1 != p.out[2 + i]) ceil = true;
  }
  Attributes a;
  a.set("kernel_shape", p.kernel);
  a.set("strides", strides);
  a.set("pads", pads);
  a.set("dilations", dilations);
  if (ceil) a.set("ceil_mode", int64_t{1});
  if (!p.max) a.set("count_include_pad", int64_t{p.count_include_pad ? 1 : 0});
  Tensor y = reference(p.max ? "MaxPool" : "AveragePool", {x}, a);
  EXPECT_EQ(y.shape(), p.out);
  return y;
}

Tensor ref_batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean,
                      const Tensor& var, double eps, bool relu) {
  Tensor y =
      reference("BatchNormalization", {x, scale, bias, mean, var}, attrs({{"epsilon", eps}}));
  return relu ? reference("Relu", {y}) : y;
}

Tensor ref_binary(char op, const Tensor& a, const Tensor& b) {
  const char* type = op == '+' ? "Add" : op == '-' ? "Sub" : op == '*' ? "Mul" : "Div";
  return reference(type, {a, b});
}

Tensor ref_gemm(const Tensor& a, const Tensor& b, const Tensor* c, double alpha, double beta,
                bool trans_a, bool trans_b) {
  std::vector<Tensor> inputs{a, b};
  if (c != nullptr) inputs.push_back(*c);
  return reference("Gemm", inputs,
                   attrs({{"alpha", alpha},
                          {"beta", beta},
                          {"transA", int64_t{trans_a ? 1 : 0}},
                          {"transB", int64_t{trans_b ? 1 : 0}}}));
}

Tensor ref_matmul(const Tensor& a, const Tensor& b) { return reference("MatMul", {a, b}); }

Tensor ref_softmax(const Tensor& x, int64_t axis) {
  return reference("Softmax", {x}, attrs({{"axis", axis}}));
}

Tensor ref_relu(const Tensor& x) { return reference("Relu", {x}); }

}  // namespace kiln::testing
