#include "kiln/base/control_flow.h"

#include <algorithm>
#include <cstring>

#include <fmt/ranges.h>

namespace kiln::control_flow {
namespace {

// As kiln/shape's shape_to_string ("[2,3]"); base sits below the shape library.
std::string shape_to_string(const ConcreteShape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

StatusOr<Tensor> scalar_i64(int64_t value) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(DType::kI64, {}));
  t.mutable_values<int64_t>()[0] = value;
  return t;
}

StatusOr<Tensor> scalar_bool(bool value) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(DType::kBool, {}));
  t.mutable_values<uint8_t>()[0] = value ? 1 : 0;
  return t;
}

Status check_body_outputs(const std::vector<HostValue>& outputs, size_t expected,
                          std::string_view where, int64_t iteration) {
  if (outputs.size() == expected) return ok_status();
  return invalid_argument("{}: the body returned {} outputs at iteration {}, expected {}", where,
                          outputs.size(), iteration, expected);
}

// Per-iteration slices of one scan output, checked to share a shape, and their bytes.
class ScanCollector {
 public:
  ScanCollector(size_t count, uint64_t max_bytes, std::string_view where)
      : slices_(count), max_bytes_(max_bytes), where_(where) {}

  Status add(size_t k, const Tensor& slice, int64_t iteration) {
    if (!slices_[k].empty()) {
      const Tensor& first = slices_[k].front();
      if (first.dtype() != slice.dtype() || first.shape() != slice.shape()) {
        return invalid_argument(
            "{}: scan output {} is {} {} at iteration {} but {} {} at iteration 0; scan outputs "
            "must keep one shape",
            where_, k, dtype_name(slice.dtype()), shape_to_string(slice.shape()), iteration,
            dtype_name(first.dtype()), shape_to_string(first.shape()));
      }
    }
    bytes_ = saturating_add(bytes_, slice.byte_size());
    if (bytes_ > max_bytes_) {
      return out_of_range("{}: scan outputs need more than {} bytes at iteration {} (--max-memory)",
                          where_, max_bytes_, iteration);
    }
    // A body output may alias a buffer the next iteration reuses: keep a copy.
    slices_[k].push_back(slice.clone());
    return ok_status();
  }

  // Output k stacked along `axis` (in [-rank-1, rank] of a slice), in iteration order or
  // reversed; `empty` gives the slice type when there was no iteration.
  StatusOr<Tensor> stacked(size_t k, int64_t axis, bool reverse, const EmptyScanShape& empty) {
    std::vector<Tensor>& slices = slices_[k];
    if (reverse) std::reverse(slices.begin(), slices.end());
    SliceType type;
    if (slices.empty()) {
      if (!empty) return internal_error("{}: no type for empty scan output {}", where_, k);
      KILN_ASSIGN_OR_RETURN(type, empty(k));
    } else {
      type = {slices.front().dtype(), slices.front().shape()};
    }
    KILN_ASSIGN_OR_RETURN(int64_t at,
                          normalize_axis(axis, static_cast<int64_t>(type.shape.size()) + 1,
                                         fmt::format("{}: the axis of scan output {}", where_, k)));
    return stack_along(slices, at, type.dtype, type.shape);
  }

  bool empty(size_t k) const { return slices_[k].empty(); }

 private:
  std::vector<std::vector<Tensor>> slices_;
  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  std::string where_;
};

}  // namespace

StatusOr<bool> read_condition(const Tensor& condition, std::string_view what) {
  if (condition.dtype() != DType::kBool || condition.element_count() != 1) {
    return invalid_argument("{} must be one bool element, got {} {}", what,
                            dtype_name(condition.dtype()), shape_to_string(condition.shape()));
  }
  return condition.values<uint8_t>()[0] != 0;
}

StatusOr<int64_t> normalize_axis(int64_t axis, int64_t rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {
    return invalid_argument("{} {} is out of range for rank {}", what, axis, rank);
  }
  return axis < 0 ? axis + rank : axis;
}

