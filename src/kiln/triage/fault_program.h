// A program with a fault planted (fault_spec.h), written with ordinary ops so that any backend runs
// it: each f32 output `o` (with elements) of every dispatch the fault selects is renamed to a new
// intermediate `r` that the dispatch writes instead, and a dispatch inserted right after it
// writes `o`:
//   nan, inf, zero:  o = Expand(<NaN | +Inf | 0>, shape(o))   every element set, `r` unread
//   perturb=<eps>:   o = Add(r, (float)eps)                     every element moved by eps
// The original values keep their indices (the new ones are appended), so bindings, storage and
// observers of the original program map one to one; FaultDevice (fault_device.h) does that.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"
#include "kiln/hal/program.h"
#include "kiln/triage/fault_spec.h"

namespace kiln::triage {

struct FaultedProgram {
  hal::ProgramSpec spec;       // the program to prepare; its constants point into `constants`
  size_t original_values = 0;  // values [0, original_values) are the original program's
  // Per original dispatch: its dispatches in `spec`, the original first, then the inserted ones.
  std::vector<std::vector<int32_t>> dispatches;
  // Per original dispatch, per output: which of its dispatches (index into dispatches[d]) writes
  // the output the program sees: 0 for the original, k for the k-th inserted one.
  std::vector<std::vector<int32_t>> output_source;
  std::deque<Tensor> constants;
  Attributes no_attributes;
};

// The program with `fault` planted, or nullopt when it selects no dispatch of `spec` (then
// nothing changes). Errors: allocation failures only.
StatusOr<std::unique_ptr<FaultedProgram>> plant_fault(const hal::ProgramSpec& spec,
                                                      const FaultSpec& fault);

}  // namespace kiln::triage
