// libFuzzer target: untrusted .npy bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kiln/tooling/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensor =
      kiln::parse_npy(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  if (tensor.ok()) (void)kiln::serialize_npy(*tensor);
  return 0;
}
