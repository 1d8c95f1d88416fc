// File-name templates in the test-suite manifest: "input_b{N}.bin" names one file per size of the
// symbol N, so a suite can give a different data file for each size a case runs at.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/shape/dim_expr.h"

namespace kiln::suite {

// A symbol name as the manifest takes it: letters, digits, '_', '.', ':' and '-', not starting
// with a digit (what ONNX exporters use for dim_param).
bool is_symbol_name(std::string_view text);

// Names of the {SYMBOL} placeholders in `pattern`, in order (duplicates kept). Error (naming
// `json_path`) for an unterminated '{', a stray '}' or a placeholder that is not a symbol name.
StatusOr<std::vector<std::string>> path_symbols(const std::string& pattern,
                                                const std::string& json_path);

// Replaces each {SYMBOL} in `pattern` by its size. Error (naming `json_path`) for a symbol
// `sizes` does not bind, or a malformed pattern.
StatusOr<std::string> expand_path(const std::string& pattern, const Bindings& sizes,
                                  const std::string& json_path);

}  // namespace kiln::suite