Tensor slice_along(const Tensor& tensor, int64_t axis, int64_t index) {
  const ConcreteShape& shape = tensor.shape();
  ConcreteShape out_shape = shape;
  out_shape.erase(out_shape.begin() + axis);
  Tensor out = Tensor::create(tensor.dtype(), out_shape).value();
  const auto a = static_cast<size_t>(axis);
  const int64_t outer = span_product(shape, 0, a);
  const size_t inner = span_product(shape, a + 1, shape.size()) * dtype_size(tensor.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(out.mutable_data() + o * inner, tensor.data() + (o * shape[a] + index) * inner,
                inner);
  }
  return out;
}

StatusOr<Tensor> stack_along(std::span<const Tensor> slices, int64_t axis, DType dtype,
                             const ConcreteShape& slice_shape) {
  ConcreteShape out_shape = slice_shape;
  const auto count = static_cast<int64_t>(slices.size());
  out_shape.insert(out_shape.begin() + axis, count);
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(dtype, out_shape));
  const auto a = static_cast<size_t>(axis);
  const int64_t outer = span_product(slice_shape, 0, a);
  const size_t inner = span_product(slice_shape, a, slice_shape.size()) * dtype_size(dtype);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t t = 0; t < count; ++t) {
      std::memcpy(out.mutable_data() + (o * count + t) * inner, slices[t].data() + o * inner,
                  inner);
    }
  }
  return out;
}

namespace {

// A carried or state value the body returned, checked against the one it took (an optional may
// come back as what it holds).
Status check_carried(const HostValue& in, const HostValue& out, std::string_view what, size_t v,
                     std::string_view where, int64_t iteration) {
  const bool same_form =
      out.form() == in.form() || (is_optional(in.form()) && out.form() == element_form(in.form()));
  if (same_form && out.dtype() == in.dtype()) return ok_status();
  return invalid_argument("{}: {} {} is {} but the body returned {} at iteration {}", where, what,
                          v, in.describe(), out.describe(), iteration);
}

// A scan output slice the body returned: a tensor.
StatusOr<Tensor> scan_slice(const HostValue& out, size_t k, std::string_view where,
                            int64_t iteration) {
  if (out.is_tensor()) return out.tensor();
  return invalid_argument("{}: scan output {} is {} at iteration {}; scan outputs are tensors",
                          where, k, out.describe(), iteration);
}

}  // namespace

