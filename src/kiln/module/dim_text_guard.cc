#include "kiln/module/dim_text_guard.h"

#include <cctype>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::module {
namespace {

bool is_plain_identifier(std::string_view name) {
  if (name.empty() || name == "floor" || name == "min" || name == "max") return false;
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

// (atom text, power), in ascending atom text: DimExpr's Monomial with the text as the key.
using Monomial = std::vector<std::pair<std::string_view, int>>;

struct Term {
  uint64_t coefficient = 1;
  Monomial monomial;  // empty for a constant
};

// The order in which DimExpr prints the terms of a sum: more distinct atoms first, then
// ascending monomial.
bool prints_before(const Monomial& a, const Monomial& b) {
  if (a.size() != b.size()) return a.size() > b.size();
  return a < b;
}

class CanonicalChecker {
 public:
  explicit CanonicalChecker(std::string_view text) : text_(text) {}

  Status check() {
    if (!dim() || !at_end()) return failure();
    return ok_status();
  }

 private:
  Status failure() const {
    return invalid_argument("'{}' is not in kiln's canonical dim form (at offset {})", text_, pos_);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  // The end of a dim: the text's end, or the ", " / ")" closing a min/max operand.
  bool at_dim_end() const { return at_end() || text_[pos_] == ',' || text_[pos_] == ')'; }

  // dim := '0' | ['-'] term ((' + ' | ' - ') term)*, up to at_dim_end().
  bool dim() {
    if (take("0")) return at_dim_end();
    if (!at_end() && text_[pos_] == '-') ++pos_;
    std::optional<Term> previous = term();
    if (!previous) return false;
    while (!at_dim_end()) {
      if (!take(" + ") && !take(" - ")) return false;
      std::optional<Term> next = term();
      if (!next || !prints_before(previous->monomial, next->monomial)) return false;
      previous = std::move(next);
    }
    return true;
  }

  // 'min(' dim ', ' dim ')' or 'max(...)': operands in ascending text order, not both constant.
  bool min_max() {
    constexpr int kMaxNesting = 16;
    if (++nesting_ > kMaxNesting) return false;
    size_t a_start = pos_;
    if (!dim()) return false;
    std::string_view a = text_.substr(a_start, pos_ - a_start);
    if (!take(", ")) return false;
    size_t b_start = pos_;
    if (!dim()) return false;
    std::string_view b = text_.substr(b_start, pos_ - b_start);
    if (!take(")") || !(a < b)) return false;
    auto constant = [](std::string_view d) {
      return d.find_first_not_of("-0123456789") == std::string_view::npos;
    };
    --nesting_;
    return !(constant(a) && constant(b));
  }
  bool at_digit() const {
    return !at_end() && std::isdigit(static_cast<unsigned char>(text_[pos_]));
  }
  bool take(std::string_view token) {
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }

  // A positive integer without a leading zero or overflow.
  std::optional<uint64_t> integer() {
    if (!at_digit() || text_[pos_] == '0') return std::nullopt;
    uint64_t value = 0;
    while (at_digit()) {
      value = value * 10 + static_cast<uint64_t>(text_[pos_] - '0');
      if (value > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      ++pos_;
    }
    return value;
  }

  std::optional<Term> term() {
    Term out;
    if (at_digit()) {
      std::optional<uint64_t> value = integer();
      if (!value) return std::nullopt;
      out.coefficient = *value;
      if (!take("*")) return out;
      if (out.coefficient == 1) return std::nullopt;
    }
    do {
      size_t start = pos_;
      if (!atom()) return std::nullopt;
      std::string_view text = text_.substr(start, pos_ - start);
      if (!out.monomial.empty() && out.monomial.back().first == text) {
        ++out.monomial.back().second;
      } else if (out.monomial.empty() || out.monomial.back().first < text) {
        out.monomial.emplace_back(text, 1);
      } else {
        return std::nullopt;
      }
    } while (take("*"));
    return out;
  }

  // A symbol; true when it is a plain identifier (parsed) or correctly quoted.
  bool name() {
    if (at_end()) return false;
    size_t start = pos_;
    if (text_[pos_] != '"') {
      while (!at_end() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        ++pos_;
      }
      return is_plain_identifier(text_.substr(start, pos_ - start));
    }
    ++pos_;
    std::string unquoted;
    while (!at_end() && text_[pos_] != '"') {
      if (text_[pos_] == '\\') {
        if (pos_ + 1 >= text_.size() || (text_[pos_ + 1] != '"' && text_[pos_ + 1] != '\\')) {
          return false;
        }
        ++pos_;
      }
      unquoted += text_[pos_++];
    }
    return take("\"") && !is_plain_identifier(unquoted);
  }

  bool atom() {
    if (take("min(") || take("max(")) return min_max();
    if (!take("floor(")) return name();
    if (!take("(")) {
      // floor(name/d): the numerator's coefficient 1 must be below the divisor.
      if (!name() || !take("/")) return false;
      std::optional<uint64_t> divisor = integer();
      return divisor && *divisor > 1 && take(")");
    }
    // floor((inner)/d): the divisor follows the numerator, so the terms are kept until then.
    std::vector<Term> terms;
    do {
      std::optional<Term> t = term();
      if (!t) return false;
      if (!terms.empty() && !prints_before(terms.back().monomial, t->monomial)) return false;
      terms.push_back(std::move(*t));
    } while (take(" + "));
    if (!take(")/")) return false;
    std::optional<uint64_t> divisor = integer();
    if (!divisor || !take(")")) return false;
    // A coefficient at or past the divisor would make the parser split the floor into a sum.
    for (const Term& t : terms) {
      if (t.coefficient >= *divisor) return false;
    }
    // A constant numerator is no floor at all, and a lone symbol is written floor(name/d).
    if (terms.size() == 1) {
      const Monomial& m = terms[0].monomial;
      if (m.empty()) return false;
      bool lone_symbol = terms[0].coefficient == 1 && m.size() == 1 && m[0].second == 1 &&
                         m[0].first.substr(0, 6) != "floor(" && m[0].first.substr(0, 4) != "min(" &&
                         m[0].first.substr(0, 4) != "max(";
      if (lone_symbol) return false;
    }
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
  int nesting_ = 0;
};

}  // namespace

Status check_canonical_dim_text(std::string_view text) { return CanonicalChecker(text).check(); }

}  // namespace kiln::module
