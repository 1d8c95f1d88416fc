// libFuzzer target: `--input`/`--output` spec strings (inline values only: specs naming files are
// skipped so the fuzzer never reads the file system) and the dim-expression and shape parsers.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kiln/shape/shape.h"
#include "kiln/tooling/tensor_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // A splat ("100000x100000xf32=0") allocates its whole shape: types over 64 MiB are parsed
  // but not filled, so the fuzzer stays within its memory limit (inline values that large could
  // not fit in an input anyway).
  bool small = true;
  if (auto type = kiln::parse_tensor_type(text.substr(0, text.find('='))); type.ok()) {
    // parse_tensor_type refused a byte count over 64 bits, so this product cannot overflow.
    uint64_t bytes = kiln::dtype_size(type->dtype);
    for (int64_t dim : type->shape) bytes *= static_cast<uint64_t>(dim);
    small = bytes <= (uint64_t{64} << 20);
  }
  if (text.find('@') == std::string_view::npos && small) {
    (void)kiln::parse_tensor_spec(text);
    (void)kiln::parse_tensor_type(text);
  }
  (void)kiln::parse_output_spec(text);
  auto expr = kiln::parse_dim_expr(text);
  if (expr.ok()) (void)expr->evaluate({{"N", 3}});
  (void)kiln::parse_shape(text);
  return 0;
}
