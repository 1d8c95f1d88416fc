// verify_contents (declared in module.h): the semantic checks shared by writer and loader.

#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/base/checked_math.h"
#include "kiln/base/sequence_ops.h"
#include "kiln/module/module.h"
#include "kiln/module/module_header.h"

namespace kiln::module {
namespace {

const char* kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kInput: return "a graph input";
    case ValueKind::kConstant: return "a constant";
    case ValueKind::kIntermediate: return "an intermediate";
  }
  return "an invalid kind";
}

std::string value_label(const ModuleContents& contents, int64_t index) {
  return fmt::format("value {} '{}'", index, contents.values[static_cast<size_t>(index)].name);
}

std::string dispatch_label(const Dispatch& dispatch, size_t index) {
  return fmt::format("dispatch {} '{}' ({})", index, dispatch.name, dispatch.op_type);
}

Status check_index(const ModuleContents& contents, int32_t index, std::string_view where) {
  if (index < 0 || static_cast<size_t>(index) >= contents.values.size()) {
    return invalid_argument("{} is value {}, out of range (the module has {} values)", where, index,
                            contents.values.size());
  }
  return ok_status();
}

Status verify_constant(const ModuleValue& value) {
  ConcreteShape dims;
  for (size_t d = 0; d < value.shape.size(); ++d) {
    std::optional<int64_t> dim = value.shape[d].constant_value();
    if (!dim) {
      return invalid_argument("a constant must have static dims, got {}",
                              shape_to_string(value.shape));
    }
    dims.push_back(*dim);
  }
  const Tensor& data = value.constant;
  if (data.dtype() != value.dtype) {
    return invalid_argument("constant data is {}, the value is {}", dtype_name(data.dtype()),
                            dtype_name(value.dtype));
  }
  if (data.shape() != dims) {
    return invalid_argument("constant data has dims {}, the value has {}",
                            shape_to_string(data.shape()), shape_to_string(dims));
  }
  std::optional<int64_t> count = checked_product(dims);
  std::optional<int64_t> bytes =
      count ? checked_mul(*count, static_cast<int64_t>(dtype_size(value.dtype))) : std::nullopt;
  if (!bytes) return invalid_argument("constant dims {} overflow", shape_to_string(dims));
  if (*bytes > 0 && data.empty_storage()) return invalid_argument("constant has no data");
  return ok_status();
}

Status verify_value(const ModuleValue& value, const std::set<std::string, std::less<>>& symbols) {
  if (!is_valid_dtype_code(static_cast<int>(value.dtype))) {
    return invalid_argument("invalid dtype code {}", static_cast<int>(value.dtype));
  }
  if (static_cast<uint8_t>(value.form) >= kValueFormCount) {
    return invalid_argument("invalid form code {}", static_cast<int>(value.form));
  }
  if (value.form != ValueForm::kTensor &&
      (value.kind == ValueKind::kConstant || !value.shape.empty() || !value.known_values.empty())) {
    return invalid_argument(
        "a {} is {} with {} dims and {} known values; it must be a "
        "non-constant without either",
        value_form_name(value.form), kind_name(value.kind), value.shape.size(),
        value.known_values.size());
  }
  if (static_cast<uint8_t>(value.kind) > static_cast<uint8_t>(ValueKind::kIntermediate)) {
    return invalid_argument("invalid kind code {}", static_cast<int>(value.kind));
  }
  for (size_t d = 0; d < value.shape.size(); ++d) {
    const DimExpr& dim = value.shape[d];
    if (std::optional<int64_t> c = dim.constant_value(); c && *c < 0) {
      return invalid_argument("dim {} is {}; dims must not be negative", d, *c);
    }
    std::string text = dim.to_string();
    if (text.size() > kMaxDimTextLength) {
      return invalid_argument("dim {} is {} characters long, over the limit of {}", d, text.size(),
                              kMaxDimTextLength);
    }
    for (const std::string& symbol : dim.symbols()) {
      if (symbols.count(symbol) == 0) {
        return invalid_argument("dim {} '{}' uses symbol '{}', which the module does not declare",
                                d, text, symbol);
      }
    }
  }
  if (!value.known_values.empty()) {
    const bool holds_values = is_integer(value.dtype) || value.dtype == DType::kBool ||
                              value.dtype == DType::kF32 || value.dtype == DType::kF64;
    if (value.kind == ValueKind::kConstant || !holds_values) {
      return invalid_argument(
          "known element values are only allowed on a non-constant integer, "
          "bool, f32 or f64 value, not on this {} {} {}",
          kind_name(value.kind), dtype_name(value.dtype), shape_to_string(value.shape));
    }
    // Constant dims multiply with overflow checks (wrapping could fake a small count).
    DimExpr count(1);
    if (is_static(value.shape)) {
      ConcreteShape dims;
      for (const DimExpr& d : value.shape) dims.push_back(*d.constant_value());
      std::optional<int64_t> n = checked_product(dims);
      if (!n) return invalid_argument("dims {} overflow", shape_to_string(value.shape));
      count = DimExpr(*n);
    } else {
      for (const DimExpr& d : value.shape) count = count * d;
    }
    if (count != DimExpr(static_cast<int64_t>(value.known_values.size()))) {
      return invalid_argument("has {} known element values for {} elements",
                              value.known_values.size(), count.to_string());
    }
    for (size_t i = 0; i < value.known_values.size(); ++i) {
      const std::string text = value.known_values[i].to_string();
      if (text.size() > kMaxDimTextLength) {
        return invalid_argument("known value {} is {} characters long, over the limit of {}", i,
                                text.size(), kMaxDimTextLength);
      }
      for (const std::string& symbol : value.known_values[i].symbols()) {
        if (symbols.count(symbol) == 0) {
          return invalid_argument(
              "known value {} '{}' uses symbol '{}', which the module does "
              "not declare",
              i, text, symbol);
        }
      }
    }
  }
  if (value.kind == ValueKind::kConstant) return verify_constant(value);
  if (!value.constant.empty_storage()) {
    return invalid_argument("{} value carries constant data", kind_name(value.kind));
  }
  return ok_status();
}

