#include "kiln/triage/fault_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace kiln::triage {
namespace {

Status malformed(std::string_view text, std::string_view why) {
  return invalid_argument(
      "{}='{}' is malformed: {} (expected dispatch:<index|node-name>:<kind> or op:<OpType>:<kind>, "
      "kind nan|inf|zero|perturb=<eps>)",
      kFaultVariable, text, why);
}

bool all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

bool FaultSpec::matches(const hal::DispatchSpec& dispatch, int32_t position) const {
  if (!op_type.empty()) return dispatch.op_type == op_type;
  if (index) return (dispatch.module_index >= 0 ? dispatch.module_index : position) == *index;
  if (dispatch.name == node) return true;
  return std::find(dispatch.origins.begin(), dispatch.origins.end(), node) !=
         dispatch.origins.end();
}

std::string FaultSpec::kind_text() const {
  switch (kind) {
    case Kind::kNan: return "nan";
    case Kind::kInf: return "inf";
    case Kind::kZero: return "zero";
    case Kind::kPerturb: return fmt::format("perturb={}", eps);
  }
  return "?";
}

StatusOr<std::optional<FaultSpec>> parse_fault(std::string_view text) {
  if (text.empty()) return std::optional<FaultSpec>();
  constexpr std::string_view kDispatch = "dispatch:";
  constexpr std::string_view kOp = "op:";
  const bool by_op = text.substr(0, kOp.size()) == kOp;
  if (!by_op && text.substr(0, kDispatch.size()) != kDispatch) {
    return malformed(text, "it must start with 'dispatch:' or 'op:'");
  }
  // Node names may contain ':'; the kind is after the last one.
  const std::string_view rest = text.substr(by_op ? kOp.size() : kDispatch.size());
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos) return malformed(text, "no ':<kind>' after the selector");
  const std::string_view selector = rest.substr(0, colon);
  const std::string_view kind = rest.substr(colon + 1);
  if (selector.empty()) {
    return malformed(text,
                     by_op ? "the op type is empty" : "the dispatch index or node name is empty");
  }
  FaultSpec fault;
  if (by_op) {
    fault.op_type = std::string(selector);
  } else if (all_digits(selector)) {
    if (selector.size() > 9) return malformed(text, "the dispatch index is too large");
    fault.index = static_cast<int32_t>(std::stol(std::string(selector)));
  } else {
    fault.node = std::string(selector);
  }
  constexpr std::string_view kPerturb = "perturb=";
  if (kind == "nan") {
    fault.kind = FaultSpec::Kind::kNan;
  } else if (kind == "inf") {
    fault.kind = FaultSpec::Kind::kInf;
  } else if (kind == "zero") {
    fault.kind = FaultSpec::Kind::kZero;
  } else if (kind.substr(0, kPerturb.size()) == kPerturb) {
    const std::string number(kind.substr(kPerturb.size()));
    char* end = nullptr;
    errno = 0;
    const double eps = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || errno != 0 || !std::isfinite(eps)) {
      return malformed(text, fmt::format("perturb needs a finite number, got '{}'", number));
    }
    fault.kind = FaultSpec::Kind::kPerturb;
    fault.eps = eps;
  } else {
    return malformed(text, fmt::format("unknown kind '{}'", kind));
  }
  return std::optional<FaultSpec>(std::move(fault));
}

StatusOr<std::optional<FaultSpec>> fault_from_environment() {
  const char* value = std::getenv(kFaultVariable);
  if (value == nullptr) return std::optional<FaultSpec>();
  return parse_fault(value);
}

}  // namespace kiln::triage
