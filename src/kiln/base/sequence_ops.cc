#include "kiln/base/sequence_ops.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/ranges.h>

#include "kiln/base/checked_math.h"
#include "kiln/base/control_flow.h"

namespace kiln::sequence_ops {
namespace {

constexpr std::array<std::string_view, 12> kOps = {
    "SequenceEmpty", "SequenceConstruct",  "SequenceAt",         "SequenceInsert",
    "SequenceErase", "SequenceLength",     "SplitToSequence",    "ConcatFromSequence",
    "Optional",      "OptionalHasElement", "OptionalGetElement", "SequenceMap"};

std::string dims_text(const ConcreteShape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

class Op {
 public:
  Op(std::string_view op_type, std::span<const HostValue> inputs, const OpArgs& args)
      : op_(op_type), inputs_(inputs), args_(args) {}

  StatusOr<std::vector<HostValue>> run() {
    if (op_ == "Identity") return one(input(0));
    if (op_ == "SequenceEmpty") return sequence_empty();
    if (op_ == "SequenceConstruct") return sequence_construct();
    if (op_ == "SequenceAt") return sequence_at();
    if (op_ == "SequenceInsert") return sequence_insert();
    if (op_ == "SequenceErase") return sequence_erase();
    if (op_ == "SequenceLength") return sequence_length();
    if (op_ == "SplitToSequence") return split_to_sequence();
    if (op_ == "ConcatFromSequence") return concat_from_sequence();
    if (op_ == "Optional") return optional();
    if (op_ == "OptionalHasElement") return optional_has_element();
    if (op_ == "OptionalGetElement") return optional_get_element();
    if (op_ == "SequenceMap") return sequence_map();
    return unimplemented("{}: {} is not a sequence op", args_.where, op_);
  }

 private:
  static StatusOr<std::vector<HostValue>> one(HostValue value) {
    return std::vector<HostValue>{std::move(value)};
  }

  bool present(size_t i) const {
    return i < inputs_.size() &&
           !(inputs_[i].is_tensor() && inputs_[i].tensor().empty_storage() &&
             inputs_[i].tensor().element_count() == 0 && inputs_[i].tensor().shape().empty());
  }

  const HostValue& input(size_t i) const { return inputs_[i]; }

  Status arity(size_t min, size_t max) const {
    if (inputs_.size() >= min && inputs_.size() <= max && (min == 0 || present(0))) {
      return ok_status();
    }
    return invalid_argument("{}: takes {} to {} inputs, got {}", args_.where, min, max,
                            inputs_.size());
  }

  StatusOr<const HostValue*> sequence_input(size_t i) const {
    const HostValue& value = input(i);
    if (value.form() != ValueForm::kSequence) {
      return invalid_argument("{}: input {} must be a sequence, got {}", args_.where, i,
                              value.describe());
    }
    return &value;
  }

  StatusOr<Tensor> tensor_input(size_t i) const {
    const HostValue& value = input(i);
    if (!value.is_tensor()) {
      return invalid_argument("{}: input {} must be a tensor, got {}", args_.where, i,
                              value.describe());
    }
    return value.tensor();
  }

  // A position input: one i32 or i64 element in [-n, n - 1] (or [-n, n] when `end_ok`), as an
  // index in [0, n).
  StatusOr<int64_t> position(size_t i, int64_t n, bool end_ok) const {
    KILN_ASSIGN_OR_RETURN(Tensor t, tensor_input(i));
    if ((t.dtype() != DType::kI64 && t.dtype() != DType::kI32) || t.element_count() != 1) {
      return invalid_argument("{}: the position must be one i32 or i64 element, got {} {}",
                              args_.where, dtype_name(t.dtype()), dims_text(t.shape()));
    }
    const int64_t p = element_as_int64(t, 0);
    const int64_t high = end_ok ? n : n - 1;
    if (p < -n || p > high) {
      return invalid_argument("{}: position {} is out of range [{}, {}] for a sequence of {}",
                              args_.where, p, -n, high, n);
    }
    return p < 0 ? p + n : p;
  }

  StatusOr<DType> dtype_attribute() const {
    KILN_ASSIGN_OR_RETURN(std::string name, args_.attributes->get_string(kDtypeAttribute, "f32"));
    auto dtype = parse_dtype(name);
    if (!dtype) return invalid_argument("{}: unknown dtype '{}'", args_.where, name);
    return *dtype;
  }

  Status check_bytes(uint64_t bytes) const {
    if (bytes <= args_.max_bytes) return ok_status();
    return out_of_range("{}: the result needs {} bytes, over the limit of {} bytes (--max-memory)",
                        args_.where, bytes, args_.max_bytes);
  }

  StatusOr<std::vector<HostValue>> sequence_empty() {
    KILN_RETURN_IF_ERROR(arity(0, 0));
    KILN_ASSIGN_OR_RETURN(DType dtype, dtype_attribute());
    KILN_ASSIGN_OR_RETURN(HostValue out, HostValue::sequence(dtype, {}));
    return one(std::move(out));
  }

  StatusOr<std::vector<HostValue>> sequence_construct() {
    if (inputs_.empty()) return invalid_argument("{}: takes at least one tensor", args_.where);
    std::vector<Tensor> elements;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(Tensor t, tensor_input(i));
      if (t.dtype() != inputs_[0].dtype()) {
        return invalid_argument("{}: input {} is {}, but input 0 is {}; a sequence holds one dtype",
                                args_.where, i, dtype_name(t.dtype()),
                                dtype_name(inputs_[0].dtype()));
      }
      elements.push_back(std::move(t));
    }
    KILN_ASSIGN_OR_RETURN(HostValue out, HostValue::sequence(inputs_[0].dtype(), elements));
    return one(std::move(out));
  }

  StatusOr<std::vector<HostValue>> sequence_at() {
    KILN_RETURN_IF_ERROR(arity(2, 2));
    KILN_ASSIGN_OR_RETURN(const HostValue* seq, sequence_input(0));
    const auto n = static_cast<int64_t>(seq->elements().size());
    KILN_ASSIGN_OR_RETURN(int64_t at, position(1, n, false));
    return one(seq->elements()[at]);
  }

  StatusOr<std::vector<HostValue>> sequence_insert() {
    KILN_RETURN_IF_ERROR(arity(2, 3));
    KILN_ASSIGN_OR_RETURN(const HostValue* seq, sequence_input(0));
    KILN_ASSIGN_OR_RETURN(Tensor t, tensor_input(1));
    if (t.dtype() != seq->dtype()) {
      return invalid_argument("{}: the tensor is {}, but the sequence holds {}", args_.where,
                              dtype_name(t.dtype()), dtype_name(seq->dtype()));
    }
    std::vector<Tensor> elements = seq->elements();
    const auto n = static_cast<int64_t>(elements.size());
    int64_t at = n;
    if (present(2)) {
      KILN_ASSIGN_OR_RETURN(at, position(2, n, true));
    }
    elements.insert(elements.begin() + at, std::move(t));
    KILN_ASSIGN_OR_RETURN(HostValue out, HostValue::sequence(seq->dtype(), std::move(elements)));
    return one(std::move(out));
  }

  StatusOr<std::vector<HostValue>> sequence_erase() {
    KILN_RETURN_IF_ERROR(arity(1, 2));
    KILN_ASSIGN_OR_RETURN(const HostValue* seq, sequence_input(0));
    std::vector<Tensor> elements = seq->elements();
    const auto n = static_cast<int64_t>(elements.size());
    if (n == 0) return invalid_argument("{}: the sequence is empty", args_.where);
    int64_t at = n - 1;
    if (present(1)) {
      KILN_ASSIGN_OR_RETURN(at, position(1, n, false));
    }
    elements.erase(elements.begin() + at);
    KILN_ASSIGN_OR_RETURN(HostValue out, HostValue::sequence(seq->dtype(), std::move(elements)));
    return one(std::move(out));
  }

  StatusOr<std::vector<HostValue>> sequence_length() {
    KILN_RETURN_IF_ERROR(arity(1, 1));
    KILN_ASSIGN_OR_RETURN(const HostValue* seq, sequence_input(0));
    KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(DType::kI64, {}));
    out.mutable_values<int64_t>()[0] = static_cast<int64_t>(seq->elements().size());
    return one(std::move(out));
  }