StatusOr<std::vector<HostValue>> run_loop(std::span<const HostValue> inputs, const LoopArgs& args) {
  const std::string& where = args.where;
  if (inputs.size() < 2 + args.captures) {
    return invalid_argument("{}: has {} inputs, fewer than M, cond and {} captures", where,
                            inputs.size(), args.captures);
  }
  const size_t carried = inputs.size() - 2 - args.captures;
  if (args.output_count < carried) {
    return invalid_argument("{}: has {} outputs for {} loop-carried values", where,
                            args.output_count, carried);
  }
  const size_t scans = args.output_count - carried;
  if (!inputs[0].is_tensor() || !inputs[1].is_tensor()) {
    return invalid_argument("{}: the trip count and the condition must be tensors", where);
  }
  const Tensor& trip = inputs[0].tensor();
  const Tensor& cond_input = inputs[1].tensor();
  if (trip.empty_storage() && cond_input.empty_storage()) {
    return invalid_argument(
        "{}: has neither a trip count nor a condition; kiln does not run unbounded loops", where);
  }
  int64_t max_trips = kMaxLoopIterations;
  if (!trip.empty_storage()) {
    if (trip.dtype() != DType::kI64 || trip.element_count() != 1) {
      return invalid_argument("{}: the trip count M must be one int64 element, got {} {}", where,
                              dtype_name(trip.dtype()), shape_to_string(trip.shape()));
    }
    max_trips = trip.values<int64_t>()[0];
    if (max_trips < 0) {
      return invalid_argument("{}: the trip count M is {}; it must be >= 0", where, max_trips);
    }
    if (max_trips > kMaxLoopIterations) {
      return out_of_range("{}: the trip count M is {}, over kiln's limit of {} iterations", where,
                          max_trips, kMaxLoopIterations);
    }
  }
  bool cond = true;
  if (!cond_input.empty_storage()) {
    KILN_ASSIGN_OR_RETURN(cond, read_condition(cond_input, where + ": the condition"));
  }
  std::vector<HostValue> values(inputs.begin() + 2, inputs.begin() + 2 + carried);
  ScanCollector scan(scans, args.max_bytes, where);
  int64_t i = 0;
  for (; i < max_trips && cond; ++i) {
    std::vector<HostValue> body_inputs;
    // A carried optional the body filled enters again as an optional.
    for (size_t v = 0; v < carried; ++v) {
      if (values[v].form() != inputs[2 + v].form()) values[v] = HostValue::optional_of(values[v]);
    }
    KILN_ASSIGN_OR_RETURN(Tensor iteration, scalar_i64(i));
    KILN_ASSIGN_OR_RETURN(Tensor cond_in, scalar_bool(cond));
    body_inputs.push_back(std::move(iteration));
    body_inputs.push_back(std::move(cond_in));
    for (const HostValue& v : values) body_inputs.push_back(v);
    for (size_t c = 0; c < args.captures; ++c) body_inputs.push_back(inputs[2 + carried + c]);
    KILN_ASSIGN_OR_RETURN(std::vector<HostValue> outputs, args.body(std::move(body_inputs)));
    KILN_RETURN_IF_ERROR(check_body_outputs(outputs, 1 + carried + scans, where, i));
    if (!cond_input.empty_storage()) {
      const std::string what = fmt::format("{}: the body's condition output", where);
      KILN_ASSIGN_OR_RETURN(Tensor cond_out, scan_slice(outputs[0], 0, what, i));
      KILN_ASSIGN_OR_RETURN(cond, read_condition(cond_out, what));
    }
    for (size_t v = 0; v < carried; ++v) {
      KILN_RETURN_IF_ERROR(
          check_carried(inputs[2 + v], outputs[1 + v], "loop-carried value", v, where, i));
      values[v] = outputs[1 + v].clone();
    }
    for (size_t k = 0; k < scans; ++k) {
      KILN_ASSIGN_OR_RETURN(Tensor slice, scan_slice(outputs[1 + carried + k], k, where, i));
      KILN_RETURN_IF_ERROR(scan.add(k, slice, i));
    }
  }
  for (size_t v = 0; v < carried && v < args.carried_forms.size(); ++v) {
    if (values[v].form() == args.carried_forms[v]) continue;
    if (!is_optional(values[v].form()) || element_form(values[v].form()) != args.carried_forms[v]) {
      return internal_error("{}: loop-carried value {} is {}, but the node gives a {}", where, v,
                            values[v].describe(), value_form_name(args.carried_forms[v]));
    }
    if (!values[v].has_element()) {
      return invalid_argument(
          "{}: loop-carried value {} is an empty optional after {} iterations, but the loop gives "
          "a {}",
          where, v, i, value_form_name(args.carried_forms[v]));
    }
    values[v] = values[v].element();
  }
  std::vector<HostValue> results = std::move(values);
  for (size_t k = 0; k < scans; ++k) {
    KILN_ASSIGN_OR_RETURN(Tensor stacked, scan.stacked(k, 0, false, args.empty_scan_shape));
    results.push_back(std::move(stacked));
  }
  return results;
}

StatusOr<ScanAttributes> parse_scan_attributes(const Attributes& attributes, size_t inputs,
                                               size_t outputs, std::string_view where) {
  ScanAttributes out;
  KILN_ASSIGN_OR_RETURN(out.num_scan_inputs, attributes.get_int("num_scan_inputs", 0));
  if (out.num_scan_inputs < 1 || static_cast<size_t>(out.num_scan_inputs) > inputs) {
    return invalid_argument("{}: num_scan_inputs is {}; it must be in [1, {}] (the inputs)", where,
                            out.num_scan_inputs, inputs);
  }
  const auto m = static_cast<size_t>(out.num_scan_inputs);
  const size_t states = inputs - m;
  if (outputs < states) {
    return invalid_argument("{}: has {} outputs for {} state values", where, outputs, states);
  }
  const size_t k = outputs - states;
  auto list = [&](const char* name, size_t count, std::vector<int64_t>& into,
                  bool direction) -> Status {
    KILN_ASSIGN_OR_RETURN(into, attributes.get_ints(name, std::vector<int64_t>(count, 0)));
    if (into.size() != count) {
      return invalid_argument("{}: attribute '{}' has {} values; it must have {}", where, name,
                              into.size(), count);
    }
    for (int64_t v : into) {
      if (direction && v != 0 && v != 1) {
        return invalid_argument("{}: attribute '{}' values must be 0 or 1, got {}", where, name, v);
      }
    }
    return ok_status();
  };
  KILN_RETURN_IF_ERROR(list("scan_input_axes", m, out.input_axes, false));
  KILN_RETURN_IF_ERROR(list("scan_input_directions", m, out.input_directions, true));
  KILN_RETURN_IF_ERROR(list("scan_output_axes", k, out.output_axes, false));
  KILN_RETURN_IF_ERROR(list("scan_output_directions", k, out.output_directions, true));
  return out;
}

