// Strict reading of JSON documents (the test-suite manifest): every object key must be known,
// every value must have the expected type, and every error names the JSON path of the offending
// value ("$.models[2].tolerance.atol") so a user can find it without counting braces.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kiln/base/status.h"

namespace kiln::suite {

using Json = nlohmann::json;

// Parses `text` (JSON; // and /* */ comments allowed). Errors (invalid argument) give the line
// and column of the syntax error and quote `source`.
StatusOr<Json> parse_json(std::string_view text, std::string_view source);

// "$.a" + "b" → "$.a.b"; keys that are not plain identifiers are bracketed: $.a["x:0"].
std::string child_path(std::string_view path, std::string_view key);
// "$.a" + 2 → "$.a[2]".
std::string index_path(std::string_view path, size_t index);

// "object", "array", "string", "number", "boolean", "null".
std::string_view json_type_name(const Json& value);

// Error unless `value` is an object whose keys are all in `known` (the message lists them).
Status check_object(const Json& value, std::string_view path,
                    std::initializer_list<std::string_view> known);
// The member `key` of an object, or nullptr.
const Json* find_member(const Json& object, std::string_view key);

// Typed reads; errors name `path` and the type found.
StatusOr<std::string> read_string(const Json& value, std::string_view path);
StatusOr<double> read_number(const Json& value, std::string_view path);    // finite; not a bool
StatusOr<int64_t> read_integer(const Json& value, std::string_view path);  // no fraction
StatusOr<bool> read_bool(const Json& value, std::string_view path);
// Error unless `value` is an array (a non-empty one when `non_empty`).
Status check_array(const Json& value, std::string_view path, bool non_empty = false);

// A string that must be one of `choices`; the error lists them.
StatusOr<std::string> read_choice(const Json& value, std::string_view path,
                                  std::initializer_list<std::string_view> choices);

}  // namespace kiln::suite
