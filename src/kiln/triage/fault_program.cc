#include "kiln/triage/fault_program.h"

#include <fmt/format.h>

#include <limits>

namespace kiln::triage {
namespace {

int64_t element_count(const hal::ValueSpec& value) {
  int64_t count = 1;
  for (int64_t d : value.shape) count *= d;
  return count;
}

StatusOr<Tensor> scalar_f32(float value) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(DType::kF32, {}));
  t.mutable_values<float>()[0] = value;
  return t;
}

float fill_value(FaultSpec::Kind kind) {
  switch (kind) {
    case FaultSpec::Kind::kNan: return std::numeric_limits<float>::quiet_NaN();
    case FaultSpec::Kind::kInf: return std::numeric_limits<float>::infinity();
    default: return 0.0f;
  }
}

}  // namespace

StatusOr<std::unique_ptr<FaultedProgram>> plant_fault(const hal::ProgramSpec& spec,
                                                      const FaultSpec& fault) {
  bool any = false;
  for (size_t d = 0; d < spec.dispatches.size() && !any; ++d) {
    any = fault.matches(spec.dispatches[d], static_cast<int32_t>(d));
  }
  if (!any) return std::unique_ptr<FaultedProgram>();

  auto out = std::make_unique<FaultedProgram>();
  hal::ProgramSpec& program = out->spec;
  program.values = spec.values;
  program.inputs = spec.inputs;
  program.outputs = spec.outputs;
  out->original_values = spec.values.size();
  auto add_constant = [&](Tensor tensor, std::string name) {
    out->constants.push_back(std::move(tensor));
    hal::ValueSpec value;
    value.name = std::move(name);
    value.dtype = out->constants.back().dtype();
    value.shape = out->constants.back().shape();
    value.role = hal::ValueRole::kConstant;
    value.constant = &out->constants.back();
    program.values.push_back(std::move(value));
    return static_cast<int32_t>(program.values.size() - 1);
  };

  for (size_t d = 0; d < spec.dispatches.size(); ++d) {
    const hal::DispatchSpec& original = spec.dispatches[d];
    out->dispatches.emplace_back(1, static_cast<int32_t>(program.dispatches.size()));
    out->output_source.emplace_back(original.outputs.size(), 0);
    program.dispatches.push_back(original);
    if (!fault.matches(original, static_cast<int32_t>(d))) continue;
    const size_t at = program.dispatches.size() - 1;
    for (size_t i = 0; i < original.outputs.size(); ++i) {
      const int32_t o = original.outputs[i];
      const hal::ValueSpec& value = spec.values[o];
      if (value.dtype != DType::kF32 || element_count(value) == 0) continue;
      // The dispatch now writes `r`; the inserted one writes `o` from it.
      hal::ValueSpec before = value;
      before.name = fmt::format("{} (before {})", value.name, kFaultVariable);
      before.role = hal::ValueRole::kIntermediate;
      before.constant = nullptr;
      before.known_value.reset();
      program.values.push_back(std::move(before));
      const auto r = static_cast<int32_t>(program.values.size() - 1);
      program.dispatches[at].outputs[i] = r;

      hal::DispatchSpec corrupt;
      corrupt.name = fmt::format("{} {}={} on '{}'", original.name, kFaultVariable,
                                 fault.kind_text(), value.name);
      corrupt.attributes = &out->no_attributes;
      corrupt.outputs = {o};
      if (fault.kind == FaultSpec::Kind::kPerturb) {
        KILN_ASSIGN_OR_RETURN(Tensor eps, scalar_f32(static_cast<float>(fault.eps)));
        corrupt.op_type = "Add";
        corrupt.inputs = {r, add_constant(std::move(eps), corrupt.name + " eps")};
      } else {
        KILN_ASSIGN_OR_RETURN(Tensor fill, scalar_f32(fill_value(fault.kind)));
        KILN_ASSIGN_OR_RETURN(
            Tensor shape, Tensor::create(DType::kI64, {static_cast<int64_t>(value.shape.size())}));
        for (size_t k = 0; k < value.shape.size(); ++k)
          shape.mutable_values<int64_t>()[k] = value.shape[k];
        corrupt.op_type = "Expand";
        const int32_t fill_value = add_constant(std::move(fill), corrupt.name + " value");
        corrupt.inputs = {fill_value, add_constant(std::move(shape), corrupt.name + " shape")};
      }
      out->output_source[d][i] = static_cast<int32_t>(out->dispatches[d].size());
      out->dispatches[d].push_back(static_cast<int32_t>(program.dispatches.size()));
      program.dispatches.push_back(std::move(corrupt));
    }
  }
  return out;
}

}  // namespace kiln::triage
