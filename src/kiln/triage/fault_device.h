// Fault injection as a device decorator: wraps any hal::Device so that the dispatches a FaultSpec
// selects have their f32 outputs corrupted right after they run (fault_spec.h), on whatever
// backend is underneath. The decorator plants the fault in the program before the wrapped device
// prepares it (fault_program.h: ops the backend runs like any other, so blocked layouts and their
// padding stay the backend's business) and hides the planted dispatches from its callers: the
// executable's values, storage, bindings, observers (dispatch numbers, outputs after the fault,
// elapsed time including it) and describe_dispatch are those of the original program.
//
// A program with no selected dispatch is prepared by the wrapped device untouched: no cost.
// supports, data_sizes and the allocator are the wrapped device's; its queue is wrapped so that a
// submitted faulted executable reaches the wrapped device as the executable it prepared.
//
// Threads: as safe as the wrapped device (hal/device.h). The decorator and its queue hold only the
// fault, which never changes; what a run translates is kept in the executable, which runs one call
// at a time like any.
//
// Users: `KILN_FAULT=... kiln run|bench|triage|test-suite` (the tools read the variable once and
// decorate every device they create), triage's library (TriageOptions::fault).
#pragma once

#include <memory>

#include "kiln/hal/device.h"
#include "kiln/hal/registry.h"
#include "kiln/triage/fault_spec.h"

namespace kiln::triage {

// `device` with `fault` planted in every program it prepares. name() is the wrapped device's.
std::unique_ptr<hal::Device> inject_fault(std::unique_ptr<hal::Device> device, FaultSpec fault);

// A decorator for hal::create_device / runtime::SessionOptions::decorate_device: inject_fault
// with `fault`; an empty decorator when `fault` is nullopt.
hal::DeviceDecorator fault_decorator(std::optional<FaultSpec> fault);

}  // namespace kiln::triage
