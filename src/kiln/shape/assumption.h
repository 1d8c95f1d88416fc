// Assumptions: what the compiler takes for granted about symbolic dims when it cannot prove it.
//
// Where equality, divisibility or sign of dims cannot be proven from the expressions alone
// (`S == T` for [N,S] + [N,T], `H == 2*floor(H/2)` for a U-Net skip, `S % 2 == 0` for an even
// Split, `S - 1 >= 0` for a Range length), an op's shape rule states the assumption instead of
// refusing the model, and computes its output shape in the assumed form. The compiler records each
// assumption with the node that made it in the module; the runtime checks every assumption when it
// binds the symbols from the input shapes (or from data, for data-dependent sizes) and refuses a
// run that breaks one, naming the node, the assumption and the values. So a module never computes
// with shapes its compiler did not plan for.
//
// Shape rules state assumptions through the assume_* functions of kernels/infer_util.h, which
// record into the AssumptionRecorder active on the calling thread (graph_eval::infer_node installs
// one per node). With no recorder active, an undecidable claim is accepted unrecorded: every
// backend re-runs the shape rule on concrete dims before it runs a dispatch, where claims are
// decided.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/shape/dim_expr.h"

namespace kiln {

struct Assumption {
  enum class Kind : uint8_t { kEqual = 0, kNonNegative = 1, kDivisible = 2 };
  Kind kind = Kind::kEqual;
  // kEqual: lhs == rhs; kNonNegative: lhs >= 0 (rhs unused, 0); kDivisible: lhs % rhs == 0 with
  // rhs a positive constant or a positive expression.
  DimExpr lhs;
  DimExpr rhs;
  // What made it, e.g. "node 'add_3' (Add)"; filled by the compiler.
  std::string origin;

  // "S == T", "S - 1 >= 0", "S % 2 == 0".
  std::string to_string() const;
  // Every symbol either side uses, sorted.
  std::vector<std::string> symbols() const;
  // OK when it holds under `bindings`; an error naming origin, the assumption and the symbols'
  // values when it does not, or when a symbol is unbound.
  Status check(const Bindings& bindings) const;

  friend bool operator==(const Assumption& a, const Assumption& b) {
    return a.kind == b.kind && a.lhs == b.lhs && a.rhs == b.rhs;
  }
};

// Checks each assumption whose symbols are all bound; those waiting for a symbol bound later (from
// data) are skipped. The error is the first broken assumption's (Assumption::check).
Status check_bound_assumptions(std::span<const Assumption> assumptions, const Bindings& bindings);

// Collects the assumptions stated on this thread while it is alive. Recorders nest: the innermost
// one receives them. Not copyable; destroy in reverse order of creation.
class AssumptionRecorder {
 public:
  AssumptionRecorder();
  ~AssumptionRecorder();
  AssumptionRecorder(const AssumptionRecorder&) = delete;
  AssumptionRecorder& operator=(const AssumptionRecorder&) = delete;

  // The assumptions recorded so far, without duplicates, in the order first stated.
  const std::vector<Assumption>& assumptions() const { return assumptions_; }

 private:
  friend void record_assumption(Assumption assumption);
  std::vector<Assumption> assumptions_;
  AssumptionRecorder* outer_ = nullptr;
};

// True when a recorder is active on this thread.
bool recording_assumptions();
// Adds `assumption` to the active recorder (ignored without one).
void record_assumption(Assumption assumption);

}  // namespace kiln
