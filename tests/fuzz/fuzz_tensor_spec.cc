// libFuzzer target: `--input`/`--output` spec strings (inline values only: specs naming files are
// skipped so the fuzzer never reads the file system) and the dim-expression and shape parsers.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kiln/shape/shape.h"
#include "kiln/tooling/tensor_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (text.find('@') == std::string_view::npos) {
    (void)kiln::parse_tensor_spec(text);
    (void)kiln::parse_tensor_type(text);
  }
  (void)kiln::parse_output_spec(text);
  auto expr = kiln::parse_dim_expr(text);
  if (expr.ok()) (void)expr->evaluate({{"N", 3}});
  (void)kiln::parse_shape(text);
  return 0;
}
