// Programs for the backends' tests: SpecBuilder states a hal::ProgramSpec in a
// few lines, and run_program runs a prepared executable the way the runtime does, its arena
// planned by the runtime's own planner (runtime::plan_arena), optionally poisoned with NaN first.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/hal/device.h"

namespace kiln::testing {

class SpecBuilder {
 public:
  int32_t input(std::string name, ConcreteShape shape, DType dtype = DType::kF32);
  int32_t constant(std::string name, Tensor data);
  int32_t value(std::string name, ConcreteShape shape, DType dtype = DType::kF32);
  int32_t output(std::string name, ConcreteShape shape, DType dtype = DType::kF32);
  void dispatch(std::string name, std::string op_type, std::vector<int32_t> inputs,
                std::vector<int32_t> outputs, Attributes attributes = {});
  hal::ProgramSpec& spec() { return spec_; }

 private:
  int32_t add(std::string name, ConcreteShape shape, DType dtype, hal::ValueRole role);
  hal::ProgramSpec spec_;
  std::deque<Tensor> constants_;
  std::deque<Attributes> attributes_;
};

struct RunOptions {
  bool share_memory = true;              // overlap intermediates whose lifetimes do not overlap
  bool poison = true;                    // fill arena and outputs with NaN first
  hal::RunObserver* observer = nullptr;  // passed through RunArgs
};

// Plans an arena as the runtime does (runtime::plan_arena over the executable's storage_bytes and
// storage_shared_with, and the dispatches' lifetimes) and runs the executable. Returns the graph
// outputs.
StatusOr<std::vector<Tensor>> run_program(hal::Executable& exe, const hal::ProgramSpec& spec,
                                          const std::vector<Tensor>& inputs,
                                          RunOptions options = {});
// The same on any device: the arena comes from `device`'s allocator (poisoned through its queue),
// inputs and outputs are bound as the runtime binds them (hal::HostTensorBinding: in place where
// the device addresses host memory, else copied).
StatusOr<std::vector<Tensor>> run_program(hal::Device& device, hal::Executable& exe,
                                          const hal::ProgramSpec& spec,
                                          const std::vector<Tensor>& inputs,
                                          RunOptions options = {});
// Arena bytes the last run_program planned (for tests of sharing).
size_t last_arena_bytes();

}  // namespace kiln::testing
