#include "kiln/shape/assumption.h"

#include <algorithm>

namespace kiln {
namespace {

thread_local AssumptionRecorder* active_recorder = nullptr;

}  // namespace

std::string Assumption::to_string() const {
  switch (kind) {
    case Kind::kEqual: return fmt::format("{} == {}", lhs.to_string(), rhs.to_string());
    case Kind::kNonNegative: return fmt::format("{} >= 0", lhs.to_string());
    case Kind::kDivisible: {
      std::string divisor = rhs.to_string();
      if (!rhs.is_constant() && !rhs.is_symbol()) divisor = "(" + divisor + ")";
      std::string dividend = lhs.to_string();
      if (!lhs.is_constant() && !lhs.is_symbol()) dividend = "(" + dividend + ")";
      return fmt::format("{} % {} == 0", dividend, divisor);
    }
  }
  return "?";
}

std::vector<std::string> Assumption::symbols() const {
  std::vector<std::string> out = lhs.symbols();
  for (std::string& s : rhs.symbols()) out.push_back(std::move(s));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Status Assumption::check(const Bindings& bindings) const {
  auto a = lhs.evaluate(bindings);
  auto b = rhs.evaluate(bindings);
  if (!a.ok() || !b.ok()) {
    Status unbound = !a.ok() ? a.status() : b.status();
    return std::move(unbound).with_note(fmt::format("checking assumption '{}'", to_string()));
  }
  bool holds = false;
  switch (kind) {
    case Kind::kEqual: holds = *a == *b; break;
    case Kind::kNonNegative: holds = *a >= 0; break;
    case Kind::kDivisible: holds = *b > 0 && *a % *b == 0; break;
  }
  if (holds) return ok_status();
  std::vector<std::string> values;
  for (const std::string& symbol : symbols()) {
    values.push_back(fmt::format("{} = {}", symbol, bindings.find(symbol)->second));
  }
  std::string sides = kind == Kind::kEqual ? fmt::format("{} vs {}", *a, *b)
                      : kind == Kind::kDivisible
                          ? fmt::format("{} % {} = {}", *a, *b, *b > 0 ? *a % *b : 0)
                          : fmt::format("{}", *a);
  return invalid_argument(
      "these input sizes break the compiler's assumption '{}' made for {} ({}: {}); the module "
      "was compiled for sizes where it holds",
      to_string(), origin.empty() ? "the model" : origin, fmt::join(values, ", "), sides);
}

Status check_bound_assumptions(std::span<const Assumption> assumptions, const Bindings& bindings) {
  for (const Assumption& assumption : assumptions) {
    bool bound = true;
    for (const std::string& symbol : assumption.symbols()) bound = bound && bindings.count(symbol);
    if (bound) KILN_RETURN_IF_ERROR(assumption.check(bindings));
  }
  return ok_status();
}

AssumptionRecorder::AssumptionRecorder() : outer_(active_recorder) { active_recorder = this; }

AssumptionRecorder::~AssumptionRecorder() { active_recorder = outer_; }

bool recording_assumptions() { return active_recorder != nullptr; }

void record_assumption(Assumption assumption) {
  if (active_recorder == nullptr) return;
  auto& list = active_recorder->assumptions_;
  if (std::find(list.begin(), list.end(), assumption) == list.end()) {
    list.push_back(std::move(assumption));
  }
}

}  // namespace kiln
