// Runs one op through the kernels' own entry points, for the kernel tests: run_op plans it with
// plan_concrete (the path every caller shares) and runs the kernel on the given tensors; infer_op
// runs its symbolic shape rule. Tensor builders and checks: tests/support/tensors.h, expect.h.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "kiln/base/half.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/kernel.h"
#include "tests/support/tensors.h"

namespace kiln::testing {

using kernels::ConcreteInput;
using kernels::ConcreteOutput;
using kernels::ConstBuffer;
using kernels::find_op_def;
using kernels::InferArgs;
using kernels::MutableBuffer;
using kernels::OpDef;
using kernels::plan_concrete;
using kernels::Planned;
using kernels::ValueType;

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
  const OpDef* k = find_op_def(op_type);
  if (k == nullptr) return not_found("no kernel {}", op_type);
  std::vector<ConcreteInput> inputs;
  for (const In& in : ins) {
    if (!in.tensor) {
      inputs.push_back({});
    } else {
      inputs.push_back(
          {true, in.tensor->dtype(), in.tensor->shape(), in.constant ? &*in.tensor : nullptr});
    }
  }
  KILN_ASSIGN_OR_RETURN(Planned p, plan_concrete(*k, attributes, inputs, output_count, nullptr));
  std::vector<ConstBuffer> in_buffers;
  for (const In& in : ins) {
    if (!in.tensor)
      in_buffers.push_back({});
    else
      in_buffers.push_back({in.tensor->dtype(), in.tensor->shape(), in.tensor->data()});
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
  const OpDef* k = find_op_def(op_type);
  if (k == nullptr) return not_found("no kernel {}", op_type);
  constants.resize(types.size(), nullptr);
  values.resize(types.size(), nullptr);
  InferArgs args{attributes, types, constants, output_count, {}, values, {}, {}};
  KILN_RETURN_IF_ERROR(k->infer(args));
  return args.outputs;
}

inline ValueType type(DType dtype, Shape shape) { return ValueType{dtype, std::move(shape)}; }

}  // namespace kiln::testing
