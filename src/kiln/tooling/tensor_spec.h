// The tensor values of `kiln run` flags: `--input` / `--expected_output` (a tensor, given inline or
// by file) and `--output` (where a result goes).
//
// Tensor spec grammar:
//   SHAPExDTYPE=@FILE.bin    raw little-endian, row-major; the file must hold exactly
//                            element count * dtype size bytes        1x3x224x224xf32=@input.bin
//   SHAPExDTYPE=@FILE.npy    .npy whose dtype and shape must equal the spec's   2x3xf32=@a.npy
//   @FILE.npy                .npy, dtype and shape from its header
//   SHAPExDTYPE=VALUES       inline values, separated by spaces or single commas, row-major;
//                            their count must equal the element count    2x2xf32=1 2 3 4
//   SHAPExDTYPE=VALUE        a splat: one value fills every element    1x3x224x224xf32=0
//                            (at most kMaxTensorFileBytes, like a file)
//   DTYPE=VALUE              a scalar                                    f32=5
// SHAPE is dims joined by 'x' (0 allowed: 0x3xf32= is empty); DTYPE is f32 f64 f16 bf16 i64 i32
// i16 i8 u64 u32 u16 u8 bool. Any extension other than .npy after '@' is read raw,
// except one with a registered TensorFileCodec (tensor_file_codec.h: .pb TensorProto in the
// `kiln` CLI), read by that codec and typed like .npy; unregistered .pb is refused as
// unsupported. Floats take decimal and exponent forms, nan, inf and -inf; a value that overflows
// the dtype is an error, one that underflows rounds to 0 or a subnormal (f16 and bf16 values are
// read as f32, then rounded to nearest even). Integers take decimal digits with an optional sign
// (no '-' for unsigned dtypes) and must fit the dtype. bool
// takes 0, 1, true, false. Error messages quote the spec (shortened when long).
//
// Output spec grammar: `-` (print to stdout with format_tensor), `@FILE.bin`, `@FILE.npy`, or a
// file with a registered codec's extension (`@FILE.pb`).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/tooling/tensor_io.h"

namespace kiln {

struct TensorType {
  DType dtype = DType::kF32;
  ConcreteShape shape;  // empty for a scalar

  bool operator==(const TensorType&) const = default;
};

// Parses "1x3x224x224xf32" or "f32". Errors (invalid argument; out of range for an overflowing
// shape) quote `text`.
StatusOr<TensorType> parse_tensor_type(std::string_view text);
// Inverse of parse_tensor_type: "2x3xf32", "f32".
std::string format_tensor_type(DType dtype, const ConcreteShape& shape);

// Parses a tensor spec and loads the tensor it names (reading any file it refers to).
StatusOr<Tensor> parse_tensor_spec(std::string_view spec);

struct OutputSpec {
  bool to_stdout = true;
  std::string path;                                  // when !to_stdout
  TensorFileFormat format = TensorFileFormat::kNpy;  // when !to_stdout

  bool operator==(const OutputSpec&) const = default;
};

// Parses "-", "@FILE.bin", "@FILE.npy" or "@FILE.<registered codec extension>". Errors (invalid
// argument) quote the spec; an unknown extension is an error.
StatusOr<OutputSpec> parse_output_spec(std::string_view spec);

// Delivers `tensor` where `spec` says: format_tensor_summary text to `stdout_stream`
// (format_tensor, every value, with `print_all`), or an atomic file write (write_tensor_file).
Status write_output(const OutputSpec& spec, const Tensor& tensor, std::FILE* stdout_stream,
                    bool print_all = false);

}  // namespace kiln
