#include "kiln/hal/program.h"

#include <fmt/format.h>

#include <vector>

#include "kiln/base/checked_math.h"

namespace kiln::hal {

const char* value_role_name(ValueRole role) {
  switch (role) {
    case ValueRole::kInput: return "graph input";
    case ValueRole::kOutput: return "graph output";
    case ValueRole::kConstant: return "constant";
    case ValueRole::kIntermediate: return "intermediate";
  }
  return "value";
}

size_t plain_bytes(const ValueSpec& value) {
  auto count = checked_product(value.shape);
  if (!count) return 0;
  auto bytes = checked_mul(*count, static_cast<int64_t>(dtype_size(value.dtype)));
  return bytes ? static_cast<size_t>(*bytes) : 0;
}

StatusOr<std::optional<std::vector<double>>> constant_doubles(const ValueSpec& value) {
  using Doubles = std::optional<std::vector<double>>;
  const std::optional<int64_t> count = checked_product(value.shape);
  if (count && *count == 0) return Doubles();
  if (value.role != ValueRole::kConstant || value.constant == nullptr || !count) {
    return unimplemented("'{}' is computed at run time", value.name);
  }
  std::vector<double> values(static_cast<size_t>(*count));
  for (int64_t k = 0; k < *count; ++k) values[k] = element_as_double(*value.constant, k);
  return Doubles(std::move(values));
}

Status check_dispatch_indices(const DispatchSpec& d, size_t value_count) {
  for (size_t i = 0; i < d.inputs.size(); ++i) {
    if (d.inputs[i] < -1 || d.inputs[i] >= static_cast<int32_t>(value_count)) {
      return invalid_argument("input {} refers to value {}, the program has {}", i, d.inputs[i],
                              value_count);
    }
  }
  for (size_t i = 0; i < d.outputs.size(); ++i) {
    if (d.outputs[i] < 0 || d.outputs[i] >= static_cast<int32_t>(value_count)) {
      return invalid_argument("output {} refers to value {}, the program has {}", i, d.outputs[i],
                              value_count);
    }
  }
  return ok_status();
}

namespace {

// The checks of one dispatch, given which values are available before it.
Status check_dispatch(const ProgramSpec& spec, const DispatchSpec& d,
                      const std::vector<bool>& available) {
  KILN_RETURN_IF_ERROR(check_dispatch_indices(d, spec.values.size()));
  for (size_t i = 0; i < d.inputs.size(); ++i) {
    if (d.inputs[i] >= 0 && !available[d.inputs[i]]) {
      return invalid_argument("input {} '{}' is read before any dispatch produces it", i,
                              spec.values[d.inputs[i]].name);
    }
  }
  for (size_t i = 0; i < d.outputs.size(); ++i) {
    const ValueSpec& v = spec.values[d.outputs[i]];
    if (v.role != ValueRole::kIntermediate && v.role != ValueRole::kOutput) {
      return invalid_argument("output {} '{}' is a {} and cannot be written", i, v.name,
                              value_role_name(v.role));
    }
    if (available[d.outputs[i]]) {
      return invalid_argument("output {} '{}' is already produced by an earlier dispatch", i,
                              v.name);
    }
  }
  return ok_status();
}

}  // namespace

Status check_program(const ProgramSpec& spec) {
  const size_t n = spec.values.size();
  std::vector<bool> available(n, false);
  for (size_t v = 0; v < n; ++v) {
    const ValueSpec& value = spec.values[v];
    if (value.role == ValueRole::kConstant && value.constant == nullptr) {
      return invalid_argument("constant '{}' has no data", value.name);
    }
    available[v] = value.role == ValueRole::kInput || value.role == ValueRole::kConstant;
  }
  for (const std::vector<int32_t>* list : {&spec.inputs, &spec.outputs}) {
    for (int32_t v : *list) {
      if (v < 0 || static_cast<size_t>(v) >= n)
        return invalid_argument("graph value {} is out of range", v);
    }
  }
  for (int32_t v : spec.inputs) {
    if (spec.values[v].role != ValueRole::kInput) {
      return invalid_argument("graph input '{}' is a {}", spec.values[v].name,
                              value_role_name(spec.values[v].role));
    }
  }
  for (const DispatchSpec& d : spec.dispatches) {
    Status status = check_dispatch(spec, d, available);
    if (!status.ok()) {
      return std::move(status).with_note(fmt::format("in dispatch '{}' ({})", d.name, d.op_type));
    }
    for (int32_t v : d.outputs) available[v] = true;
  }
  for (int32_t v : spec.outputs) {
    if (!available[v])
      return invalid_argument("graph output '{}' is not produced by any dispatch",
                              spec.values[v].name);
  }
  return ok_status();
}

}  // namespace kiln::hal
