#include "kiln/suite/path_template.h"

#include <cctype>

#include <fmt/format.h>

namespace kiln::suite {

bool is_symbol_name(std::string_view text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != ':' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

StatusOr<std::vector<std::string>> path_symbols(const std::string& pattern,
                                                const std::string& json_path) {
  std::vector<std::string> out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '}')
      return invalid_argument("{}: unmatched '}}' in \"{}\"", json_path, pattern);
    if (pattern[i] != '{') continue;
    size_t close = pattern.find('}', i);
    if (close == std::string::npos) {
      return invalid_argument("{}: unterminated '{{' in \"{}\"", json_path, pattern);
    }
    std::string name = pattern.substr(i + 1, close - i - 1);
    if (!is_symbol_name(name)) {
      return invalid_argument("{}: \"{{{}}}\" in \"{}\" is not a {{SYMBOL}} placeholder", json_path,
                              name, pattern);
    }
    out.push_back(std::move(name));
    i = close;
  }
  return out;
}

StatusOr<std::string> expand_path(const std::string& pattern, const Bindings& sizes,
                                  const std::string& json_path) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> symbols, path_symbols(pattern, json_path));
  std::string out;
  size_t next = 0;
  for (const std::string& symbol : symbols) {
    size_t open = pattern.find('{', next);
    out += pattern.substr(next, open - next);
    auto it = sizes.find(symbol);
    if (it == sizes.end()) {
      return invalid_argument("{}: \"{}\" uses {{{}}}, which is not a symbol of this model",
                              json_path, pattern, symbol);
    }
    out += std::to_string(it->second);
    next = open + symbol.size() + 2;
  }
  return out + pattern.substr(next);
}

}  // namespace kiln::suite