  StatusOr<std::vector<HostValue>> split_to_sequence() {
    KILN_RETURN_IF_ERROR(arity(1, 2));
    KILN_ASSIGN_OR_RETURN(Tensor t, tensor_input(0));
    KILN_ASSIGN_OR_RETURN(int64_t axis, args_.attributes->get_int("axis", 0));
    KILN_ASSIGN_OR_RETURN(int64_t keepdims, args_.attributes->get_int("keepdims", 1));
    const int64_t rank = t.rank();
    if (axis < -rank || axis >= rank) {
      return invalid_argument("{}: axis {} is out of range for rank {}", args_.where, axis, rank);
    }
    if (axis < 0) axis += rank;
    const int64_t length = t.shape()[axis];
    std::vector<int64_t> lengths;
    bool squeeze = false;
    if (!present(1)) {
      lengths.assign(length, 1);
      squeeze = keepdims == 0;
    } else {
      KILN_ASSIGN_OR_RETURN(Tensor split, tensor_input(1));
      if (split.dtype() != DType::kI64 && split.dtype() != DType::kI32) {
        return invalid_argument("{}: split must be i32 or i64, got {}", args_.where,
                                dtype_name(split.dtype()));
      }
      if (split.rank() == 0) {
        const int64_t size = element_as_int64(split, 0);
        if (size <= 0) {
          return invalid_argument("{}: split {} must be positive", args_.where, size);
        }
        for (int64_t at = 0; at < length; at += size)
          lengths.push_back(std::min(size, length - at));
      } else if (split.rank() == 1) {
        int64_t sum = 0;
        for (int64_t i = 0; i < split.element_count(); ++i) {
          const int64_t s = element_as_int64(split, i);
          if (s < 0) return invalid_argument("{}: split[{}] is {}", args_.where, i, s);
          lengths.push_back(s);
          sum += s;
        }
        if (sum != length) {
          return invalid_argument("{}: split [{}] sums to {}, but axis {} has length {}",
                                  args_.where, fmt::join(lengths, ","), sum, axis, length);
        }
      } else {
        return invalid_argument("{}: split must be a scalar or 1-D, got rank {}", args_.where,
                                split.rank());
      }
    }
    const auto a = static_cast<size_t>(axis);
    const int64_t outer = control_flow::span_product(t.shape(), 0, a);
    const int64_t inner = control_flow::span_product(t.shape(), a + 1, t.shape().size()) *
                          static_cast<int64_t>(dtype_size(t.dtype()));
    std::vector<Tensor> elements;
    int64_t start = 0;
    for (int64_t len : lengths) {
      ConcreteShape shape = t.shape();
      shape[a] = len;
      KILN_ASSIGN_OR_RETURN(Tensor part, Tensor::create(t.dtype(), shape));
      for (int64_t o = 0; o < outer && len > 0; ++o) {
        std::memcpy(part.mutable_data() + o * len * inner, t.data() + (o * length + start) * inner,
                    static_cast<size_t>(len * inner));
      }
      if (squeeze) {
        shape.erase(shape.begin() + axis);
        part = part.reshaped(shape);
      }
      elements.push_back(std::move(part));
      start += len;
    }
    KILN_ASSIGN_OR_RETURN(HostValue out, HostValue::sequence(t.dtype(), std::move(elements)));
    return one(std::move(out));
  }

