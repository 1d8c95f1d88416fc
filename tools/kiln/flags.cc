#include "flags.h"

#include <charconv>

#include "kiln/hal/registry.h"
#include "kiln/tooling/tensor_spec.h"
#include "kiln/triage/fault_device.h"

namespace kiln::cli {

StatusOr<uint64_t> parse_byte_size(std::string_view flag, std::string_view text) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string_view suffix(end, text.data() + text.size() - end);
  int shift = suffix.empty()  ? 0
              : suffix == "K" ? 10
              : suffix == "M" ? 20
              : suffix == "G" ? 30
                              : -1;
  if (error != std::errc() || end == text.data() || shift < 0 || value == 0 ||
      value > (UINT64_MAX >> shift)) {
    return invalid_argument("{} '{}': expected a positive byte count such as 1048576, 512M or 2G",
                            flag, text);
  }
  return value << shift;
}

std::string device_help() { return "device to run on: " + hal::device_names(); }

Status apply_fault_injection(runtime::SessionOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::optional<triage::FaultSpec> fault, triage::fault_from_environment());
  options.decorate_device = triage::fault_decorator(std::move(fault));
  return ok_status();
}

StatusOr<std::vector<Tensor>> load_tensor_specs(std::string_view flag,
                                                const std::vector<std::string>& specs) {
  std::vector<Tensor> tensors;
  for (const std::string& spec : specs) {
    auto tensor = parse_tensor_spec(spec);
    if (!tensor.ok()) return std::move(tensor).status().with_note(fmt::format("in {}", flag));
    tensors.push_back(std::move(tensor).value());
  }
  return tensors;
}

void PlanCacheFlags::add_to(CLI::App* sub) {
  sub->add_option("--max-plans", max_plans,
                  "prepared plans kept, one per set of input sizes; the least recently used go "
                  "first (default 64)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-plan-bytes", max_plan_bytes,
                  "bytes the kept plans may hold together, e.g. 256M (the default); a plan over "
                  "it alone is still kept");
}

Status PlanCacheFlags::apply(runtime::SessionOptions& options) const {
  options.max_plans = max_plans;
  if (!max_plan_bytes.empty()) {
    KILN_ASSIGN_OR_RETURN(options.max_plan_bytes,
                          parse_byte_size("--max-plan-bytes", max_plan_bytes));
  }
  return ok_status();
}

}  // namespace kiln::cli
