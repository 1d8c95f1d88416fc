// The null device: a backend that computes nothing, for testing the HAL contract and the plumbing
// around it (`kiln run --device=null`, the runtime's arena and bindings, decorators such as
// triage's fault injection) without a real backend.
//
// What it does, decided and tested (null_device_test.cc):
//   - supports(): accepts every dispatch whose inputs and outputs are in range and not absent
//     outputs; refuses a malformed one with an error naming the dispatch.
//   - prepare(): checks the spec as a backend must (indices, roles, every value produced once
//     before it is read, constants with data, graph outputs produced) and refuses a bad one with
//     the same kind of error as the CPU backend. Every value is plain: storage_bytes() of an
//     intermediate is element count x dtype size.
//   - run(): checks every binding (present, host-visible, large enough) and runs no kernel; it
//     fills every graph output with zero bytes, a deterministic placeholder (0.0 for floats, 0
//     or false otherwise). Intermediates are left as they are. An observer sees every dispatch,
//     in order, with elapsed time 0 and, when it asks, zero-filled outputs.
//   - data_sizes(): refused (unimplemented), naming the dispatch: the null device has no data to
//     size outputs from, so a module with data-dependent sizes stops at its first such stage.
// Buffers are host memory (HostAllocator); the queue completes on the calling thread. The device
// holds no state of its own, so any number of threads may use it at once.
#pragma once

#include <memory>

#include "kiln/hal/device.h"

namespace kiln::hal::null {

// "null (computes nothing; outputs are zeros)". DeviceOptions::threads is accepted and unused;
// errors only for threads < 0.
StatusOr<std::unique_ptr<Device>> create_null_device(const DeviceOptions& options);

}  // namespace kiln::hal::null
