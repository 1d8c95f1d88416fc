// DimExpr: a tensor dimension that is an integer, a named symbol (an ONNX dim_param such as "N"),
// or an expression of them. There is no "unknown" sentinel: every dim is a DimExpr, and code that
// needs a concrete number calls evaluate() and gets a Status error when a symbol is unbound.
//
// Expressions are kept in a canonical normal form: a sum of terms, each an integer coefficient
// times a product of atoms raised to positive powers, where an atom is a symbol, floor(e / d) for
// an integer d > 1, or min(a, b) / max(a, b) of two expressions (clamped slice bounds). Two
// expressions that are equal as polynomials over their atoms compare equal, so shape checks such
// as "the batch of input A equals the batch of input B" work symbolically.
//
// Symbols stand for tensor dims and are never negative; the simplifications below (min/max,
// provably_nonnegative) rely on that and on nothing else.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"

namespace kiln {

class DimExpr;

// Symbol name -> concrete value, as bound at run time from input shapes.
using Bindings = std::map<std::string, int64_t, std::less<>>;

class DimExpr {
 public:
  DimExpr() : DimExpr(int64_t{0}) {}
  DimExpr(int64_t value);                          // NOLINT: integers convert implicitly
  DimExpr(int value) : DimExpr(int64_t{value}) {}  // NOLINT
  static DimExpr symbol(std::string name);

  bool is_constant() const;
  // The value when is_constant(), else nullopt.
  std::optional<int64_t> constant_value() const;
  // True for a single symbol with coefficient 1.
  bool is_symbol() const;
  // Names of all symbols that occur, sorted.
  std::vector<std::string> symbols() const;

  // Concrete value under `bindings`; error naming the first unbound symbol.
  StatusOr<int64_t> evaluate(const Bindings& bindings) const;
  // Replaces symbols by expressions and re-normalizes.
  DimExpr substitute(const std::map<std::string, DimExpr, std::less<>>& replacements) const;

  friend DimExpr operator+(const DimExpr& a, const DimExpr& b);
  friend DimExpr operator-(const DimExpr& a, const DimExpr& b);
  friend DimExpr operator*(const DimExpr& a, const DimExpr& b);
  // floor(this / divisor) for divisor > 0 (divisor <= 0 is a programmer error).
  DimExpr floor_div(int64_t divisor) const;
  // ceil(this / divisor) for divisor > 0.
  DimExpr ceil_div(int64_t divisor) const;
  // Exact division by an expression: the polynomial q with q * divisor == this (integer
  // coefficients), found by multivariate long division, e.g. (4*N*S + 4*N) / (2*N*S + 2*N) = 2;
  // nullopt when there is none (e.g. Reshape's -1 with an indivisible product) or divisor is 0.
  std::optional<DimExpr> exact_div(const DimExpr& divisor) const;
  // min(a, b) and max(a, b), simplified when the order of a and b is provable (equal, constant,
  // or a difference that is provably nonnegative), else an atom with its operands in canonical
  // order.
  static DimExpr min(const DimExpr& a, const DimExpr& b);
  static DimExpr max(const DimExpr& a, const DimExpr& b);
  // True when this is >= 0 for every binding of its symbols to nonnegative integers, as far as
  // kiln can prove it: nonnegative coefficients over nonnegative atoms, where a negative floor or
  // min term may be bounded by its numerator or an operand. False means "not proven".
  bool provably_nonnegative() const;

  friend bool operator==(const DimExpr& a, const DimExpr& b) { return a.key() == b.key(); }
  friend bool operator!=(const DimExpr& a, const DimExpr& b) { return !(a == b); }

  // Canonical text, parseable by parse_dim_expr: "N", "2*N + 3", "floor((N + 1)/2)".
  std::string to_string() const;

 private:
  // An atom's canonical text keys it; floor, min and max atoms keep their operands for
  // evaluation and substitution.
  enum class AtomKind : uint8_t { kSymbol, kFloor, kMin, kMax };
  struct Atom {
    AtomKind kind = AtomKind::kSymbol;
    std::string name;                          // kSymbol only
    std::shared_ptr<const DimExpr> numerator;  // kFloor: the numerator; kMin/kMax: operand a
    int64_t divisor = 0;                       // kFloor only
    std::shared_ptr<const DimExpr> other;      // kMin/kMax: operand b
  };
  using Monomial = std::vector<std::pair<std::string, int>>;  // sorted (atom key, power)

  const std::string& key() const { return key_; }
  void normalize();
  static DimExpr from_terms(std::map<Monomial, int64_t> terms, std::map<std::string, Atom> atoms);
  static std::string atom_key(const Atom& atom);
  static DimExpr from_atom(Atom atom);
  static DimExpr min_max(AtomKind kind, const DimExpr& a, const DimExpr& b);
  static bool nonnegative_atom(const Atom& atom, int depth);
  bool provably_nonnegative(int depth) const;

  std::map<Monomial, int64_t> terms_;  // monomial -> coefficient, no zero coefficients
  std::map<std::string, Atom> atoms_;  // atom key -> atom, for atoms used in terms_
  std::string key_;                    // canonical text
};

// Parses the text form written by DimExpr::to_string; integers, identifiers ([A-Za-z_][\w.:-]*
// or a double-quoted string for names with other characters), + - *, parentheses,
// floor(E/INT), min(E, E) and max(E, E). Errors name the offending position.
StatusOr<DimExpr> parse_dim_expr(std::string_view text);

}  // namespace kiln
