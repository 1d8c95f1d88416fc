// TensorProto files (.pb): the tensor format of the ONNX backend test data
// (test_data_set_N/input_K.pb, output_K.pb) and of the model zoo's test sets. Read and atomic
// write, with no protobuf type in the interface, so the `kiln` CLI and the test suite can take
// .pb files without including protobuf headers (only src/kiln/onnx may, DESIGN.md).
//
// Reading takes what tensor_from_proto takes (raw_data or the typed field; f32 f64 i64 i32 i8 u8
// bool); external data is read only from files inside the .pb file's own directory. Files are
// untrusted: sizes are checked before allocation, and every error names the file.
// Errors: kNotFound (no file), kOutOfRange (over `max_bytes`), kDataLoss (not a parseable
// TensorProto), kInvalidArgument (dims and data disagree), kUnimplemented (element type kiln does
// not support, segmented tensors).
//
// Writing stores dims, data_type, name (when given) and the data as raw_data (little-endian).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/base/host_value.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln::onnx_import {

struct TensorProtoFile {
  std::string name;  // TensorProto.name; may be empty
  Tensor tensor;
};

// Parses a serialized TensorProto. `source` (usually the path) names it in errors; external data
// is read from `base_dir` (empty: refused).
StatusOr<TensorProtoFile> parse_tensor_proto(std::string_view bytes, std::string_view source,
                                             const std::string& base_dir);

// Reads and parses the .pb file at `path`.
StatusOr<TensorProtoFile> read_tensor_proto_file(const std::string& path,
                                                 uint64_t max_bytes = uint64_t{1} << 31);

// A value file of the ONNX backend test data: a TensorProto for a tensor, a SequenceProto of
// TensorProtos for a sequence, an OptionalProto (holding a TensorProto or such a SequenceProto, or
// nothing) for an optional; `form` says which the model takes there. The sequence's dtype is its
// tensors'; an empty sequence or optional takes `dtype`. Errors as read_tensor_proto_file's, and
// kUnimplemented for sequences of anything but tensors.
StatusOr<HostValue> read_value_proto_file(const std::string& path, ValueForm form, DType dtype,
                                          uint64_t max_bytes = uint64_t{1} << 31);

// The serialized TensorProto holding `tensor` (with `name` when not empty). Error for a tensor
// without valid storage.
StatusOr<std::string> serialize_tensor_proto(const Tensor& tensor, std::string_view name = {});

// Writes serialize_tensor_proto(tensor, name) to `path` atomically (nothing is left at `path` on
// error; a previous file stays as it was). Errors name the path.
Status write_tensor_proto_file(const std::string& path, const Tensor& tensor,
                               std::string_view name = {});

}  // namespace kiln::onnx_import
