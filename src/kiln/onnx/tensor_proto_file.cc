#include "kiln/onnx/tensor_proto_file.h"

#include <cstring>
#include <filesystem>
#include <limits>

#include "kiln/base/checked_math.h"
#include "kiln/base/file_util.h"
#include "kiln/onnx/tensor_proto.h"
#include "onnx/onnx-data_pb.h"

namespace kiln::onnx_import {

using onnx::TensorProto;

StatusOr<TensorProtoFile> parse_tensor_proto(std::string_view bytes, std::string_view source,
                                             const std::string& base_dir) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return out_of_range("TensorProto file '{}' is {} bytes, over protobuf's 2 GiB limit", source,
                        bytes.size());
  }
  TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return data_loss(
        "'{}' is not a valid TensorProto: protobuf parsing failed (truncated or "
        "corrupt)",
        source);
  }
  if (!proto.has_data_type()) {
    return data_loss("'{}' is not a valid TensorProto: it has no data_type", source);
  }
  if (proto.has_segment()) {
    // A SequenceProto of tensors reads as a TensorProto with a segment (field 3 of both): say
    // what the file holds instead of refusing a segmented tensor.
    onnx::SequenceProto sequence;
    if (sequence.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) &&
        sequence.elem_type() == onnx::SequenceProto::TENSOR && sequence.tensor_values_size() > 0) {
      return unimplemented(
          "'{}' holds a sequence of {} tensors (a SequenceProto) where a tensor is expected; "
          "`kiln run` and `kiln bench` take tensors: run a model with sequence inputs through "
          "`kiln test-suite` or the C++ Session::run_values",
          source, sequence.tensor_values_size());
    }
  }
  const std::string what = proto.name().empty()
                               ? fmt::format("tensor in '{}'", source)
                               : fmt::format("tensor '{}' in '{}'", proto.name(), source);
  KILN_ASSIGN_OR_RETURN(Tensor tensor, tensor_from_proto(proto, base_dir, what));
  return TensorProtoFile{proto.name(), std::move(tensor)};
}

StatusOr<TensorProtoFile> read_tensor_proto_file(const std::string& path, uint64_t max_bytes) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path, max_bytes));
  std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_tensor_proto(bytes, path, dir.empty() ? std::string(".") : dir);
}

namespace {

StatusOr<HostValue> sequence_value(const onnx::SequenceProto& proto, DType dtype,
                                   const std::string& path, const std::string& dir) {
  if (proto.elem_type() != onnx::SequenceProto::TENSOR &&
      !(proto.elem_type() == onnx::SequenceProto::UNDEFINED && proto.tensor_values_size() == 0)) {
    return unimplemented(
        "'{}' holds a sequence of element type {}; kiln reads sequences of tensors", path,
        static_cast<int>(proto.elem_type()));
  }
  std::vector<Tensor> elements;
  for (int i = 0; i < proto.tensor_values_size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(proto.tensor_values(i), dir,
                                                      fmt::format("element {} in '{}'", i, path)));
    elements.push_back(std::move(t));
  }
  const DType element_dtype = elements.empty() ? dtype : elements.front().dtype();
  auto value = HostValue::sequence(element_dtype, std::move(elements));
  if (!value.ok()) return std::move(value).status().with_note(fmt::format("in '{}'", path));
  return value;
}

}  // namespace

StatusOr<HostValue> read_value_proto_file(const std::string& path, ValueForm form, DType dtype,
                                          uint64_t max_bytes) {
  if (form == ValueForm::kTensor) {
    KILN_ASSIGN_OR_RETURN(TensorProtoFile file, read_tensor_proto_file(path, max_bytes));
    return HostValue(std::move(file.tensor));
  }
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path, max_bytes));
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return out_of_range("'{}' is {} bytes, over protobuf's 2 GiB limit", path, bytes.size());
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (form == ValueForm::kSequence) {
    onnx::SequenceProto proto;
    if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return data_loss("'{}' is not a valid SequenceProto (truncated or corrupt)", path);
    }
    return sequence_value(proto, dtype, path, dir);
  }
  onnx::OptionalProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return data_loss("'{}' is not a valid OptionalProto (truncated or corrupt)", path);
  }
  if (proto.has_tensor_value()) {
    if (form != ValueForm::kOptionalTensor) {
      return invalid_argument("'{}' holds an optional tensor, but a {} is needed", path,
                              value_form_name(form));
    }
    KILN_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(proto.tensor_value(), dir,
                                                      fmt::format("the tensor in '{}'", path)));
    return HostValue::optional_of(HostValue(std::move(t)));
  }
  if (proto.has_sequence_value()) {
    if (form != ValueForm::kOptionalSequence) {
      return invalid_argument("'{}' holds an optional sequence, but a {} is needed", path,
                              value_form_name(form));
    }
    KILN_ASSIGN_OR_RETURN(HostValue seq, sequence_value(proto.sequence_value(), dtype, path, dir));
    return HostValue::optional_of(seq);
  }
  return HostValue::none(form, dtype);
}

StatusOr<std::string> serialize_tensor_proto(const Tensor& tensor, std::string_view name) {
  if (checked_product(tensor.shape()).value_or(-1) != tensor.element_count() ||
      (tensor.byte_size() > 0 && tensor.data() == nullptr)) {
    return invalid_argument("cannot serialize a tensor without valid storage as a TensorProto");
  }
  const TensorProto::DataType elem = onnx_type_of(tensor.dtype());
  if (elem == TensorProto::UNDEFINED) {
    return invalid_argument("cannot serialize a tensor of invalid dtype code {} as a TensorProto",
                            static_cast<int>(tensor.dtype()));
  }
  TensorProto proto;
  if (!name.empty()) proto.set_name(std::string(name));
  proto.set_data_type(elem);
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  std::string raw(reinterpret_cast<const char*>(tensor.data()), tensor.byte_size());
  if (tensor.dtype() == DType::kBool) {
    for (char& c : raw) c = c != 0 ? 1 : 0;
  }
  proto.set_raw_data(std::move(raw));
  std::string out;
  if (!proto.SerializeToString(&out)) {
    return internal_error("protobuf could not serialize a {}-byte TensorProto", tensor.byte_size());
  }
  return out;
}

Status write_tensor_proto_file(const std::string& path, const Tensor& tensor,
                               std::string_view name) {
  auto bytes = serialize_tensor_proto(tensor, name);
  if (!bytes.ok()) return std::move(bytes).status().with_note(fmt::format("writing '{}'", path));
  return write_file_atomically(path, *bytes);
}

}  // namespace kiln::onnx_import
