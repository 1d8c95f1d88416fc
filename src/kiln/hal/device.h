// Hardware abstraction: what the runtime asks of a backend. The runtime evaluates every value's
// concrete shape for the bound symbols and hands the backend a ProgramSpec; the backend chooses
// layouts and kernels (from concrete shapes only, never from whether a dim was symbolic), and
// returns an Executable. The runtime then plans an arena from the Executable's storage needs and
// value lifetimes and calls run().
//
// A backend is a sibling folder of hal/cpu implementing Device and Executable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln::hal {

enum class ValueRole : uint8_t { kInput, kOutput, kConstant, kIntermediate };

struct ValueSpec {
  std::string name;
  DType dtype = DType::kF32;
  ConcreteShape shape;
  ValueRole role = ValueRole::kIntermediate;
  const Tensor* constant = nullptr;  // kConstant: plain row-major data, valid while the spec's
                                     // module is loaded
};

struct DispatchSpec {
  std::string name;
  std::string op_type;
  const Attributes* attributes = nullptr;
  std::vector<int32_t> inputs;   // indices into ProgramSpec::values; -1 for absent
  std::vector<int32_t> outputs;
};

struct ProgramSpec {
  std::vector<ValueSpec> values;
  std::vector<DispatchSpec> dispatches;
  std::vector<int32_t> inputs;   // graph inputs
  std::vector<int32_t> outputs;  // graph outputs
};

struct RunArgs {
  std::byte* arena = nullptr;            // 64-byte aligned
  std::span<const size_t> offsets;       // per value: offset into arena (intermediates only)
  std::span<const Tensor> inputs;        // graph inputs, plain row-major, ProgramSpec order
  std::span<Tensor> outputs;             // graph outputs, allocated by the runtime, plain
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Arena bytes an intermediate value needs in the backend's chosen layout (may exceed
  // element_count * dtype size for padded blocked layouts); 0 for other roles.
  virtual size_t storage_bytes(int32_t value) const = 0;
  // Runs every dispatch in order. Errors name the dispatch.
  virtual Status run(const RunArgs& args) = 0;
};

struct DeviceOptions {
  int threads = 0;  // 0: all cores
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  // Whether the backend can run this dispatch; the error names the unsupported detail.
  virtual Status supports(const DispatchSpec& dispatch, std::span<const ValueSpec> values) const = 0;
  // Builds an executable for concrete shapes. Kernel and layout choices depend only on `spec`.
  virtual StatusOr<std::unique_ptr<Executable>> prepare(const ProgramSpec& spec) = 0;
};

}  // namespace kiln::hal
