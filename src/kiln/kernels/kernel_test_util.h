// Test helpers for the kernel tests: build small tensors, run an op through plan_concrete (the
// path every caller shares), and run infer on symbolic shapes.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "kiln/base/half.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/kernel.h"

namespace kiln::kernels::kernel_testing {

template <typename T>
Tensor make_tensor(DType dtype, ConcreteShape shape, const std::vector<T>& values) {
  Tensor t = Tensor::create(dtype, std::move(shape)).value();
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.element_count());
  auto out = t.mutable_values<T>();
  for (size_t i = 0; i < values.size() && i < out.size(); ++i) out[i] = values[i];
  return t;
}
inline Tensor f32(ConcreteShape shape, const std::vector<float>& v) {
  return make_tensor<float>(DType::kF32, std::move(shape), v);
}
inline Tensor f64(ConcreteShape shape, const std::vector<double>& v) {
  return make_tensor<double>(DType::kF64, std::move(shape), v);
}
inline Tensor i64(ConcreteShape shape, const std::vector<int64_t>& v) {
  return make_tensor<int64_t>(DType::kI64, std::move(shape), v);
}
inline Tensor i32(ConcreteShape shape, const std::vector<int32_t>& v) {
  return make_tensor<int32_t>(DType::kI32, std::move(shape), v);
}
inline Tensor u8(ConcreteShape shape, const std::vector<uint8_t>& v) {
  return make_tensor<uint8_t>(DType::kU8, std::move(shape), v);
}
inline Tensor boolean(ConcreteShape shape, const std::vector<uint8_t>& v) {
  return make_tensor<uint8_t>(DType::kBool, std::move(shape), v);
}

// One input of a test run: a tensor, passed as a constant or not, or absent.
struct In {
  std::optional<Tensor> tensor;
  bool constant = false;
};
inline In value(Tensor t) { return In{std::move(t), false}; }
inline In constant(Tensor t) { return In{std::move(t), true}; }
inline In absent() { return In{}; }

inline StatusOr<std::vector<Tensor>> run_op(std::string_view op_type, const std::vector<In>& ins,
                                            const Attributes& attributes = {},
                                            size_t output_count = 1) {
  const OpKernel* k = find_op_kernel(op_type);
  if (k == nullptr) return not_found("no kernel {}", op_type);
  std::vector<ConcreteInput> inputs;
  for (const In& in : ins) {
    if (!in.tensor) {
      inputs.push_back({});
    } else {
      inputs.push_back({true, in.tensor->dtype(), in.tensor->shape(),
                        in.constant ? &*in.tensor : nullptr});
    }
  }
  KILN_ASSIGN_OR_RETURN(Planned p, plan_concrete(*k, attributes, inputs, output_count, nullptr));
  std::vector<ConstBuffer> in_buffers;
  for (const In& in : ins) {
    if (!in.tensor) in_buffers.push_back({});
    else in_buffers.push_back({in.tensor->dtype(), in.tensor->shape(), in.tensor->data()});
  }
  std::vector<Tensor> outs;
  for (const ConcreteOutput& o : p.outputs) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(o.dtype, o.dims));
    outs.push_back(std::move(t));
  }
  std::vector<MutableBuffer> out_buffers;
  for (Tensor& t : outs) out_buffers.push_back({t.dtype(), t.shape(), t.mutable_data()});
  KILN_RETURN_IF_ERROR(p.kernel->run(in_buffers, out_buffers));
  return outs;
}

// An op with one output, every input a plain (non-constant) tensor.
inline StatusOr<Tensor> run_one(std::string_view op_type, const std::vector<Tensor>& inputs,
                                const Attributes& attributes = {}) {
  std::vector<In> ins;
  for (const Tensor& t : inputs) ins.push_back(value(t));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_op(op_type, ins, attributes, 1));
  return std::move(outs[0]);
}

// Symbolic infer. `values`: per input, known element values (a shape computation), or null.
inline StatusOr<std::vector<ValueType>> infer_op(
    std::string_view op_type, const std::vector<std::optional<ValueType>>& types,
    const Attributes& attributes = {}, size_t output_count = 1,
    std::vector<const Tensor*> constants = {},
    std::vector<const std::vector<DimExpr>*> values = {}) {
  const OpKernel* k = find_op_kernel(op_type);
  if (k == nullptr) return not_found("no kernel {}", op_type);
  constants.resize(types.size(), nullptr);
  values.resize(types.size(), nullptr);
  InferArgs args{attributes, types, constants, output_count, {}, values, {}, {}};
  KILN_RETURN_IF_ERROR(k->infer(args));
  return args.outputs;
}

inline Attributes attrs(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes a;
  for (const auto& [name, value] : list) a.set(name, value);
  return a;
}

inline ValueType type(DType dtype, Shape shape) { return ValueType{dtype, std::move(shape)}; }
inline DimExpr sym(const char* name) { return DimExpr::symbol(name); }

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  auto v = t.values<T>();
  return std::vector<T>(v.begin(), v.end());
}

// The elements of a result that must have succeeded.
template <typename T>
std::vector<T> values_of(const StatusOr<Tensor>& t) {
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (!t.ok()) return {};
  return values_of<T>(*t);
}

// The error message of a failed result, or "" when it succeeded.
template <typename R>
std::string error_of(const StatusOr<R>& r) {
  return r.ok() ? std::string() : r.status().message();
}

inline bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

}  // namespace kiln::kernels::kernel_testing
