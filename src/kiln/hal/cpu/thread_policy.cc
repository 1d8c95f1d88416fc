#include "kiln/hal/cpu/thread_policy.h"

#include <string>

#include "kiln/base/checked_math.h"
#include "kiln/kernels/kernel.h"

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
  auto dims_of = [&](const std::vector<int32_t>& ids) {
    std::vector<const ConcreteShape*> dims;
    for (int32_t v : ids) {
      dims.push_back(v >= 0 && static_cast<size_t>(v) < values.size() ? &values[v].shape : nullptr);
    }
    return dims;
  };
  const Attributes none;
  const double multiply_adds =
      kernels::multiply_adds(d.op_type, d.attributes != nullptr ? *d.attributes : none,
                             dims_of(d.inputs), dims_of(d.outputs));
  double work = 16 * touched + 2 * multiply_adds;
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
