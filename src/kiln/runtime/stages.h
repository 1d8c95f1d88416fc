// Stages of a module run. A dispatch whose output sizes depend on data (one with data_symbols:
// NonZero, Compress, TopK with a computed k) can only be planned once the values it reads exist,
// so the session runs the module in stages: each stage starts at such a dispatch (or at the
// first dispatch) and runs up to the next one. Values that cross a stage boundary are handed
// over as plain tensors. A module without data symbols is one stage.
//
// A host dispatch (module::is_host_dispatch) is a stage of its own: the run state runs it on the
// host, a control-flow dispatch (one with bodies: Loop, Scan, If, SequenceMap;
// module::Dispatch::bodies) through kiln/base/control_flow.h with each body as a nested program
// on the same device, a sequence or optional op through kiln/base/sequence_ops.h (sequences and
// optionals live on the host), and binds the dispatch's data symbols from the outputs' dims.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/module/module.h"

namespace kiln::runtime {

struct Stage {
  int32_t first = 0;  // module dispatches [first, end)
  int32_t end = 0;
  // Module values the stage holds, ascending; a value's position here is its index in the
  // stage's hal::ProgramSpec.
  std::vector<int32_t> values;
  // Values the stage reads from outside it (graph inputs, values of earlier stages), ascending.
  std::vector<int32_t> inputs;
  // Values it computes that later stages or the graph outputs read, ascending.
  std::vector<int32_t> outputs;
  // Whether `first` binds data symbols before the stage is planned.
  bool binds_data = false;
  // The symbols the stage's plan depends on: those of its values' dims and known values and of
  // its dispatches' data sizes, sorted. Its plan is keyed by their values alone.
  std::vector<std::string> symbols;
  // Whether the stage is one host dispatch (control flow, a sequence or optional op), run on the
  // host rather than prepared for the device.
  bool control = false;
};

// Splits a verified module into stages (at least one, even without dispatches).
std::vector<Stage> plan_stages(const module::ModuleContents& module);

}  // namespace kiln::runtime