StatusOr<std::vector<HostValue>> run_scan(std::span<const HostValue> inputs,
                                          const Attributes& attributes, const LoopArgs& args) {
  const std::string& where = args.where;
  if (inputs.size() < args.captures) {
    return invalid_argument("{}: has {} inputs for {} captures", where, inputs.size(),
                            args.captures);
  }
  const size_t formal = inputs.size() - args.captures;
  KILN_ASSIGN_OR_RETURN(ScanAttributes attrs,
                        parse_scan_attributes(attributes, formal, args.output_count, where));
  const auto m = static_cast<size_t>(attrs.num_scan_inputs);
  const size_t states = formal - m;
  const size_t scans = args.output_count - states;
  std::vector<int64_t> axes(m);
  int64_t length = -1;
  for (size_t j = 0; j < m; ++j) {
    const Tensor& x = inputs[states + j].tensor();
    if (!inputs[states + j].is_tensor() || x.empty_storage()) {
      return invalid_argument("{}: scan input {} is absent or not a tensor", where, j);
    }
    KILN_ASSIGN_OR_RETURN(axes[j],
                          normalize_axis(attrs.input_axes[j], x.rank(),
                                         fmt::format("{}: scan_input_axes[{}]", where, j)));
    const int64_t n = x.shape()[axes[j]];
    if (length >= 0 && n != length) {
      return invalid_argument("{}: scan input {} has {} slices along axis {}, scan input 0 has {}",
                              where, j, n, axes[j], length);
    }
    length = n;
  }
  std::vector<HostValue> values(inputs.begin(), inputs.begin() + states);
  ScanCollector scan(scans, args.max_bytes, where);
  for (int64_t i = 0; i < length; ++i) {
    std::vector<HostValue> body_inputs = values;
    for (size_t j = 0; j < m; ++j) {
      const int64_t at = attrs.input_directions[j] == 1 ? length - 1 - i : i;
      body_inputs.push_back(slice_along(inputs[states + j].tensor(), axes[j], at));
    }
    for (size_t c = 0; c < args.captures; ++c) body_inputs.push_back(inputs[formal + c]);
    KILN_ASSIGN_OR_RETURN(std::vector<HostValue> outputs, args.body(std::move(body_inputs)));
    KILN_RETURN_IF_ERROR(check_body_outputs(outputs, states + scans, where, i));
    for (size_t v = 0; v < states; ++v) {
      KILN_RETURN_IF_ERROR(check_carried(values[v], outputs[v], "state value", v, where, i));
      values[v] = outputs[v].clone();
    }
    for (size_t k = 0; k < scans; ++k) {
      KILN_ASSIGN_OR_RETURN(Tensor slice, scan_slice(outputs[states + k], k, where, i));
      KILN_RETURN_IF_ERROR(scan.add(k, slice, i));
    }
  }
  std::vector<HostValue> results = std::move(values);
  for (size_t k = 0; k < scans; ++k) {
    KILN_ASSIGN_OR_RETURN(Tensor stacked,
                          scan.stacked(k, attrs.output_axes[k], attrs.output_directions[k] == 1,
                                       args.empty_scan_shape));
    results.push_back(std::move(stacked));
  }
  return results;
}

int64_t span_product(const ConcreteShape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

}  // namespace kiln::control_flow