  StatusOr<std::vector<HostValue>> concat_from_sequence() {
    KILN_RETURN_IF_ERROR(arity(1, 1));
    KILN_ASSIGN_OR_RETURN(const HostValue* seq, sequence_input(0));
    if (!args_.attributes->has("axis")) {
      return invalid_argument("{}: attribute 'axis' is required", args_.where);
    }
    KILN_ASSIGN_OR_RETURN(int64_t axis, args_.attributes->get_int("axis", 0));
    KILN_ASSIGN_OR_RETURN(int64_t new_axis, args_.attributes->get_int("new_axis", 0));
    if (new_axis != 0 && new_axis != 1) {
      return invalid_argument("{}: new_axis must be 0 or 1, got {}", args_.where, new_axis);
    }
    const std::vector<Tensor>& elements = seq->elements();
    if (elements.empty()) {
      return invalid_argument("{}: the sequence is empty; there is nothing to concatenate",
                              args_.where);
    }
    const ConcreteShape& first = elements[0].shape();
    const auto rank = static_cast<int64_t>(first.size());
    const int64_t out_rank = rank + new_axis;
    if (axis < -out_rank || axis >= out_rank) {
      return invalid_argument("{}: axis {} is out of range for elements of rank {}{}", args_.where,
                              axis, rank, new_axis ? " and a new axis" : "");
    }
    if (axis < 0) axis += out_rank;
    const auto a = static_cast<size_t>(axis);
    // Each element as a tensor of the output's rank (a new axis of 1).
    int64_t total = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < elements.size(); ++i) {
      const ConcreteShape& shape = elements[i].shape();
      bool fits = shape.size() == first.size();
      for (size_t d = 0; fits && d < shape.size(); ++d) {
        fits = shape[d] == first[d] || (!new_axis && d == a);
      }
      if (!fits) {
        return invalid_argument(
            "{}: element {} has dims {}, but element 0 has {}; they may differ only on axis {}",
            args_.where, i, dims_text(shape), dims_text(first), new_axis ? -1 : axis);
      }
      total += new_axis ? 1 : shape[a];
      bytes += elements[i].byte_size();
    }
    KILN_RETURN_IF_ERROR(check_bytes(bytes));
    ConcreteShape out_shape = first;
    if (new_axis) {
      out_shape.insert(out_shape.begin() + axis, total);
    } else {
      out_shape[a] = total;
    }
    KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(seq->dtype(), out_shape));
    const int64_t outer = control_flow::span_product(out_shape, 0, a);
    const int64_t row = control_flow::span_product(out_shape, a + 1, out_shape.size()) *
                        static_cast<int64_t>(dtype_size(seq->dtype()));
    int64_t offset = 0;  // along the axis
    for (const Tensor& t : elements) {
      const int64_t len = new_axis ? 1 : t.shape()[a];
      for (int64_t o = 0; o < outer && len > 0 && row > 0; ++o) {
        std::memcpy(out.mutable_data() + (o * total + offset) * row, t.data() + o * len * row,
                    static_cast<size_t>(len * row));
      }
      offset += len;
    }
    return one(std::move(out));
  }

  StatusOr<std::vector<HostValue>> optional() {
    KILN_RETURN_IF_ERROR(arity(0, 1));
    if (present(0)) {
      if (is_optional(input(0).form())) {
        return invalid_argument("{}: the input is already an optional ({})", args_.where,
                                input(0).describe());
      }
      return one(HostValue::optional_of(input(0)));
    }
    KILN_ASSIGN_OR_RETURN(DType dtype, dtype_attribute());
    KILN_ASSIGN_OR_RETURN(int64_t form, args_.attributes->get_int(kFormAttribute, -1));
    if (form != static_cast<int64_t>(ValueForm::kOptionalTensor) &&
        form != static_cast<int64_t>(ValueForm::kOptionalSequence)) {
      return invalid_argument("{}: without an input, attribute '{}' must name an optional form",
                              args_.where, kFormAttribute);
    }
    return one(HostValue::none(static_cast<ValueForm>(form), dtype));
  }

  StatusOr<std::vector<HostValue>> optional_has_element() {
    KILN_RETURN_IF_ERROR(arity(0, 1));
    KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(DType::kBool, {}));
    out.mutable_values<uint8_t>()[0] = present(0) && input(0).has_element() ? 1 : 0;
    return one(std::move(out));
  }

  StatusOr<std::vector<HostValue>> optional_get_element() {
    KILN_RETURN_IF_ERROR(arity(1, 1));
    if (!input(0).has_element()) {
      return invalid_argument("{}: the optional is empty ({})", args_.where, input(0).describe());
    }
    return one(input(0).element());
  }

  StatusOr<std::vector<HostValue>> sequence_map() {
    if (!present(0)) return invalid_argument("{}: the input sequence is missing", args_.where);
    KILN_ASSIGN_OR_RETURN(const HostValue* seq, sequence_input(0));
    KILN_ASSIGN_OR_RETURN(int64_t captures, args_.attributes->get_int("kiln_captures", 0));
    if (captures < 0 || static_cast<size_t>(captures) >= inputs_.size()) {
      return invalid_argument("{}: attribute 'kiln_captures' is {} for {} inputs", args_.where,
                              captures, inputs_.size());
    }
    const size_t formal = inputs_.size() - static_cast<size_t>(captures);
    const size_t n = seq->elements().size();
    for (size_t i = 1; i < formal; ++i) {
      const HostValue& value = input(i);
      if (value.form() == ValueForm::kSequence && value.elements().size() != n) {
        return invalid_argument("{}: input {} holds {} elements, but input 0 holds {}", args_.where,
                                i, value.elements().size(), n);
      }
      if (value.form() != ValueForm::kSequence && !value.is_tensor()) {
        return invalid_argument("{}: input {} must be a sequence or a tensor, got {}", args_.where,
                                i, value.describe());
      }
    }
    const size_t outputs = args_.output_dtypes.size();
    std::vector<std::vector<Tensor>> collected(outputs);
    uint64_t bytes = 0;
    for (size_t e = 0; e < n; ++e) {
      std::vector<HostValue> body_inputs;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        const HostValue& value = input(i);
        body_inputs.push_back(i < formal && value.form() == ValueForm::kSequence
                                  ? HostValue(value.elements()[e])
                                  : value);
      }
      auto result = args_.body(std::move(body_inputs));
      if (!result.ok()) {
        return std::move(result).status().with_note(
            fmt::format("in {}, the body at element {}", args_.where, e));
      }
      if (result->size() != outputs) {
        return invalid_argument("{}: the body returned {} outputs at element {}, expected {}",
                                args_.where, result->size(), e, outputs);
      }
      for (size_t k = 0; k < outputs; ++k) {
        const HostValue& out = (*result)[k];
        if (!out.is_tensor() || out.dtype() != args_.output_dtypes[k]) {
          return invalid_argument("{}: body output {} is {} at element {}, expected a {} tensor",
                                  args_.where, k, out.describe(), e,
                                  dtype_name(args_.output_dtypes[k]));
        }
        bytes += out.tensor().byte_size();
        KILN_RETURN_IF_ERROR(check_bytes(bytes));
        // A body output may alias a buffer the next element's run reuses: keep a copy.
        collected[k].push_back(out.tensor().clone());
      }
    }
    std::vector<HostValue> out;
    for (size_t k = 0; k < outputs; ++k) {
      KILN_ASSIGN_OR_RETURN(HostValue sequence,
                            HostValue::sequence(args_.output_dtypes[k], std::move(collected[k])));
      out.push_back(std::move(sequence));
    }
    return out;
  }

  std::string_view op_;
  std::span<const HostValue> inputs_;
  const OpArgs& args_;
};

}  // namespace

bool is_sequence_op(std::string_view op_type) {
  return std::find(kOps.begin(), kOps.end(), op_type) != kOps.end();
}

StatusOr<std::vector<HostValue>> run(std::string_view op_type, std::span<const HostValue> inputs,
                                     const OpArgs& args) {
  static const Attributes kNone;
  OpArgs checked = args;
  if (checked.attributes == nullptr) checked.attributes = &kNone;
  return Op(op_type, inputs, checked).run();
}

}  // namespace kiln::sequence_ops