// A value's dims and known elements may use a data symbol only if the value is produced by the
// dispatch that binds it or a later one: the runtime knows the symbol from then on.
Status verify_data_symbol_order(const ModuleContents& contents,
                                const std::unordered_map<std::string, size_t>& binder,
                                const std::vector<size_t>& producer) {
  if (binder.empty()) return ok_status();
  for (size_t i = 0; i < contents.values.size(); ++i) {
    const ModuleValue& value = contents.values[i];
    std::vector<DimExpr> exprs = value.shape;
    exprs.insert(exprs.end(), value.known_values.begin(), value.known_values.end());
    for (const DimExpr& e : exprs) {
      for (const std::string& symbol : e.symbols()) {
        auto it = binder.find(symbol);
        if (it == binder.end()) continue;
        if (value.kind != ValueKind::kIntermediate || producer[i] < it->second) {
          return invalid_argument("{} uses data symbol '{}' before dispatch {} binds it",
                                  value_label(contents, static_cast<int64_t>(i)), symbol,
                                  it->second);
        }
      }
    }
  }
  return ok_status();
}

Status verify_module(const ModuleContents& contents, int depth);

// A dispatch's bodies against its op, inputs, outputs and captures, then each body.
Status verify_bodies(const Dispatch& dispatch, const std::string& label, int depth) {
  const bool one_body =
      dispatch.op_type == "Loop" || dispatch.op_type == "Scan" || dispatch.op_type == "SequenceMap";
  const size_t expected = dispatch.op_type == "If" ? 2 : one_body ? 1 : 0;
  if (expected == 0) {
    return invalid_argument("{}: only Loop, Scan, If and SequenceMap dispatches have bodies",
                            label);
  }
  if (dispatch.bodies.size() != expected) {
    return invalid_argument("{}: has {} bodies, {} takes {}", label, dispatch.bodies.size(),
                            dispatch.op_type, expected);
  }
  if (depth >= kMaxBodyDepth) {
    return invalid_argument("{}: bodies nested more than {} deep", label, kMaxBodyDepth);
  }
  for (const auto& body : dispatch.bodies) {
    if (body == nullptr) return invalid_argument("{}: a body is missing", label);
  }
  auto captures_or = dispatch.attributes.get_int("kiln_captures", 0);
  if (!captures_or.ok()) return invalid_argument("{}: {}", label, captures_or.status().message());
  const int64_t captures = *captures_or;
  const auto inputs = static_cast<int64_t>(dispatch.inputs.size());
  const auto outputs = static_cast<int64_t>(dispatch.outputs.size());
  const int64_t formal = dispatch.op_type == "Loop" ? 2 : dispatch.op_type == "If" ? 1 : 0;
  if (captures < 0 || captures > inputs - formal) {
    return invalid_argument("{}: kiln_captures is {} for {} inputs", label, captures, inputs);
  }
  auto count = [&](size_t b, int64_t body_inputs, int64_t body_outputs) -> Status {
    const ModuleContents& body = *dispatch.bodies[b];
    if (static_cast<int64_t>(body.inputs.size()) != body_inputs ||
        static_cast<int64_t>(body.outputs.size()) != body_outputs) {
      return invalid_argument(
          "{}: body {} has {} inputs and {} outputs; the dispatch gives it {} and needs {}", label,
          b, body.inputs.size(), body.outputs.size(), body_inputs, body_outputs);
    }
    return ok_status();
  };
  if (dispatch.op_type == "Loop") {
    KILN_RETURN_IF_ERROR(count(0, inputs, 1 + outputs));
  } else if (dispatch.op_type == "Scan" || dispatch.op_type == "SequenceMap") {
    KILN_RETURN_IF_ERROR(count(0, inputs, outputs));
  } else {
    if (inputs != 1 + captures) {
      return invalid_argument("{}: has {} inputs for a condition and {} captures", label, inputs,
                              captures);
    }
    const auto then_inputs = static_cast<int64_t>(dispatch.bodies[0]->inputs.size());
    if (then_inputs > captures) {
      return invalid_argument("{}: the then branch takes {} of {} captures", label, then_inputs,
                              captures);
    }
    KILN_RETURN_IF_ERROR(count(0, then_inputs, outputs));
    KILN_RETURN_IF_ERROR(count(1, captures - then_inputs, outputs));
  }
  for (size_t b = 0; b < dispatch.bodies.size(); ++b) {
    Status status = verify_module(*dispatch.bodies[b], depth + 1);
    if (!status.ok()) {
      return Status(status.code(), fmt::format("{}: body {}: {}", label, b, status.message()));
    }
  }
  return ok_status();
}

