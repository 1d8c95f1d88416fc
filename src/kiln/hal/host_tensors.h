// Host tensors in and out of a run. HostTensorBinding binds a run's graph inputs and outputs to
// host tensors: where the device addresses host memory (Allocator::wrap_host: cpu, null) the
// tensor's own bytes are bound, with no copy; otherwise each gets a device-local buffer, inputs
// are written to it before the run and outputs read back after it (Queue::write / read).
//
// run_on_host runs a prepared executable on host tensors alone, with every intermediate in its own
// place of one arena (no reuse): for tests and for re-running one dispatch (triage); the runtime
// plans its arena instead (runtime/memory_planner.h).
#pragma once

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/hal/device.h"

namespace kiln::hal {

class HostTensorBinding {
 public:
  explicit HostTensorBinding(Device& device) : device_(device) {}

  // Binds `tensor`'s bytes as a graph input (enqueuing the write where a copy is needed). The
  // tensor must stay alive and unchanged until run() returns.
  StatusOr<BufferRef> input(const Tensor& tensor);
  // Binds `tensor`'s bytes as a graph output; run() leaves the results there.
  StatusOr<BufferRef> output(Tensor& tensor);
  // Submits `executable` on the device's queue, then the reads of the outputs, and waits for
  // all of it (Queue::finish).
  Status run(Executable& executable, const RunArgs& args);

 private:
  StatusOr<BufferRef> bind(std::byte* data, size_t bytes);

  Device& device_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::vector<std::pair<Buffer*, Tensor*>> reads_;
};

// Checks host tensors against a program: counts (in spec.inputs / spec.outputs order), dtypes,
// shapes, storage. The errors name the input or output.
Status check_host_tensors(const ProgramSpec& spec, std::span<const Tensor> inputs,
                          std::span<const Tensor> outputs);

// Runs `executable` (prepared from `spec` by `device`) on host tensors: `inputs` in spec.inputs
// order; `outputs` in spec.outputs order, allocated by the caller with the spec's dtypes and
// shapes. Errors: counts, dtypes or shapes that differ from the spec, allocation and run errors.
Status run_on_host(Device& device, Executable& executable, const ProgramSpec& spec,
                   std::span<const Tensor> inputs, std::span<Tensor> outputs,
                   RunObserver* observer = nullptr);

}  // namespace kiln::hal
