// HostValue: one value of an ONNX graph held on the host, of any of the value forms kiln runs: a
// tensor, a sequence of tensors (each with its own dims, all of one dtype), or an optional that
// holds a tensor, a sequence, or nothing. Tensors keep their type (base/tensor.h); this wraps them
// where a graph input, a graph output, a loop-carried value or a host op's operand may be a
// sequence or an optional (runtime::Session::run_values, graph_eval::evaluate_graph_values,
// control_flow, sequence_ops). Copies share the tensors' storage, like Tensor's.
//
// Sequences and optionals never reach a device: the ops that read or make them run on the host
// (base/sequence_ops.h), and the tensors they hold are plain host tensors.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln {

// The form of a value. Codes are stored in module files (module/module.fbs).
enum class ValueForm : uint8_t {
  kTensor = 0,
  kSequence = 1,          // a sequence of tensors of one dtype
  kOptionalTensor = 2,    // a tensor or nothing
  kOptionalSequence = 3,  // a sequence or nothing
};
inline constexpr uint8_t kValueFormCount = 4;

// "tensor", "sequence", "optional tensor", "optional sequence".
std::string_view value_form_name(ValueForm form);
inline bool is_optional(ValueForm form) {
  return form == ValueForm::kOptionalTensor || form == ValueForm::kOptionalSequence;
}
// The form an optional of this form holds (kTensor or kSequence); `form` itself otherwise.
inline ValueForm element_form(ValueForm form) {
  if (form == ValueForm::kOptionalTensor) return ValueForm::kTensor;
  if (form == ValueForm::kOptionalSequence) return ValueForm::kSequence;
  return form;
}

class HostValue {
 public:
  // An absent value (an omitted optional node input): a tensor without storage.
  HostValue() = default;
  // A tensor value (implicit: a Tensor is a value).
  HostValue(Tensor tensor) : dtype_(tensor.dtype()), tensor_(std::move(tensor)) {}  // NOLINT

  // A sequence of tensors of `dtype`; error naming the element whose dtype differs.
  static StatusOr<HostValue> sequence(DType dtype, std::vector<Tensor> elements);
  // An optional of `form` (kOptionalTensor or kOptionalSequence) holding nothing.
  static HostValue none(ValueForm form, DType dtype);
  // An optional holding `value` (a tensor or a sequence).
  static HostValue optional_of(const HostValue& value);

  ValueForm form() const { return form_; }
  bool is_tensor() const { return form_ == ValueForm::kTensor; }
  // The tensor's dtype, or its elements' (a sequence, an optional).
  DType dtype() const { return dtype_; }
  // A tensor value, or an optional tensor's element.
  const Tensor& tensor() const { return tensor_; }
  // A sequence's elements, or an optional sequence's.
  const std::vector<Tensor>& elements() const { return elements_; }
  // Whether an optional holds a value (true for every other form).
  bool has_element() const { return present_; }
  // What an optional holds (a tensor or a sequence value); the value itself for other forms.
  HostValue element() const;

  // An independent copy of every tensor.
  HostValue clone() const;
  // "f32 [2,3]", "sequence of 2 f32 tensors", "optional sequence (empty)", for errors.
  std::string describe() const;

 private:
  ValueForm form_ = ValueForm::kTensor;
  DType dtype_ = DType::kF32;
  bool present_ = true;
  Tensor tensor_;
  std::vector<Tensor> elements_;
};

// Tensors as tensor values, and values as tensors (error naming value `what` i when one is not a
// tensor).
std::vector<HostValue> tensor_values(std::span<const Tensor> tensors);
StatusOr<std::vector<Tensor>> value_tensors(std::vector<HostValue> values, std::string_view what);

}  // namespace kiln
