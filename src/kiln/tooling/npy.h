// NumPy .npy format (https://numpy.org/neps/nep-0001-npy-format.html): reading and writing one
// dense tensor. .npy files are untrusted input: every header field is validated and sizes are
// checked before anything is allocated.
//
// Read: versions 1.0, 2.0 and 3.0; header a Python dict literal with exactly the keys 'descr',
// 'fortran_order' and 'shape' (any order, ' or " quotes, trailing commas, Python 2 '3L' ints);
// descr '<f2' '<f4' '<f8' '<i8' '<i4' '<i2' '<u8' '<u4' '<u2' and, for 1-byte types, '|i1' '|u1'
// '|b1' (or with '<'/'>');
// fortran_order False; shape a tuple of non-negative ints, () for a scalar. The data must be
// exactly element count * element size bytes, and bool bytes must be 0 or 1.
// Errors: kInvalidArgument for a malformed header, kUnimplemented for valid .npy that kiln does not
// take (big-endian, fortran_order True, other dtypes), kDataLoss for truncated or oversized
// data, kOutOfRange for overflowing shapes. Messages name the file.
//
// Write: version 1.0 (2.0 only when the header would not fit 65535 bytes), header padded with
// spaces and '\n' so the data starts at a multiple of 64 bytes, as numpy does.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/tooling/tensor_io.h"

namespace kiln {

// Parses the bytes of a whole .npy file. `name` (usually the path) is quoted in error messages.
StatusOr<Tensor> parse_npy(std::span<const std::byte> bytes, std::string_view name);
StatusOr<Tensor> parse_npy(std::string_view bytes, std::string_view name);

// Reads and parses the .npy file at `path`; files over `max_bytes` are refused (kOutOfRange).
StatusOr<Tensor> read_npy_file(const std::string& path, uint64_t max_bytes = kMaxTensorFileBytes);

// The header of a .npy file holding `tensor` (magic through the '\n' before the data; its length
// is a multiple of 64). Error (unimplemented) for bf16, which numpy has no dtype for.
StatusOr<std::string> serialize_npy_header(const Tensor& tensor);
// The bytes of a whole .npy file holding `tensor`: the header, then the data (bool as 0/1 bytes).
StatusOr<std::string> serialize_npy(const Tensor& tensor);

}  // namespace kiln
