// ONNX TensorProto → kiln Tensor, for initializers and Constant nodes. Internal to kiln_onnx.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "onnx/onnx_pb.h"

#include "kiln/base/mapped_file.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln::onnx_import {

// ONNX's name for a TensorProto.DataType ("FLOAT16", "STRING", ...), or "type <n>".
std::string onnx_type_name(int32_t elem_type);

// The kiln dtype for an ONNX element type; Unimplemented naming `what` (e.g. "input 'x'") for
// types kiln does not support.
StatusOr<DType> dtype_from_onnx(int32_t elem_type, std::string_view what);

// The ONNX element type for `dtype` (the inverse of dtype_from_onnx); UNDEFINED only for a value
// that is not a DType enumerator.
onnx::TensorProto::DataType onnx_type_of(DType dtype);

// The files one import reads external data from, each mapped once, for an import that leaves
// the weights in their files (ImportOptions::weights_by_reference). At most kMaxFiles files are
// mapped: each holds a descriptor and one of the process's few guarded mappings
// (base/mapped_file.h), and a model saved as one file per tensor can have thousands.
class ExternalDataFiles {
 public:
  static constexpr size_t kMaxFiles = 64;
  // `path`'s mapping, made on the first call for that path; null once kMaxFiles other files are
  // mapped (the caller then reads the data in).
  StatusOr<std::shared_ptr<const MappedFile>> map(const std::string& path);

 private:
  std::map<std::string, std::shared_ptr<const MappedFile>> files_;
};

// Converts `proto` to a Tensor. Data comes from raw_data, the typed field for its type
// (float_data, double_data, int64_data, uint64_data for u32/u64, int32_data for the narrower
// integers, bool and f16/bf16 bit patterns; an out-of-range value is an error) or, for
// data_location = EXTERNAL, a file inside `model_dir` (empty `model_dir` refuses external data).
// The data length must match the dims exactly (product overflow-checked). `what` names the tensor
// in errors ("initializer 'conv0.weight'"). With `files`, external data is not read: the tensor
// holds its range of the file, mapped through `files` (Tensor::borrow_from_file).
StatusOr<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& model_dir,
                                   std::string_view what, ExternalDataFiles* files = nullptr);

}  // namespace kiln::onnx_import
