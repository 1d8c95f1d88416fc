// Text for the HTML reports of `kiln test-suite` and `kiln triage`.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// `text` with &, <, > and " escaped, for an HTML element or a quoted attribute value.
std::string html_escape(std::string_view text);

}  // namespace kiln
