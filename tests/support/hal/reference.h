// Expected values for the backends' tests (the CPU's today), from the float64 reference evaluator
// (graph_eval::evaluate_graph, through OpGraph): never a kernel written again in a test. Each
// function runs the ONNX op(s) a backend dispatch stands for (a Conv with its fused residual Add
// and activation is Conv, Add, then Relu or Clip) on plain row-major tensors, and fails the test
// when the evaluator refuses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/tensor.h"
#include "kiln/kernels/activation.h"

namespace kiln::testing {

// One node of `op_type` on `inputs` (a default-constructed Tensor for an absent input): its first
// output.
Tensor reference(const std::string& op_type, const std::vector<Tensor>& inputs,
                 const Attributes& attributes = {});
// The fused activation as its ONNX op (Relu, Clip, LeakyRelu); x itself for none.
Tensor reference_activation(const Tensor& x, const kernels::FusedActivation& activation);

struct ConvRef {
  std::vector<int64_t> strides, pads_begin, pads_end, dilations;
  int64_t group = 1;
  kernels::FusedActivation activation;
  bool residual_after_activation = false;
};
// Conv (+ Add residual) (+ activation), or with residual_after_activation, Conv (+ activation)
// (+ Add residual).
Tensor ref_conv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                const ConvRef& p);
struct PoolRef {
  bool max = true;  // MaxPool, else AveragePool
  bool count_include_pad = false;
  std::vector<int64_t> kernel, strides, pads_begin, pads_end, dilations;
  ConcreteShape out;  // output dims (N, C, spatial...): ceil_mode when they need it
};
Tensor ref_pool(const Tensor& x, const PoolRef& p);
// BatchNormalization (+ Relu).
Tensor ref_batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean,
                      const Tensor& var, double eps, bool relu);
// op: '+', '-', '*', '/' (Add, Sub, Mul, Div).
Tensor ref_binary(char op, const Tensor& a, const Tensor& b);
Tensor ref_gemm(const Tensor& a, const Tensor& b, const Tensor* c, double alpha, double beta,
                bool trans_a, bool trans_b);
Tensor ref_matmul(const Tensor& a, const Tensor& b);
Tensor ref_softmax(const Tensor& x, int64_t axis);
Tensor ref_relu(const Tensor& x);

}  // namespace kiln::testing
