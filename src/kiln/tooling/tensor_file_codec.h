// Tensor file formats that kiln_tooling cannot parse itself, registered by the program that needs
// them. TensorProto (.pb) files need protobuf, which only kiln_onnx may link (DESIGN.md); the
// `kiln` CLI registers kiln_onnx's reader and writer for ".pb" at startup, and tensor specs
// (`--input`, `--expected_output`, `--output`) then take .pb files like .npy ones. Without a
// registration .pb stays refused as unsupported.
//
// Registration is meant for program start-up; lookups are thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln {

struct TensorFileCodec {
  std::string name;       // shown in messages, e.g. "TensorProto"
  std::string extension;  // with the dot, e.g. ".pb"; matched ignoring case
  // Reads the tensor (dtype and shape come from the file). Errors name the path.
  std::function<StatusOr<Tensor>(const std::string& path)> read;
  // Writes atomically (nothing left at `path` on error). Errors name the path.
  std::function<Status(const std::string& path, const Tensor& tensor)> write;
};

// Adds `codec`, replacing one registered for the same extension.
void register_tensor_file_codec(TensorFileCodec codec);

// The codec whose extension ends `path` (ignoring case), or nullptr. The pointer stays valid
// until that extension is registered again.
const TensorFileCodec* find_tensor_file_codec(std::string_view path);

}  // namespace kiln
