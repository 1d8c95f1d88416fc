#include "kiln/shape/dim_expr.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace kiln {
namespace {

// Wrapping arithmetic: dims come from untrusted files; sizes are range-checked where they are
// turned into allocations, so expressions only need to avoid UB here.
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t floor_div_int(int64_t a, int64_t d) {
  int64_t q = a / d;
  if ((a % d != 0) && ((a < 0) != (d < 0))) --q;
  return q;
}

bool is_plain_identifier(const std::string& name) {
  if (name.empty() || name == "floor" || name == "min" || name == "max") return false;
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

std::string quote_symbol(const std::string& name) {
  if (is_plain_identifier(name)) return name;
  std::string out = "\"";
  for (char c : name) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

DimExpr::DimExpr(int64_t value) {
  if (value != 0) terms_[{}] = value;
  normalize();
}

DimExpr DimExpr::symbol(std::string name) {
  Atom atom;
  atom.name = std::move(name);
  return from_atom(std::move(atom));
}

DimExpr DimExpr::from_atom(Atom atom) {
  std::string key = atom_key(atom);
  std::map<Monomial, int64_t> terms{{Monomial{{key, 1}}, 1}};
  std::map<std::string, Atom> atoms{{key, std::move(atom)}};
  return from_terms(std::move(terms), std::move(atoms));
}

std::string DimExpr::atom_key(const Atom& atom) {
  switch (atom.kind) {
    case AtomKind::kSymbol: return quote_symbol(atom.name);
    case AtomKind::kFloor: {
      const DimExpr& numerator = *atom.numerator;
      if (numerator.is_symbol()) {
        return fmt::format("floor({}/{})", numerator.to_string(), atom.divisor);
      }
      return fmt::format("floor(({})/{})", numerator.to_string(), atom.divisor);
    }
    case AtomKind::kMin:
      return fmt::format("min({}, {})", atom.numerator->to_string(), atom.other->to_string());
    case AtomKind::kMax:
      return fmt::format("max({}, {})", atom.numerator->to_string(), atom.other->to_string());
  }
  return "?";
}

DimExpr DimExpr::from_terms(std::map<Monomial, int64_t> terms, std::map<std::string, Atom> atoms) {
  DimExpr out;
  for (auto& [monomial, coeff] : terms) {
    if (coeff != 0) out.terms_.emplace(monomial, coeff);
  }
  for (const auto& [monomial, coeff] : out.terms_) {
    for (const auto& [key, power] : monomial) out.atoms_.emplace(key, atoms.at(key));
  }
  out.normalize();
  return out;
}

void DimExpr::normalize() {
  // Order: higher-degree terms first, constant last, so "2*N + 3" reads naturally.
  std::vector<std::pair<Monomial, int64_t>> ordered(terms_.begin(), terms_.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string text;
  for (const auto& [monomial, coeff] : ordered) {
    int64_t magnitude = coeff;
    if (text.empty()) {
      if (coeff < 0) text += "-";
    } else {
      text += coeff < 0 ? " - " : " + ";
    }
    if (coeff < 0) magnitude = wrap_mul(coeff, -1);
    std::string factors;
    for (const auto& [key, power] : monomial) {
      for (int i = 0; i < power; ++i) factors += (factors.empty() ? "" : "*") + key;
    }
    if (factors.empty()) {
      text += std::to_string(magnitude);
    } else if (magnitude == 1) {
      text += factors;
    } else {
      text += std::to_string(magnitude) + "*" + factors;
    }
  }
  key_ = text.empty() ? "0" : text;
}

bool DimExpr::is_constant() const {
  return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty());
}

std::optional<int64_t> DimExpr::constant_value() const {
  if (terms_.empty()) return 0;
  if (is_constant()) return terms_.begin()->second;
  return std::nullopt;
}

bool DimExpr::is_symbol() const {
  if (terms_.size() != 1) return false;
  const auto& [monomial, coeff] = *terms_.begin();
  return coeff == 1 && monomial.size() == 1 && monomial[0].second == 1 &&
         atoms_.at(monomial[0].first).kind == AtomKind::kSymbol;
}

std::vector<std::string> DimExpr::symbols() const {
  std::vector<std::string> out;
  for (const auto& [key, atom] : atoms_) {
    if (atom.kind == AtomKind::kSymbol) {
      out.push_back(atom.name);
      continue;
    }
    for (auto& name : atom.numerator->symbols()) out.push_back(name);
    if (atom.other) {
      for (auto& name : atom.other->symbols()) out.push_back(name);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

StatusOr<int64_t> DimExpr::evaluate(const Bindings& bindings) const {
  std::map<std::string, int64_t> atom_values;
  for (const auto& [key, atom] : atoms_) {
    if (atom.kind == AtomKind::kSymbol) {
      auto it = bindings.find(atom.name);
      if (it == bindings.end()) return not_found("symbol '{}' is not bound", atom.name);
      atom_values[key] = it->second;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int64_t a, atom.numerator->evaluate(bindings));
    if (atom.kind == AtomKind::kFloor) {
      atom_values[key] = floor_div_int(a, atom.divisor);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int64_t b, atom.other->evaluate(bindings));
    atom_values[key] = atom.kind == AtomKind::kMin ? std::min(a, b) : std::max(a, b);
  }
  int64_t total = 0;
  for (const auto& [monomial, coeff] : terms_) {
    int64_t term = coeff;
    for (const auto& [key, power] : monomial) {
      for (int i = 0; i < power; ++i) term = wrap_mul(term, atom_values[key]);
    }
    total = wrap_add(total, term);
  }
  return total;
}

DimExpr DimExpr::substitute(const std::map<std::string, DimExpr, std::less<>>& replacements) const {
  std::map<std::string, DimExpr> atom_values;
  for (const auto& [key, atom] : atoms_) {
    switch (atom.kind) {
      case AtomKind::kSymbol: {
        auto it = replacements.find(atom.name);
        atom_values[key] = it != replacements.end() ? it->second : DimExpr::symbol(atom.name);
        break;
      }
      case AtomKind::kFloor:
        atom_values[key] = atom.numerator->substitute(replacements).floor_div(atom.divisor);
        break;
      case AtomKind::kMin:
      case AtomKind::kMax:
        atom_values[key] = min_max(atom.kind, atom.numerator->substitute(replacements),
                                   atom.other->substitute(replacements));
        break;
    }
  }
  DimExpr total(0);
  for (const auto& [monomial, coeff] : terms_) {
    DimExpr term(coeff);
    for (const auto& [key, power] : monomial) {
      for (int i = 0; i < power; ++i) term = term * atom_values[key];
    }
    total = total + term;
  }
  return total;
}

DimExpr operator+(const DimExpr& a, const DimExpr& b) {
  auto terms = a.terms_;
  for (const auto& [monomial, coeff] : b.terms_) {
    terms[monomial] = wrap_add(terms[monomial], coeff);
  }
  auto atoms = a.atoms_;
  atoms.insert(b.atoms_.begin(), b.atoms_.end());
  return DimExpr::from_terms(std::move(terms), std::move(atoms));
}

DimExpr operator-(const DimExpr& a, const DimExpr& b) { return a + DimExpr(-1) * b; }

DimExpr operator*(const DimExpr& a, const DimExpr& b) {
  std::map<DimExpr::Monomial, int64_t> terms;
  for (const auto& [ma, ca] : a.terms_) {
    for (const auto& [mb, cb] : b.terms_) {
      std::map<std::string, int> powers;
      for (const auto& [key, power] : ma) powers[key] += power;
      for (const auto& [key, power] : mb) powers[key] += power;
      DimExpr::Monomial monomial(powers.begin(), powers.end());
      terms[monomial] = wrap_add(terms[monomial], wrap_mul(ca, cb));
    }
  }
  auto atoms = a.atoms_;
  atoms.insert(b.atoms_.begin(), b.atoms_.end());
  return DimExpr::from_terms(std::move(terms), std::move(atoms));
}

DimExpr DimExpr::floor_div(int64_t divisor) const {
  KILN_CHECK(divisor > 0);
  if (divisor == 1) return *this;
  // floor((d*q + r)/d) = q + floor(r/d) for integer q: pull out whole multiples of the divisor.
  std::map<Monomial, int64_t> quotient;
  std::map<Monomial, int64_t> remainder;
  for (const auto& [monomial, coeff] : terms_) {
    int64_t q = floor_div_int(coeff, divisor);
    int64_t r = coeff - q * divisor;
    if (q != 0) quotient[monomial] = q;
    if (r != 0) remainder[monomial] = r;
  }
  DimExpr out = from_terms(std::move(quotient), atoms_);
  DimExpr rest = from_terms(std::move(remainder), atoms_);
  if (rest.is_constant()) return out + DimExpr(floor_div_int(*rest.constant_value(), divisor));
  Atom atom;
  atom.kind = AtomKind::kFloor;
  atom.numerator = std::make_shared<const DimExpr>(rest);
  atom.divisor = divisor;
  return out + from_atom(std::move(atom));
}

DimExpr DimExpr::ceil_div(int64_t divisor) const {
  KILN_CHECK(divisor > 0);
  return (*this + DimExpr(divisor - 1)).floor_div(divisor);
}

namespace {

// Lexicographic order on exponent vectors (atoms ordered by key): a monomial order, so the leading
// term of a product is the product of the leading terms, which long division relies on.
template <typename Monomial>
bool monomial_less(const Monomial& a, const Monomial& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i].first != b[j].first) return a[i].first > b[j].first;  // b lacks a[i]'s atom
    if (a[i].second != b[j].second) return a[i].second < b[j].second;
    ++i, ++j;
  }
  return i == a.size() && j < b.size();
}

}  // namespace

std::optional<DimExpr> DimExpr::exact_div(const DimExpr& divisor) const {
  if (divisor.terms_.empty()) return std::nullopt;
  auto leading = [](const std::map<Monomial, int64_t>& terms) {
    auto best = terms.begin();
    for (auto it = terms.begin(); it != terms.end(); ++it) {
      if (monomial_less(best->first, it->first)) best = it;
    }
    return best;
  };
  const auto [dmono, dcoeff] = *leading(divisor.terms_);
  DimExpr remainder = *this;
  DimExpr quotient(0);
  // Each step removes the remainder's leading term; the cap only guards hostile inputs.
  for (int step = 0; !remainder.terms_.empty(); ++step) {
    if (step > 4096) return std::nullopt;
    const auto [mono, coeff] = *leading(remainder.terms_);
    // INT64_MIN / -1 overflows (coefficients wrap on hostile dims).
    if (dcoeff == -1 && coeff == std::numeric_limits<int64_t>::min()) return std::nullopt;
    if (coeff % dcoeff != 0) return std::nullopt;
    std::map<std::string, int> powers(mono.begin(), mono.end());
    for (const auto& [key, power] : dmono) {
      auto it = powers.find(key);
      if (it == powers.end() || it->second < power) return std::nullopt;
      if ((it->second -= power) == 0) powers.erase(it);
    }
    std::map<Monomial, int64_t> term{{Monomial(powers.begin(), powers.end()), coeff / dcoeff}};
    DimExpr t = from_terms(std::move(term), remainder.atoms_);
    quotient = quotient + t;
    remainder = remainder - t * divisor;
  }
  return quotient;
}

DimExpr DimExpr::min_max(AtomKind kind, const DimExpr& a, const DimExpr& b) {
  const bool is_min = kind == AtomKind::kMin;
  if (a == b) return a;
  auto ca = a.constant_value();
  auto cb = b.constant_value();
  if (ca && cb) return is_min ? std::min(*ca, *cb) : std::max(*ca, *cb);
  if ((a - b).provably_nonnegative()) return is_min ? b : a;
  if ((b - a).provably_nonnegative()) return is_min ? a : b;
  Atom atom;
  atom.kind = kind;
  const bool swap = b.key() < a.key();
  atom.numerator = std::make_shared<const DimExpr>(swap ? b : a);
  atom.other = std::make_shared<const DimExpr>(swap ? a : b);
  return from_atom(std::move(atom));
}

DimExpr DimExpr::min(const DimExpr& a, const DimExpr& b) { return min_max(AtomKind::kMin, a, b); }
DimExpr DimExpr::max(const DimExpr& a, const DimExpr& b) { return min_max(AtomKind::kMax, a, b); }

bool DimExpr::nonnegative_atom(const Atom& atom, int depth) {
  switch (atom.kind) {
    case AtomKind::kSymbol: return true;
    case AtomKind::kFloor: return atom.numerator->provably_nonnegative(depth);
    case AtomKind::kMin:
      return atom.numerator->provably_nonnegative(depth) && atom.other->provably_nonnegative(depth);
    case AtomKind::kMax:
      return atom.numerator->provably_nonnegative(depth) || atom.other->provably_nonnegative(depth);
  }
  return false;
}

bool DimExpr::provably_nonnegative() const { return provably_nonnegative(0); }

bool DimExpr::provably_nonnegative(int depth) const {
  constexpr int kMaxDepth = 6;
  if (depth > kMaxDepth) return false;
  bool all_nonnegative = true;
  for (const auto& [monomial, coeff] : terms_) {
    bool atoms_ok = true;
    for (const auto& [key, power] : monomial) {
      atoms_ok = atoms_ok && nonnegative_atom(atoms_.at(key), depth + 1);
    }
    if (coeff < 0 || !atoms_ok) {
      all_nonnegative = false;
      break;
    }
  }
  if (all_nonnegative) return true;
  // Bound one negative term -k*A (A a single floor or min atom) from above: floor(X/d) <= X/d,
  // so d*e with -k*X in place of -k*d*floor(X/d) is a lower bound; min(a, b) <= a and <= b.
  // At most two candidates per level keep hostile expressions from exploding the search.
  int candidates = 0;
  for (const auto& [monomial, coeff] : terms_) {
    if (coeff >= 0 || monomial.size() != 1 || monomial[0].second != 1) continue;
    if (++candidates > 2) break;
    const Atom& atom = atoms_.at(monomial[0].first);
    if (!nonnegative_atom(atom, depth + 1)) continue;
    std::map<Monomial, int64_t> rest_terms = terms_;
    rest_terms.erase(monomial);
    DimExpr rest = from_terms(std::move(rest_terms), atoms_);
    if (atom.kind == AtomKind::kFloor) {
      DimExpr bound = rest * DimExpr(atom.divisor) + DimExpr(coeff) * *atom.numerator;
      if (bound.provably_nonnegative(depth + 1)) return true;
    } else if (atom.kind == AtomKind::kMin) {
      if ((rest + DimExpr(coeff) * *atom.numerator).provably_nonnegative(depth + 1)) return true;
      if ((rest + DimExpr(coeff) * *atom.other).provably_nonnegative(depth + 1)) return true;
    }
  }
  return false;
}

std::string DimExpr::to_string() const { return key_; }

namespace {

class DimExprParser {
 public:
  explicit DimExprParser(std::string_view text) : text_(text) {}

  StatusOr<DimExpr> parse() {
    KILN_ASSIGN_OR_RETURN(DimExpr expr, parse_sum());
    skip_space();
    if (pos_ != text_.size()) return error("unexpected character");
    return expr;
  }

 private:
  static constexpr int kMaxDepth = 64;

  Status error(std::string_view what) const {
    return invalid_argument("bad dim expression '{}': {} at offset {}", text_, what, pos_);
  }
  void skip_space() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  StatusOr<DimExpr> parse_sum() {
    if (++depth_ > kMaxDepth) return error("nesting too deep");
    KILN_ASSIGN_OR_RETURN(DimExpr total, parse_product());
    while (true) {
      if (consume('+')) {
        KILN_ASSIGN_OR_RETURN(DimExpr term, parse_product());
        total = total + term;
      } else if (consume('-')) {
        KILN_ASSIGN_OR_RETURN(DimExpr term, parse_product());
        total = total - term;
      } else {
        break;
      }
    }
    --depth_;
    return total;
  }

  StatusOr<DimExpr> parse_product() {
    KILN_ASSIGN_OR_RETURN(DimExpr total, parse_factor());
    while (consume('*')) {
      KILN_ASSIGN_OR_RETURN(DimExpr factor, parse_factor());
      total = total * factor;
    }
    return total;
  }

  StatusOr<int64_t> parse_integer() {
    skip_space();
    size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, text_[pos_] - '0', &value)) {
        return error("integer overflow");
      }
      ++pos_;
    }
    if (pos_ == start) return error("expected an integer");
    return value;
  }

  StatusOr<DimExpr> parse_factor() {
    skip_space();
    if (pos_ >= text_.size()) return error("unexpected end");
    char c = text_[pos_];
    if (c == '-') {
      ++pos_;
      if (++depth_ > kMaxDepth) return error("nesting too deep");
      KILN_ASSIGN_OR_RETURN(DimExpr inner, parse_factor());
      --depth_;
      return DimExpr(-1) * inner;
    }
    if (c == '(') {
      ++pos_;
      KILN_ASSIGN_OR_RETURN(DimExpr inner, parse_sum());
      if (!consume(')')) return error("expected ')'");
      return inner;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      KILN_ASSIGN_OR_RETURN(int64_t value, parse_integer());
      return DimExpr(value);
    }
    if (c == '"') return parse_quoted_symbol();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        ++pos_;
      }
      std::string name(text_.substr(start, pos_ - start));
      if (name == "min" || name == "max") return parse_min_max(name == "min");
      if (name != "floor") return DimExpr::symbol(name);
      if (!consume('(')) return error("expected '(' after floor");
      KILN_ASSIGN_OR_RETURN(DimExpr numerator, parse_sum());
      if (!consume('/')) return error("expected '/' in floor");
      KILN_ASSIGN_OR_RETURN(int64_t divisor, parse_integer());
      if (divisor <= 0) return error("floor divisor must be positive");
      if (!consume(')')) return error("expected ')'");
      return numerator.floor_div(divisor);
    }
    return error("unexpected character");
  }

  StatusOr<DimExpr> parse_min_max(bool is_min) {
    if (!consume('(')) return error("expected '(' after min/max");
    KILN_ASSIGN_OR_RETURN(DimExpr a, parse_sum());
    if (!consume(',')) return error("expected ',' in min/max");
    KILN_ASSIGN_OR_RETURN(DimExpr b, parse_sum());
    if (!consume(')')) return error("expected ')'");
    return is_min ? DimExpr::min(a, b) : DimExpr::max(a, b);
  }

  StatusOr<DimExpr> parse_quoted_symbol() {
    ++pos_;
    std::string name;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      name += text_[pos_++];
    }
    if (pos_ >= text_.size()) return error("unterminated quoted symbol");
    ++pos_;
    return DimExpr::symbol(name);
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

StatusOr<DimExpr> parse_dim_expr(std::string_view text) { return DimExprParser(text).parse(); }

}  // namespace kiln
