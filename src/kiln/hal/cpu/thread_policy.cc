#include "kiln/hal/cpu/thread_policy.h"

#include <string>

#include "kiln/base/checked_math.h"

namespace kiln::hal::cpu {
namespace {

double elements(const ValueSpec& v) {
  return static_cast<double>(checked_product(v.shape).value_or(0));
}

const ValueSpec* input(const DispatchSpec& d, std::span<const ValueSpec> values, size_t i) {
  if (i >= d.inputs.size() || d.inputs[i] < 0 ||
      static_cast<size_t>(d.inputs[i]) >= values.size()) {
    return nullptr;
  }
  return &values[d.inputs[i]];
}

// Multiply-adds per output element of the ops that reduce: Conv (C/group x kernel window from
// the weights [M, C/group, k...]), MatMul/Gemm (the shared dim of the first operand; Gemm's
// transA is ignored, as the estimate only needs the order of magnitude) and Resize (at least two
// taps on each of two axes when it interpolates).
double macs_per_output(const DispatchSpec& d, std::span<const ValueSpec> values) {
  const std::string& op = d.op_type;
  if (op == "Conv" || op == "ConvTranspose") {
    const ValueSpec* w = input(d, values, 1);
    if (w == nullptr || w->shape.size() < 2) return 0;
    return elements(*w) / static_cast<double>(w->shape[0] > 0 ? w->shape[0] : 1);
  }
  if (op == "Resize") return 4;
  if (op == "MatMul" || op == "Gemm") {
    const ValueSpec* a = input(d, values, 0);
    if (a == nullptr || a->shape.empty()) return 0;
    return static_cast<double>(a->shape.back());
  }
  return 0;
}

}  // namespace

double work_per_sample(const DispatchSpec& d, std::span<const ValueSpec> values) {
  double outputs = 0;
  for (int32_t v : d.outputs) {
    if (v >= 0 && static_cast<size_t>(v) < values.size()) outputs += elements(values[v]);
  }
  double touched = outputs;
  for (size_t i = 0; i < d.inputs.size(); ++i) {
    if (const ValueSpec* v = input(d, values, i)) touched += elements(*v);
  }
  double work = 16 * touched + 2 * outputs * macs_per_output(d, values);
  // One sample: dim 0 of the first output (rank-0 outputs are one sample).
  if (!d.outputs.empty() && d.outputs[0] >= 0 &&
      static_cast<size_t>(d.outputs[0]) < values.size()) {
    const ConcreteShape& shape = values[d.outputs[0]].shape;
    if (!shape.empty() && shape[0] > 1) work /= static_cast<double>(shape[0]);
  }
  return work;
}

int dispatch_threads(const DispatchSpec& d, std::span<const ValueSpec> values, int device_threads) {
  return work_per_sample(d, values) < kSmallDispatchWork ? 1 : device_threads;
}

}  // namespace kiln::hal::cpu
