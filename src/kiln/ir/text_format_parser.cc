// parse_kir: the reader half of text_format.h. Input is untrusted; every error names its line.
#include <cctype>
#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "kiln/base/checked_math.h"
#include "kiln/ir/text_format.h"

namespace kiln::ir {
namespace {

constexpr uint64_t kBlobAlignment = 64;

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}
bool is_number_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+';
}

// parse_dim_expr recurses once per unary minus without a depth limit; canonical text never has
// "- -", so refusing it keeps a hostile "------...N" from exhausting the stack.
bool has_repeated_minus(std::string_view text) {
  bool after_minus = false;
  for (char c : text) {
    if (c == ' ') continue;
    if (c == '-' && after_minus) return true;
    after_minus = c == '-';
  }
  return false;
}

// What the reader saw, for error messages: a short, escaped excerpt.
std::string excerpt(std::string_view rest) {
  if (rest.empty()) return "end of line";
  std::string out = "'";
  for (char c : rest.substr(0, 24)) {
    auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u >= 0x7f) ? fmt::format("\\x{:02x}", u) : std::string(1, c);
  }
  return out + (rest.size() > 24 ? "...'" : "'");
}

// One header line, consumed left to right.
class Cursor {
 public:
  Cursor(std::string_view text, int line) : text_(text), line_(line) {}

  int line() const { return line_; }
  Status error(std::string_view expected) const {
    return invalid_argument("line {}: expected {}, got {}", line_, expected, excerpt(rest()));
  }
  Status fail(std::string_view message) const {
    return invalid_argument("line {}: {}", line_, message);
  }

  bool try_consume(std::string_view literal) {
    skip_spaces();
    if (rest().substr(0, literal.size()) != literal) return false;
    pos_ += literal.size();
    return true;
  }
  Status expect(std::string_view literal) {
    if (try_consume(literal)) return ok_status();
    return error(fmt::format("'{}'", literal));
  }
  Status expect_end() {
    skip_spaces();
    if (pos_ == text_.size()) return ok_status();
    return error("end of line");
  }
  bool peek(char c) {
    skip_spaces();
    return pos_ < text_.size() && text_[pos_] == c;
  }

  StatusOr<std::string> word(std::string_view what) {
    skip_spaces();
    size_t start = pos_;
    while (pos_ < text_.size() && is_word_char(text_[pos_])) ++pos_;
    if (pos_ == start) return error(what);
    return std::string(text_.substr(start, pos_ - start));
  }

