// Test helpers for the CPU backend: a compact ProgramSpec builder, a runtime-like arena planner
// that overlaps buffers and poisons memory with NaN, random tensors, naive float64 reference
// kernels and comparators.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/tensor.h"
#include "kiln/kernels/activation.h"
#include "kiln/hal/device.h"

namespace kiln::hal::cpu::testing {

Attributes attrs(std::initializer_list<std::pair<std::string, Attribute>> list);

class SpecBuilder {
 public:
  int32_t input(std::string name, ConcreteShape shape, DType dtype = DType::kF32);
  int32_t constant(std::string name, Tensor data);
  int32_t value(std::string name, ConcreteShape shape, DType dtype = DType::kF32);
  int32_t output(std::string name, ConcreteShape shape, DType dtype = DType::kF32);
  void dispatch(std::string name, std::string op_type, std::vector<int32_t> inputs,
                std::vector<int32_t> outputs, Attributes attributes = {});
  ProgramSpec& spec() { return spec_; }

 private:
  int32_t add(std::string name, ConcreteShape shape, DType dtype, ValueRole role);
  ProgramSpec spec_;
  std::deque<Tensor> constants_;
  std::deque<Attributes> attributes_;
};

struct RunOptions {
  bool share_memory = true;  // overlap intermediates whose lifetimes do not overlap
  bool poison = true;        // fill arena and outputs with NaN first
  RunObserver* observer = nullptr;  // passed through RunArgs
};

// Plans an arena like the runtime (64-byte aligned offsets from storage_bytes and lifetimes) and
// runs the executable. Returns the graph outputs.
StatusOr<std::vector<Tensor>> run_program(Executable& exe, const ProgramSpec& spec,
                                          const std::vector<Tensor>& inputs,
                                          RunOptions options = {});
// Arena bytes the last run_program planned (for tests of sharing).
size_t last_arena_bytes();

Tensor random_tensor(ConcreteShape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
Tensor filled(ConcreteShape shape, std::vector<float> values);
// Sample `n` of a tensor (dim 0 slice, keeping a leading dim of 1).
Tensor slice_batch(const Tensor& t, int64_t n);

// Passes iff every |a - e| <= atol + rtol * |e|, with no NaN/Inf in `actual` where `expected` is
// finite; the failure message names the first bad index.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected,
                                     double rtol = 1e-5, double atol = 1e-4);
::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b);

// Naive references, float64 accumulation, plain row-major f32 in and out.
struct ConvRef {
  std::vector<int64_t> strides, pads_begin, pads_end, dilations;
  int64_t group = 1;
  kernels::FusedActivation activation;
};
Tensor ref_conv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                const ConvRef& p);
struct PoolRef {
  bool max = true;
  bool count_include_pad = false;
  std::vector<int64_t> kernel, strides, pads_begin, pads_end, dilations;
  ConcreteShape out;  // output dims (N, C, spatial...)
};
Tensor ref_pool(const Tensor& x, const PoolRef& p);
Tensor ref_batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean,
                      const Tensor& var, double eps, bool relu);
// op: '+', '-', '*', '/'
Tensor ref_binary(char op, const Tensor& a, const Tensor& b);
Tensor ref_gemm(const Tensor& a, const Tensor& b, const Tensor* c, double alpha, double beta,
                bool trans_a, bool trans_b);
Tensor ref_matmul(const Tensor& a, const Tensor& b);
Tensor ref_softmax(const Tensor& x, int64_t axis);
Tensor ref_relu(const Tensor& x);

}  // namespace kiln::hal::cpu::testing
