// ProgramSpec: what the runtime hands a backend to prepare. The runtime evaluates every value's
// concrete shape for the bound symbols; the backend chooses layouts and kernels from concrete
// shapes only, never from whether a dim was symbolic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln::hal {

enum class ValueRole : uint8_t { kInput, kOutput, kConstant, kIntermediate };
// "graph input", "graph output", "constant", "intermediate": for errors.
const char* value_role_name(ValueRole role);

struct ValueSpec {
  std::string name;
  DType dtype = DType::kF32;
  ConcreteShape shape;
  ValueRole role = ValueRole::kIntermediate;
  const Tensor* constant = nullptr;  // kConstant: plain row-major host data, valid while an
                                     // executable prepared from the spec lives
  // A non-constant integer value whose elements the module's shape program knows (e.g. the
  // result of Shape(x)), evaluated for this binding: lets a backend plan ops that need those
  // values at prepare time (Reshape's shape). The value is still computed by its dispatch.
  std::optional<Tensor> known_value;
};

struct DispatchSpec {
  std::string name;
  std::string op_type;
  const Attributes* attributes = nullptr;
  std::vector<int32_t> inputs;  // indices into ProgramSpec::values; -1 for absent
  std::vector<int32_t> outputs;
  // Where the dispatch came from, for diagnostics and fault selection (KILN_FAULT,
  // triage/fault_device.h): its index in the module (-1: its position in
  // ProgramSpec::dispatches) and the ONNX node names fused into it. A program that runs one
  // dispatch of a module alone keeps both.
  int32_t module_index = -1;
  std::vector<std::string> origins;
  // The values of the dispatch's data-dependent sizes (module::Dispatch::data_symbols), which
  // the runtime bound with Device::data_sizes before preparing it; empty for other dispatches.
  std::vector<int64_t> data_sizes;
};

struct ProgramSpec {
  std::vector<ValueSpec> values;
  std::vector<DispatchSpec> dispatches;
  std::vector<int32_t> inputs;   // graph inputs
  std::vector<int32_t> outputs;  // graph outputs
};

// Bytes of a value in plain row-major layout (element count x dtype size); 0 when the count
// overflows.
size_t plain_bytes(const ValueSpec& value);

// The elements of a constant value as doubles (a Resize's scales or roi, read when a backend
// plans the op); nullopt when it has none; an error naming it when it is computed at run time.
StatusOr<std::optional<std::vector<double>>> constant_doubles(const ValueSpec& value);

// Every input index of `dispatch` is -1 or a value of a program with `value_count` values, and
// every output index a value. Errors name the input or output (callers add the dispatch).
Status check_dispatch_indices(const DispatchSpec& dispatch, size_t value_count);

// What every backend checks of a program before preparing it: indices in range, graph inputs
// that are inputs, constants with data, every value produced once before it is read and only
// intermediates and graph outputs written, every graph output produced. Errors name the value
// and, for a dispatch's, the dispatch ("in dispatch 'x' (Op)").
Status check_program(const ProgramSpec& spec);

}  // namespace kiln::hal