  StatusOr<std::string> quoted(std::string_view what) {
    skip_spaces();
    if (pos_ >= text_.size() || text_[pos_] != '"')
      return error(fmt::format("{} (a quoted string)", what));
    ++pos_;
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) break;
      char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x': {
          unsigned value = 0;
          auto [end, ec] = std::from_chars(
              text_.data() + pos_, text_.data() + std::min(pos_ + 2, text_.size()), value, 16);
          if (ec != std::errc() || end != text_.data() + pos_ + 2)
            return fail("bad \\x escape in a quoted string");
          pos_ += 2;
          out += static_cast<char>(value);
          break;
        }
        default: return fail(fmt::format("unknown escape '\\{}' in a quoted string", e));
      }
    }
    if (pos_ >= text_.size()) return fail(fmt::format("unterminated quoted string for {}", what));
    ++pos_;
    return out;
  }

  StatusOr<std::string> name(std::string_view what) {
    if (peek('"')) return quoted(what);
    return word(what);
  }

  StatusOr<int64_t> integer(std::string_view what) {
    std::string_view token = number_token();
    int64_t value = 0;
    auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (token.empty() || ec != std::errc() || end != token.data() + token.size()) {
      pos_ -= token.size();
      return error(fmt::format("{} (a 64-bit integer)", what));
    }
    return value;
  }

  StatusOr<double> real(std::string_view what) {
    std::string_view token = number_token();
    double value = 0;
    auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (token.empty() || ec != std::errc() || end != token.data() + token.size()) {
      pos_ -= token.size();
      return error(fmt::format("{} (a number)", what));
    }
    return value;
  }

  // dtype then shape: f32[N,3,floor((N + 1)/2)]
  StatusOr<std::pair<DType, Shape>> type(std::string_view what) {
    skip_spaces();
    size_t start = pos_;
    while (pos_ < text_.size() && std::isalnum(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    std::string_view dtype_text = text_.substr(start, pos_ - start);
    auto dtype = parse_dtype(dtype_text);
    if (!dtype) {
      pos_ = start;
      return error(
          fmt::format("the type of {} (a dtype f32, f64, f16, i64, i32, i8, u8 or bool, "
                      "then a shape)",
                      what));
    }
    if (pos_ >= text_.size() || text_[pos_] != '[')
      return error(fmt::format("'[' starting the shape of {}", what));
    ++pos_;
    Shape shape;
    size_t dim_start = pos_;
    bool quoted = false;
    for (; pos_ < text_.size(); ++pos_) {
      char c = text_[pos_];
      if (quoted && c == '\\') {
        ++pos_;
        continue;
      }
      if (c == '"') quoted = !quoted;
      if (quoted || (c != ',' && c != ']')) continue;
      std::string_view dim_text = text_.substr(dim_start, pos_ - dim_start);
      if (!(c == ']' && shape.empty() && dim_text.empty())) {
        if (has_repeated_minus(dim_text)) {
          return fail(fmt::format("in the shape of {}: repeated '-' signs", what));
        }
        auto dim = parse_dim_expr(dim_text);
        if (!dim.ok())
          return fail(fmt::format("in the shape of {}: {}", what, dim.status().message()));
        if (dim->is_constant() && *dim->constant_value() < 0) {
          return fail(
              fmt::format("in the shape of {}: negative dim {}", what, *dim->constant_value()));
        }
        shape.push_back(std::move(dim).value());
      }
      dim_start = pos_ + 1;
      if (c == ']') {
        ++pos_;
        return std::pair<DType, Shape>(*dtype, std::move(shape));
      }
    }
    return fail(fmt::format("unterminated shape of {}", what));
  }

 private:
  std::string_view rest() const { return text_.substr(pos_); }
  void skip_spaces() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  std::string_view number_token() {
    skip_spaces();
    size_t start = pos_;
    while (pos_ < text_.size() && is_number_char(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  std::string_view text_;
  int line_;
  size_t pos_ = 0;
};

class KirParser {
 public:
  explicit KirParser(std::string_view bytes) : bytes_(bytes) {}

  StatusOr<Graph> parse() {
    KILN_ASSIGN_OR_RETURN(Cursor version, next_line("the format line 'kiln-ir 1'"));
    if (version.try_consume("kiln-ir")) {
      auto number = version.integer("the format version");
      if (number.ok() && *number != kKirVersion) {
        return unimplemented("line {}: .kir format version {}; this build reads version {}",
                             version.line(), *number, kKirVersion);
      }
      if (number.ok() && version.expect_end().ok()) return parse_body();
    }
    return invalid_argument("line {}: not a kiln IR file: expected the format line 'kiln-ir {}'",
                            version.line(), kKirVersion);
  }

 private:
  struct Defined {
    ValueId id;
    int line;
  };
  struct PendingConstant {
    ValueId id;
    uint64_t offset;
    uint64_t size;
    int line;
  };

  // The next line that is not blank or a comment; an error at end of input.
  StatusOr<Cursor> next_line(std::string_view expected) {
    while (pos_ < bytes_.size()) {
      size_t end = bytes_.find('\n', pos_);
      if (end == std::string_view::npos) end = bytes_.size();
      std::string_view text = bytes_.substr(pos_, end - pos_);
      pos_ = end == bytes_.size() ? end : end + 1;
      ++line_;
      if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
      size_t first = text.find_first_not_of(' ');
      if (first == std::string_view::npos || text[first] == '#') continue;
      return Cursor(text, line_);
    }
    return data_loss("line {}: expected {}, got the end of the file (truncated?)", line_ + 1,
                     expected);
  }

  StatusOr<Graph> parse_body() {
    KILN_ASSIGN_OR_RETURN(Cursor graph_line, next_line("'graph \"<name>\"'"));
    KILN_RETURN_IF_ERROR(graph_line.expect("graph"));
    KILN_ASSIGN_OR_RETURN(graph_.name, graph_line.quoted("the graph name"));
    KILN_RETURN_IF_ERROR(graph_line.expect_end());

    KILN_ASSIGN_OR_RETURN(Cursor opset_line, next_line("'opset <n>'"));
    KILN_RETURN_IF_ERROR(opset_line.expect("opset"));
    KILN_ASSIGN_OR_RETURN(graph_.opset, opset_line.integer("the opset"));
    KILN_RETURN_IF_ERROR(opset_line.expect_end());

    KILN_ASSIGN_OR_RETURN(Cursor symbols_line, next_line("'symbols ...'"));
    KILN_RETURN_IF_ERROR(parse_symbols(symbols_line));

    while (true) {
      KILN_ASSIGN_OR_RETURN(Cursor line, next_line("an input, const, node, output or blob line"));
      if (line.try_consume("input ")) {
        KILN_ASSIGN_OR_RETURN(ValueId id, define_value(line, "graph input"));
        graph_.mutable_inputs().push_back(id);
        KILN_RETURN_IF_ERROR(line.expect_end());
      } else if (line.try_consume("const ")) {
        KILN_RETURN_IF_ERROR(parse_const(line));
      } else if (line.try_consume("node ")) {
        KILN_RETURN_IF_ERROR(parse_node(line));
      } else if (line.try_consume("output ")) {
        KILN_ASSIGN_OR_RETURN(ValueId id, use_value(line, "graph output"));
        if (id == kAbsent) return line.fail("a graph output cannot be absent ('-')");
        graph_.add_output(id);
        KILN_RETURN_IF_ERROR(line.expect_end());
      } else if (line.try_consume("blob ")) {
        return parse_blob(line);
      } else {
        return line.error("'input', 'const', 'node', 'output' or 'blob'");
      }
    }
  }

  Status parse_symbols(Cursor& line) {
    KILN_RETURN_IF_ERROR(line.expect("symbols"));
    while (!line.expect_end().ok()) {
      if (line.peek('"')) {
        KILN_ASSIGN_OR_RETURN(std::string name, line.quoted("a symbol"));
        symbols_.insert(std::move(name));
        continue;
      }
      KILN_ASSIGN_OR_RETURN(std::string text, line.word("a symbol"));
      auto dim = parse_dim_expr(text);
      if (!dim.ok() || !dim->is_symbol())
        return line.fail(fmt::format("'{}' is not a symbol name", text));
      symbols_.insert(dim->symbols().front());
    }
    return ok_status();
  }

  Status check_symbols(const Cursor& line, const Shape& shape, const std::string& name) {
    for (const DimExpr& dim : shape) {
      for (const std::string& symbol : dim.symbols()) {
        if (!symbols_.count(symbol)) {
          return line.fail(
              fmt::format("value '{}' uses symbol '{}', which the symbols line does "
                          "not declare",
                          name, symbol));
        }
      }
    }
    return ok_status();
  }

  // "name": type — a new value.
  StatusOr<ValueId> define_value(Cursor& line, std::string_view what) {
    KILN_ASSIGN_OR_RETURN(std::string name, line.quoted(fmt::format("the {} name", what)));
    KILN_RETURN_IF_ERROR(line.expect(":"));
    KILN_ASSIGN_OR_RETURN(auto type, line.type(fmt::format("'{}'", name)));
    KILN_RETURN_IF_ERROR(check_symbols(line, type.second, name));
    auto [it, inserted] = values_.emplace(name, Defined{0, line.line()});
    if (!inserted) {
      return line.fail(
          fmt::format("value '{}' is already defined on line {}", name, it->second.line));
    }
    it->second.id = graph_.add_value(
        Value{name, type.first, std::move(type.second), std::nullopt, std::nullopt});
    return it->second.id;
  }

  // "-" or "name": type — an existing value, whose type must match its definition.
  StatusOr<ValueId> use_value(Cursor& line, std::string_view what) {
    if (line.try_consume("-")) return kAbsent;
    KILN_ASSIGN_OR_RETURN(std::string name, line.quoted(fmt::format("the {} name", what)));
    KILN_RETURN_IF_ERROR(line.expect(":"));
    KILN_ASSIGN_OR_RETURN(auto type, line.type(fmt::format("'{}'", name)));
    auto it = values_.find(name);
    if (it == values_.end()) {
      return line.fail(fmt::format("{} '{}' is not defined on an earlier line", what, name));
    }
    const Value& value = graph_.value(it->second.id);
    if (value.dtype != type.first || value.shape != type.second) {
      return line.fail(
          fmt::format("{} '{}' has type {}{} here but {}{} where it is defined on "
                      "line {}",
                      what, name, dtype_name(type.first), shape_to_string(type.second),
                      dtype_name(value.dtype), shape_to_string(value.shape), it->second.line));
    }
    return it->second.id;
  }

  Status parse_const(Cursor& line) {
    KILN_ASSIGN_OR_RETURN(ValueId id, define_value(line, "constant"));
    const Value& value = graph_.value(id);
    KILN_RETURN_IF_ERROR(line.expect("offset="));
    KILN_ASSIGN_OR_RETURN(int64_t offset, line.integer("the constant's blob offset"));
    KILN_RETURN_IF_ERROR(line.expect("size="));
    KILN_ASSIGN_OR_RETURN(int64_t size, line.integer("the constant's byte size"));
    KILN_RETURN_IF_ERROR(line.expect_end());
    if (!is_static(value.shape)) {
      return line.fail(fmt::format("constant '{}' has symbolic shape {}", value.name,
                                   shape_to_string(value.shape)));
    }
    ConcreteShape dims;
    for (const DimExpr& dim : value.shape) dims.push_back(*dim.constant_value());
    auto count = checked_product(dims);
    auto bytes =
        count ? checked_mul(*count, static_cast<int64_t>(dtype_size(value.dtype))) : std::nullopt;
    if (!bytes) return line.fail(fmt::format("constant '{}' is too large", value.name));
    if (size != *bytes) {
      return line.fail(fmt::format("constant '{}' of type {}{} needs size={}, got {}", value.name,
                                   dtype_name(value.dtype), shape_to_string(value.shape), *bytes,
                                   size));
    }
    if (offset < 0 || offset % static_cast<int64_t>(kBlobAlignment) != 0) {
      return line.fail(fmt::format("constant '{}' offset {} is not a non-negative multiple of {}",
                                   value.name, offset, kBlobAlignment));
    }
    constants_.push_back(
        {id, static_cast<uint64_t>(offset), static_cast<uint64_t>(size), line.line()});
    return ok_status();
  }

  Status parse_value_list(Cursor& line, std::string_view what, bool define,
                          std::vector<ValueId>& out) {
    KILN_RETURN_IF_ERROR(line.expect("("));
    if (line.try_consume(")")) return ok_status();
    do {
      if (define) {
        if (line.try_consume("-"))
          return unimplemented("line {}: absent node outputs ('-') are not supported", line.line());
        KILN_ASSIGN_OR_RETURN(ValueId id, define_value(line, what));
        out.push_back(id);
      } else {
        KILN_ASSIGN_OR_RETURN(ValueId id, use_value(line, what));
        out.push_back(id);
      }
    } while (line.try_consume(","));
    return line.expect(")");
  }

  template <typename T, typename Read>
  StatusOr<std::vector<T>> parse_list(Cursor& line, Read read) {
    KILN_RETURN_IF_ERROR(line.expect("["));
    std::vector<T> out;
    if (line.try_consume("]")) return out;
    do {
      KILN_ASSIGN_OR_RETURN(T item, read());
      out.push_back(std::move(item));
    } while (line.try_consume(","));
    KILN_RETURN_IF_ERROR(line.expect("]"));
    return out;
  }

  StatusOr<Attribute> parse_attribute_value(Cursor& line, const std::string& kind) {
    auto read_int = [&] { return line.integer("an int"); };
    auto read_float = [&] { return line.real("a float"); };
    auto read_string = [&] { return line.quoted("a string"); };
    if (kind == "int") {
      KILN_ASSIGN_OR_RETURN(int64_t v, read_int());
      return Attribute(v);
    }
    if (kind == "float") {
      KILN_ASSIGN_OR_RETURN(double v, read_float());
      return Attribute(v);
    }
    if (kind == "string") {
      KILN_ASSIGN_OR_RETURN(std::string v, read_string());
      return Attribute(std::move(v));
    }
    if (kind == "ints") {
      KILN_ASSIGN_OR_RETURN(auto v, parse_list<int64_t>(line, read_int));
      return Attribute(std::move(v));
    }
    if (kind == "floats") {
      KILN_ASSIGN_OR_RETURN(auto v, parse_list<double>(line, read_float));
      return Attribute(std::move(v));
    }
    if (kind == "strings") {
      KILN_ASSIGN_OR_RETURN(auto v, parse_list<std::string>(line, read_string));
      return Attribute(std::move(v));
    }
    return line.fail(
        fmt::format("unknown attribute kind '{}' (expected int, float, string, ints, "
                    "floats or strings)",
                    kind));
  }

  Status parse_node(Cursor& line) {
    Node node;
    KILN_ASSIGN_OR_RETURN(node.name, line.quoted("the node name"));
    auto [previous, inserted] = node_lines_.emplace(node.name, line.line());
    if (!inserted) {
      return line.fail(
          fmt::format("node '{}' is already defined on line {}", node.name, previous->second));
    }
    KILN_ASSIGN_OR_RETURN(node.op_type, line.name("the op type"));
    KILN_RETURN_IF_ERROR(line.expect("in"));
    KILN_RETURN_IF_ERROR(parse_value_list(line, "node input", /*define=*/false, node.inputs));
    KILN_RETURN_IF_ERROR(line.expect("out"));
    KILN_RETURN_IF_ERROR(parse_value_list(line, "node output", /*define=*/true, node.outputs));
    if (line.try_consume("attrs")) {
      KILN_RETURN_IF_ERROR(line.expect("("));
      if (!line.try_consume(")")) {
        do {
          KILN_ASSIGN_OR_RETURN(std::string name, line.name("an attribute name"));
          KILN_RETURN_IF_ERROR(line.expect(":"));
          KILN_ASSIGN_OR_RETURN(std::string kind, line.word("an attribute kind"));
          KILN_RETURN_IF_ERROR(line.expect("="));
          KILN_ASSIGN_OR_RETURN(Attribute value, parse_attribute_value(line, kind));
          if (node.attributes.has(name))
            return line.fail(fmt::format("attribute '{}' is given twice", name));
          node.attributes.set(name, std::move(value));
        } while (line.try_consume(","));
        KILN_RETURN_IF_ERROR(line.expect(")"));
      }
    }
    KILN_RETURN_IF_ERROR(line.expect("origins"));
    KILN_RETURN_IF_ERROR(line.expect("("));
    if (!line.try_consume(")")) {
      do {
        KILN_ASSIGN_OR_RETURN(std::string origin, line.quoted("an origin node name"));
        node.origins.push_back(std::move(origin));
      } while (line.try_consume(","));
      KILN_RETURN_IF_ERROR(line.expect(")"));
    }
    KILN_RETURN_IF_ERROR(line.expect_end());
    graph_.add_node(std::move(node));
    return ok_status();
  }

  StatusOr<Graph> parse_blob(Cursor& line) {
    KILN_ASSIGN_OR_RETURN(int64_t declared, line.integer("the blob size in bytes"));
    KILN_RETURN_IF_ERROR(line.expect_end());
    if (declared < 0) return line.fail("negative blob size");
    uint64_t present = bytes_.size() - pos_;
    if (present != static_cast<uint64_t>(declared)) {
      return data_loss("line {}: the blob declares {} bytes but {} follow ({})", line.line(),
                       declared, present,
                       present < static_cast<uint64_t>(declared) ? "truncated" : "trailing data");
    }
    std::string_view blob = bytes_.substr(pos_);
    for (const PendingConstant& c : constants_) {
      Value& value = graph_.value(c.id);
      if (c.offset > blob.size() || c.size > blob.size() - c.offset) {
        return invalid_argument(
            "line {}: constant '{}' at offset {} with size {} lies beyond the "
            "{}-byte blob",
            c.line, value.name, c.offset, c.size, blob.size());
      }
      ConcreteShape dims;
      for (const DimExpr& dim : value.shape) dims.push_back(*dim.constant_value());
      KILN_ASSIGN_OR_RETURN(Tensor data, Tensor::create(value.dtype, std::move(dims)));
      if (c.size > 0) std::memcpy(data.mutable_data(), blob.data() + c.offset, c.size);
      value.constant = std::move(data);
    }
    Status verified = verify_graph(graph_);
    if (!verified.ok()) return std::move(verified).with_note("in the parsed .kir graph");
    return std::move(graph_);
  }

  std::string_view bytes_;
  size_t pos_ = 0;
  int line_ = 0;
  Graph graph_;
  std::set<std::string> symbols_;
  std::map<std::string, Defined> values_;
  std::map<std::string, int> node_lines_;
  std::vector<PendingConstant> constants_;
};

}  // namespace

StatusOr<Graph> parse_kir(std::string_view bytes) { return KirParser(bytes).parse(); }

}  // namespace kiln::ir
