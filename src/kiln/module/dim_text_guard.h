// A guard run on dim text from an untrusted module before parse_dim_expr sees it.
//
// parse_dim_expr accepts any expression and expands it, so short text can ask for an enormous
// expansion ("(a + b)*(c + d)*..." doubles its terms with every factor) and exhaust time or
// memory. kiln writes dims only as DimExpr::to_string, whose canonical form is already expanded:
//
//   dim   := '0' | ['-'] term ((' + ' | ' - ') term)*
//   term  := INT | [INT '*'] atom ('*' atom)*        INT >= 1, no leading zero, no "1*"
//   atom  := name | 'floor(' name '/' INT ')' | 'floor((' inner ')/' INT ')'
//          | 'min(' dim ', ' dim ')' | 'max(' dim ', ' dim ')'   operands in ascending text order,
//                                                              not both constant, nesting <= 16
//   inner := term (' + ' term)*                      coefficients in [1, divisor), not constant
//   name  := identifier other than "floor", "min" and "max", or '"' text '"' (only '"' and '\'
//   escaped) when the
//            name is not such an identifier
// with the atoms of a term in ascending text order and the terms of a sum ordered as DimExpr
// prints them (more distinct atoms first, then ascending), so equal expressions have equal text.
// In this form products never multiply sums, terms never merge and a floor never splits into
// several terms, so parsing costs about as much as reading the text. The loader refuses any other
// form, and the writer checks that every dim's text is canonical and parses back to the dim.
#pragma once

#include <string_view>

#include "kiln/base/status.h"

namespace kiln::module {

// OK when `text` is in the canonical form above; otherwise an error naming the offset.
Status check_canonical_dim_text(std::string_view text);

}  // namespace kiln::module
