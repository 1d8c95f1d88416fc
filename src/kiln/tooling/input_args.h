// `--input` arguments that name the input they are for (NAME=SPEC, as ONNX Runtime's tools take
// them) or give it by position, and their order against a module's or model's inputs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/module/module.h"

namespace kiln {

// One `--input` of `kiln run`, `kiln bench` and `kiln triage`: a tensor spec, or NAME=SPEC for the
// module input NAME. A prefix before the first '=' is a NAME when it is no tensor type and the rest
// is a spec with a type or a file (`data=1x3x8x8xf32=@x.bin`, `data=@x.npy`).
struct InputArg {
  std::string name;  // empty for a positional input
  Tensor tensor;
};
// Loads every spec in order; the error names the flag and the spec.
StatusOr<std::vector<InputArg>> load_input_specs(std::string_view flag,
                                                 const std::vector<std::string>& specs);
// The inputs in the order of `input_names`: each named one goes to its input, the positional ones
// fill the others in order. Without names, the positional ones are returned as given (the
// session checks their count). Errors name the flag: an unknown name (listing the inputs), a name
// given twice, more inputs than the module takes, an input left without a value.
StatusOr<std::vector<Tensor>> order_inputs(std::string_view flag, std::vector<InputArg> args,
                                           const std::vector<std::string>& input_names);
// The names of `module`'s inputs, in order.
std::vector<std::string> input_names(const module::ModuleContents& module);

}  // namespace kiln
