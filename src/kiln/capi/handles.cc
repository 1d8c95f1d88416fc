#include "kiln/capi/handles.h"

#include <fmt/format.h>

#include <cstring>

#include "kiln/base/checked_math.h"

namespace kiln::capi {
namespace {

ValueInfo describe_value(const module::ModuleValue& value) {
  ValueInfo info;
  info.name = value.name;
  info.dtype = value.dtype;
  for (const DimExpr& dim : value.shape) {
    info.dims.push_back(dim.constant_value().value_or(-1));
    info.dim_names.push_back(dim.to_string());
  }
  for (const std::string& name : info.dim_names) info.dim_name_pointers.push_back(name.c_str());
  return info;
}

// The checks tensor_from_c and writable_tensor_from_c share; returns the dims.
StatusOr<ConcreteShape> checked_dims(const kiln_tensor& tensor, const std::string& what) {
  if (!is_valid_dtype_code(raw_code(tensor.dtype))) {
    return invalid_argument("{}: unknown dtype code {}", what, raw_code(tensor.dtype));
  }
  if (tensor.rank > 0 && tensor.dims == nullptr) {
    return invalid_argument("{}: rank {} with no dims", what, tensor.rank);
  }
  ConcreteShape shape(tensor.dims, tensor.dims + tensor.rank);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) return invalid_argument("{}: dim {} is negative ({})", what, d, shape[d]);
  }
  auto count = checked_product(shape);
  const DType dtype = static_cast<DType>(tensor.dtype);
  if (!count || !checked_mul(*count, static_cast<int64_t>(dtype_size(dtype)))) {
    return invalid_argument("{}: dims [{}] overflow a byte size", what, fmt::join(shape, ","));
  }
  if (*count > 0 && tensor.data == nullptr) {
    return invalid_argument("{}: data is null for {} elements", what, *count);
  }
  return shape;
}

bool aligned_to_element(const kiln_tensor& tensor) {
  const size_t size = dtype_size(static_cast<DType>(tensor.dtype));
  return reinterpret_cast<uintptr_t>(tensor.data) % size == 0;
}

}  // namespace

std::shared_ptr<const LoadedModule> describe_module(
    std::shared_ptr<const module::ModuleContents> contents) {
  auto loaded = std::make_shared<LoadedModule>();
  for (int32_t id : contents->inputs)
    loaded->inputs.push_back(describe_value(contents->values[id]));
  for (int32_t id : contents->outputs) {
    loaded->outputs.push_back(describe_value(contents->values[id]));
  }
  loaded->contents = std::move(contents);
  return loaded;
}

void fill_value_info(const ValueInfo& info, kiln_value_info* out) {
  out->name = info.name.c_str();
  out->dtype = static_cast<kiln_dtype>(info.dtype);
  out->rank = info.dims.size();
  out->dims = info.dims.data();
  out->dim_names = info.dim_name_pointers.data();
}

kiln_status* to_c_status(const Status& status) {
  if (status.ok()) return nullptr;
  auto* out = new kiln_status;
  out->code = static_cast<kiln_status_code>(status.code());
  out->message = status.message();
  for (const std::string& note : status.notes()) out->message += "\n  " + note;
  return out;
}

StatusOr<Tensor> tensor_from_c(const kiln_tensor& tensor, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(ConcreteShape shape, checked_dims(tensor, what));
  const DType dtype = static_cast<DType>(tensor.dtype);
  const auto* data = static_cast<const std::byte*>(tensor.data);
  if (aligned_to_element(tensor)) return Tensor::borrow(dtype, std::move(shape), data, nullptr);
  KILN_ASSIGN_OR_RETURN(Tensor copy, Tensor::create(dtype, std::move(shape)));
  if (copy.byte_size() > 0) std::memcpy(copy.mutable_data(), data, copy.byte_size());
  return copy;
}

StatusOr<Tensor> writable_tensor_from_c(const kiln_tensor& tensor, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(ConcreteShape shape, checked_dims(tensor, what));
  if (!aligned_to_element(tensor)) {
    return invalid_argument("{}: data at {} is not aligned to its {}-byte elements", what,
                            tensor.data, dtype_size(static_cast<DType>(tensor.dtype)));
  }
  return Tensor::borrow_mutable(static_cast<DType>(tensor.dtype), std::move(shape),
                                static_cast<std::byte*>(tensor.data), nullptr);
}

}  // namespace kiln::capi
