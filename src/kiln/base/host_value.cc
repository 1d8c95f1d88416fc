#include "kiln/base/host_value.h"

#include <fmt/ranges.h>

namespace kiln {

std::string_view value_form_name(ValueForm form) {
  switch (form) {
    case ValueForm::kTensor: return "tensor";
    case ValueForm::kSequence: return "sequence";
    case ValueForm::kOptionalTensor: return "optional tensor";
    case ValueForm::kOptionalSequence: return "optional sequence";
  }
  return "unknown form";
}

StatusOr<HostValue> HostValue::sequence(DType dtype, std::vector<Tensor> elements) {
  for (size_t i = 0; i < elements.size(); ++i) {
    if (elements[i].dtype() != dtype) {
      return invalid_argument("sequence element {} is {}, but the sequence holds {}", i,
                              dtype_name(elements[i].dtype()), dtype_name(dtype));
    }
  }
  HostValue out;
  out.form_ = ValueForm::kSequence;
  out.dtype_ = dtype;
  out.elements_ = std::move(elements);
  return out;
}

HostValue HostValue::none(ValueForm form, DType dtype) {
  HostValue out;
  out.form_ = form;
  out.dtype_ = dtype;
  out.present_ = false;
  return out;
}

HostValue HostValue::optional_of(const HostValue& value) {
  HostValue out = value;
  out.form_ = value.form_ == ValueForm::kSequence ? ValueForm::kOptionalSequence
                                                  : ValueForm::kOptionalTensor;
  out.present_ = true;
  return out;
}

HostValue HostValue::element() const {
  if (!is_optional(form_)) return *this;
  HostValue out = *this;
  out.form_ = element_form(form_);
  out.present_ = true;
  return out;
}

HostValue HostValue::clone() const {
  HostValue out = *this;
  if (!tensor_.empty_storage()) out.tensor_ = tensor_.clone();
  for (Tensor& t : out.elements_) t = t.clone();
  return out;
}

std::string HostValue::describe() const {
  auto dims = [](const Tensor& t) { return fmt::format("[{}]", fmt::join(t.shape(), ",")); };
  switch (form_) {
    case ValueForm::kTensor: return fmt::format("{} {}", dtype_name(dtype_), dims(tensor_));
    case ValueForm::kSequence:
      return fmt::format("sequence of {} {} tensors", elements_.size(), dtype_name(dtype_));
    case ValueForm::kOptionalTensor:
      return present_ ? fmt::format("optional {} {}", dtype_name(dtype_), dims(tensor_))
                      : fmt::format("optional {} tensor (empty)", dtype_name(dtype_));
    case ValueForm::kOptionalSequence:
      return present_ ? fmt::format("optional sequence of {} {} tensors", elements_.size(),
                                    dtype_name(dtype_))
                      : fmt::format("optional {} sequence (empty)", dtype_name(dtype_));
  }
  return "unknown value";
}

std::vector<HostValue> tensor_values(std::span<const Tensor> tensors) {
  return std::vector<HostValue>(tensors.begin(), tensors.end());
}

StatusOr<std::vector<Tensor>> value_tensors(std::vector<HostValue> values, std::string_view what) {
  std::vector<Tensor> out;
  out.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i].is_tensor()) {
      return invalid_argument("{} {} is a {} ({}); this interface takes tensors only", what, i,
                              value_form_name(values[i].form()), values[i].describe());
    }
    out.push_back(values[i].tensor());
  }
  return out;
}

}  // namespace kiln
