// Tensor files and tensor text: raw little-endian .bin and NumPy .npy files (read and atomic
// write), and the human-readable form printed for `--output=-`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln {

// Largest tensor file kiln reads (16 GiB): a bound on memory taken by an untrusted file.
inline constexpr uint64_t kMaxTensorFileBytes = uint64_t{1} << 34;

enum class TensorFileFormat {
  kRaw,    // ".bin": element bytes only, little-endian, row-major; shape and dtype kept elsewhere
  kNpy,    // ".npy"
  kCodec,  // an extension with a registered TensorFileCodec (".pb" in the `kiln` CLI)
};

// The format named by the path's extension (case-insensitive ".bin", ".npy", or one registered
// with register_tensor_file_codec). Error (invalid argument, naming the path) for any other.
StatusOr<TensorFileFormat> tensor_file_format(std::string_view path);

// Reads a raw little-endian file holding exactly element_count(shape) * dtype_size(dtype) bytes.
// Errors: the file's own (not found, unreadable); kDataLoss when its size differs, naming the
// file, the expected and the actual byte counts; kInvalidArgument for a bool byte other than 0/1;
// kOutOfRange for an overflowing shape.
StatusOr<Tensor> read_raw_tensor_file(const std::string& path, DType dtype,
                                      const ConcreteShape& shape);

// Writes `tensor` to `path` in the format its extension names, atomically: the file appears
// complete or not at all, and on any error a previous file at `path` is left as it was.
// Errors: an unknown extension; a tensor without valid storage; bf16 as .npy (unimplemented); the
// file system's (naming the path); kCodec for a path no registered codec claims.
Status write_tensor_file(const std::string& path, const Tensor& tensor);
// The same with the format given, whatever the extension.
Status write_tensor_file(const std::string& path, const Tensor& tensor, TensorFileFormat format);

// The text printed for `--output=-`: a first line with the type in --input spec syntax
// ("2x3xf32", "f32" for a scalar), then every value, one row (last dim) per line and wrapped to
// about `line_width` columns, each line starting with the index of its first value:
//   2x3xf32
//   [0,0]: 1 2 3
//   [1,0]: 4 5 6
// Floats print in the shortest form that reads back to the same value (nan, inf, -inf spelled as
// the --input parser takes them); bool as 0/1. Ends with '\n'. An empty tensor prints its type
// only.
std::string format_tensor(const Tensor& tensor, int line_width = 100);

// Tensors of more values than this print summarized (as numpy does).
inline constexpr int64_t kSummarizeOver = 1000;

// format_tensor for up to kSummarizeOver values; above, a summary like numpy's: along each dim
// the first and last `edge_items` indices, "..." for the rest (a line of its own between rows,
// within a row between values), then a line saying how many values there are:
//   2x1000xf32
//   [0,0]: 0 1 2 ... 997 998 999
//   [1,0]: 0 1 2 ... 997 998 999
//   (2000 values; the first and last 3 along each dim shown, --print-all shows all)
std::string format_tensor_summary(const Tensor& tensor, int64_t edge_items = 3);

// One element as format_tensor prints it. `index` must be in range.
std::string format_element(const Tensor& tensor, int64_t index);

}  // namespace kiln
