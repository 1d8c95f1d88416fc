// libFuzzer target: untrusted TensorProto (.pb) bytes, the test-data format of the ONNX backend
// tests. External data is refused (empty base_dir) so the fuzzer never reads the file system; a
// parsed tensor is serialized again and must parse back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "kiln/onnx/tensor_proto_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto parsed = kiln::onnx_import::parse_tensor_proto(bytes, "fuzz.pb", /*base_dir=*/"");
  if (!parsed.ok()) return 0;
  auto serialized = kiln::onnx_import::serialize_tensor_proto(parsed->tensor, parsed->name);
  if (!serialized.ok()) return 0;
  auto again = kiln::onnx_import::parse_tensor_proto(*serialized, "fuzz-again.pb", "");
  if (!again.ok() || again->tensor.dtype() != parsed->tensor.dtype() ||
      again->tensor.shape() != parsed->tensor.shape() ||
      again->tensor.byte_size() != parsed->tensor.byte_size() ||
      (parsed->tensor.byte_size() > 0 &&
       std::memcmp(again->tensor.data(), parsed->tensor.data(), parsed->tensor.byte_size()) != 0 &&
       parsed->tensor.dtype() != kiln::DType::kBool)) {
    std::abort();  // a tensor kiln read must survive its own write
  }
  return 0;
}
