#include "kiln/tooling/input_args.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/tooling/tensor_spec.h"

namespace kiln {
namespace {

// "data" for "data=1x3x8x8xf32=@x.bin" or "data=@x.npy"; empty for a plain spec.
std::string_view input_name(std::string_view spec) {
  const size_t eq = spec.find('=');
  if (eq == 0 || eq == std::string_view::npos || spec[0] == '@') return {};
  const std::string_view name = spec.substr(0, eq), rest = spec.substr(eq + 1);
  if (parse_tensor_type(name).ok()) return {};
  if (rest.empty() || (rest[0] != '@' && rest.find('=') == std::string_view::npos)) return {};
  return name;
}

}  // namespace

StatusOr<std::vector<InputArg>> load_input_specs(std::string_view flag,
                                                 const std::vector<std::string>& specs) {
  std::vector<InputArg> args;
  for (const std::string& spec : specs) {
    const std::string_view name = input_name(spec);
    const std::string_view tensor_spec =
        name.empty() ? std::string_view(spec) : std::string_view(spec).substr(name.size() + 1);
    auto tensor = parse_tensor_spec(tensor_spec);
    if (!tensor.ok()) return std::move(tensor).status().with_note(fmt::format("in {}", flag));
    args.push_back({std::string(name), std::move(tensor).value()});
  }
  return args;
}

StatusOr<std::vector<Tensor>> order_inputs(std::string_view flag, std::vector<InputArg> args,
                                           const std::vector<std::string>& input_names) {
  std::vector<std::optional<Tensor>> slots(input_names.size());
  std::vector<Tensor> positional;
  bool named = false;
  for (InputArg& arg : args) {
    if (arg.name.empty()) {
      positional.push_back(std::move(arg.tensor));
      continue;
    }
    named = true;
    auto it = std::find(input_names.begin(), input_names.end(), arg.name);
    if (it == input_names.end()) {
      return invalid_argument("{}={}=...: the module has no input '{}'; its inputs are: {}", flag,
                              arg.name, arg.name, fmt::join(input_names, ", "));
    }
    auto& slot = slots[it - input_names.begin()];
    if (slot) return invalid_argument("{}: input '{}' is given twice", flag, arg.name);
    slot = std::move(arg.tensor);
  }
  if (!named) return positional;
  size_t next = 0;
  for (auto& slot : slots) {
    if (!slot && next < positional.size()) slot = std::move(positional[next++]);
  }
  if (next < positional.size()) {
    return invalid_argument("{}: {} input(s) given; the module takes {}: {}", flag, args.size(),
                            input_names.size(), fmt::join(input_names, ", "));
  }
  std::vector<Tensor> ordered;
  std::vector<std::string> missing;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i]) {
      ordered.push_back(std::move(*slots[i]));
    } else {
      missing.push_back("'" + input_names[i] + "'");
    }
  }
  if (!missing.empty()) {
    return invalid_argument("{}: no value for input {}", flag, fmt::join(missing, ", "));
  }
  return ordered;
}

std::vector<std::string> input_names(const module::ModuleContents& module) {
  std::vector<std::string> names;
  for (int32_t id : module.inputs) names.push_back(module.values[id].name);
  return names;
}

}  // namespace kiln
