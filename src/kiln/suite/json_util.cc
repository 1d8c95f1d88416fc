#include "kiln/suite/json_util.h"

#include <cctype>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln::suite {
namespace {

std::string describe(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return fmt::format("{} {}", json_type_name(value), text);
}

std::string join_quoted(std::initializer_list<std::string_view> items) {
  std::string out;
  for (std::string_view item : items) {
    if (!out.empty()) out += ", ";
    out += fmt::format("\"{}\"", item);
  }
  return out;
}

}  // namespace

StatusOr<Json> parse_json(std::string_view text, std::string_view source) {
  // nlohmann::json reports syntax errors by exception; none escapes this function.
  try {
    return Json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/true,
                       /*ignore_comments=*/true);
  } catch (const Json::parse_error& e) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < text.size() && i + 1 < e.byte; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..."
    if (size_t colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    return invalid_argument("'{}' is not valid JSON: line {}, column {}: {}", source, line, column,
                            what);
  } catch (const std::exception& e) {
    return invalid_argument("'{}' is not valid JSON: {}", source, e.what());
  }
}

std::string child_path(std::string_view path, std::string_view key) {
  bool plain = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0]));
  for (char c : key) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') plain = false;
  }
  if (plain) return fmt::format("{}.{}", path, key);
  return fmt::format("{}[{}]", path, Json(std::string(key)).dump());
}

std::string index_path(std::string_view path, size_t index) {
  return fmt::format("{}[{}]", path, index);
}

std::string_view json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    case Json::value_t::string: return "string";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::null: return "null";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "number";
    default: return "value";
  }
}

Status check_object(const Json& value, std::string_view path,
                    std::initializer_list<std::string_view> known) {
  if (!value.is_object()) {
    return invalid_argument("{}: expected an object, got {}", path, describe(value));
  }
  for (const auto& [key, member] : value.items()) {
    bool found = false;
    for (std::string_view k : known) found = found || k == key;
    if (!found) {
      return invalid_argument("{}: unknown key (expected one of: {})", child_path(path, key),
                              join_quoted(known));
    }
  }
  return ok_status();
}

const Json* find_member(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

StatusOr<std::string> read_string(const Json& value, std::string_view path) {
  if (!value.is_string())
    return invalid_argument("{}: expected a string, got {}", path, describe(value));
  return value.get<std::string>();
}

StatusOr<double> read_number(const Json& value, std::string_view path) {
  if (!value.is_number())
    return invalid_argument("{}: expected a number, got {}", path, describe(value));
  double number = value.get<double>();
  if (!std::isfinite(number))
    return out_of_range("{}: {} is not a finite number", path, value.dump());
  return number;
}

StatusOr<int64_t> read_integer(const Json& value, std::string_view path) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_unsigned()) {
    return out_of_range("{}: {} does not fit a 64-bit signed integer", path, value.dump());
  }
  if (value.is_number_float()) {
    double number = value.get<double>();
    if (std::isfinite(number) && std::floor(number) == number && std::fabs(number) < 9e15) {
      return static_cast<int64_t>(number);
    }
  }
  return invalid_argument("{}: expected an integer, got {}", path, describe(value));
}

StatusOr<bool> read_bool(const Json& value, std::string_view path) {
  if (!value.is_boolean())
    return invalid_argument("{}: expected true or false, got {}", path, describe(value));
  return value.get<bool>();
}

Status check_array(const Json& value, std::string_view path, bool non_empty) {
  if (!value.is_array())
    return invalid_argument("{}: expected an array, got {}", path, describe(value));
  if (non_empty && value.empty()) return invalid_argument("{}: must not be empty", path);
  return ok_status();
}

StatusOr<std::string> read_choice(const Json& value, std::string_view path,
                                  std::initializer_list<std::string_view> choices) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_string(value, path));
  for (std::string_view choice : choices) {
    if (choice == text) return text;
  }
  return invalid_argument("{}: \"{}\" is not one of: {}", path, text, join_quoted(choices));
}

}  // namespace kiln::suite