Status verify_module(const ModuleContents& contents, int depth) {
  if (contents.values.size() > static_cast<size_t>(INT32_MAX)) {
    return invalid_argument("the module has {} values, more than an int32 index can address",
                            contents.values.size());
  }
  std::set<std::string, std::less<>> symbols;
  for (size_t i = 0; i < contents.symbols.size(); ++i) {
    const std::string& symbol = contents.symbols[i];
    if (symbol.empty()) return invalid_argument("symbol {} has an empty name", i);
    if (!symbols.insert(symbol).second) {
      return invalid_argument("symbol {} '{}' is declared twice", i, symbol);
    }
  }
  // Symbols bound from data, and the dispatch that binds each.
  std::unordered_map<std::string, size_t> data_symbol_binder;
  for (size_t d = 0; d < contents.dispatches.size(); ++d) {
    for (const std::string& symbol : contents.dispatches[d].data_symbols) {
      if (symbol.empty() || !symbols.insert(symbol).second) {
        return invalid_argument("{}: data symbol '{}' is empty or declared twice",
                                dispatch_label(contents.dispatches[d], d), symbol);
      }
      data_symbol_binder.emplace(symbol, d);
    }
  }

  for (size_t i = 0; i < contents.assumptions.size(); ++i) {
    for (const std::string& symbol : contents.assumptions[i].symbols()) {
      if (!symbols.count(symbol)) {
        return invalid_argument("assumption {} '{}' uses undeclared symbol '{}'", i,
                                contents.assumptions[i].to_string(), symbol);
      }
    }
  }

  for (size_t i = 0; i < contents.values.size(); ++i) {
    Status status = verify_value(contents.values[i], symbols);
    if (!status.ok()) {
      return Status(status.code(),
                    value_label(contents, static_cast<int64_t>(i)) + ": " + status.message());
    }
  }

  std::vector<bool> is_graph_input(contents.values.size(), false);
  std::unordered_set<std::string> input_names;
  for (size_t i = 0; i < contents.inputs.size(); ++i) {
    int32_t index = contents.inputs[i];
    KILN_RETURN_IF_ERROR(check_index(contents, index, fmt::format("graph input {}", i)));
    const ModuleValue& value = contents.values[static_cast<size_t>(index)];
    if (value.kind != ValueKind::kInput) {
      return invalid_argument("graph input {} is {}, which is {}, not an input value", i,
                              value_label(contents, index), kind_name(value.kind));
    }
    if (is_graph_input[static_cast<size_t>(index)]) {
      return invalid_argument("graph input {} ({}) is listed twice", i,
                              value_label(contents, index));
    }
    // The runtime binds inputs by name.
    if (!input_names.insert(value.name).second) {
      return invalid_argument("graph input {} ({}): another graph input has the same name", i,
                              value_label(contents, index));
    }
    is_graph_input[static_cast<size_t>(index)] = true;
  }
  for (size_t i = 0; i < contents.values.size(); ++i) {
    if (contents.values[i].kind == ValueKind::kInput && !is_graph_input[i]) {
      return invalid_argument("{} is an input value but not listed as a graph input",
                              value_label(contents, static_cast<int64_t>(i)));
    }
  }

  constexpr size_t kNotProduced = SIZE_MAX;
  std::vector<size_t> producer(contents.values.size(), kNotProduced);
  std::unordered_map<std::string_view, size_t> dispatch_names;
  for (size_t d = 0; d < contents.dispatches.size(); ++d) {
    const Dispatch& dispatch = contents.dispatches[d];
    std::string label = dispatch_label(dispatch, d);
    if (dispatch.op_type.empty()) return invalid_argument("{}: empty op type", label);
    if (auto [it, fresh] = dispatch_names.emplace(dispatch.name, d); !fresh) {
      return invalid_argument("{}: the name is already used by dispatch {}", label, it->second);
    }
    for (size_t k = 0; k < dispatch.inputs.size(); ++k) {
      int32_t index = dispatch.inputs[k];
      if (index == kAbsentValue) continue;
      Status status = check_index(contents, index, fmt::format("input {}", k));
      if (!status.ok()) return invalid_argument("{}: {}", label, status.message());
      const ModuleValue& value = contents.values[static_cast<size_t>(index)];
      if (value.kind == ValueKind::kIntermediate &&
          producer[static_cast<size_t>(index)] == kNotProduced) {
        return invalid_argument("{}: input {} reads {} before any dispatch produces it", label, k,
                                value_label(contents, index));
      }
    }
    for (size_t k = 0; k < dispatch.outputs.size(); ++k) {
      int32_t index = dispatch.outputs[k];
      Status status = check_index(contents, index, fmt::format("output {}", k));
      if (!status.ok()) return invalid_argument("{}: {}", label, status.message());
      const ModuleValue& value = contents.values[static_cast<size_t>(index)];
      if (value.kind != ValueKind::kIntermediate) {
        return invalid_argument("{}: output {} writes {}, which is {}", label, k,
                                value_label(contents, index), kind_name(value.kind));
      }
      size_t& produced_by = producer[static_cast<size_t>(index)];
      if (produced_by != kNotProduced) {
        return invalid_argument("{}: output {} writes {}, already produced by dispatch {}", label,
                                k, value_label(contents, index), produced_by);
      }
      produced_by = d;
    }
    if (!dispatch.bodies.empty()) KILN_RETURN_IF_ERROR(verify_bodies(dispatch, label, depth));
    if (!is_host_dispatch(contents, dispatch)) continue;
    if (!dispatch.bodies.empty() || sequence_ops::is_sequence_op(dispatch.op_type) ||
        dispatch.op_type == "Identity") {
      continue;
    }
    return invalid_argument(
        "{}: {} reads or writes a sequence or optional, which only the "
        "sequence and optional ops, Identity and control flow take",
        label, dispatch.op_type);
  }
  for (size_t i = 0; i < contents.values.size(); ++i) {
    if (contents.values[i].kind == ValueKind::kIntermediate && producer[i] == kNotProduced) {
      return invalid_argument("{} is an intermediate that no dispatch produces",
                              value_label(contents, static_cast<int64_t>(i)));
    }
  }
  for (size_t i = 0; i < contents.outputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(
        check_index(contents, contents.outputs[i], fmt::format("graph output {}", i)));
  }
  return verify_data_symbol_order(contents, data_symbol_binder, producer);
}

}  // namespace

bool is_host_dispatch(const ModuleContents& contents, const Dispatch& dispatch) {
  if (!dispatch.bodies.empty() || sequence_ops::is_sequence_op(dispatch.op_type)) return true;
  for (const auto* ids : {&dispatch.inputs, &dispatch.outputs}) {
    for (int32_t v : *ids) {
      if (v >= 0 && static_cast<size_t>(v) < contents.values.size() &&
          contents.values[static_cast<size_t>(v)].form != ValueForm::kTensor) {
        return true;
      }
    }
  }
  return false;
}

Status verify_contents(const ModuleContents& contents) { return verify_module(contents, 0); }

}  // namespace kiln::module
