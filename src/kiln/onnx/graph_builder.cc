#include "kiln/onnx/graph_builder.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "kiln/base/sequence_ops.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/onnx/tensor_proto.h"

namespace kiln::onnx_import {
namespace {

using onnx::AttributeProto;

bool has_control_char(const std::string& text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// Old exporters leave AttributeProto.type unset; the field that holds the value tells it.
AttributeProto::AttributeType attribute_type(const AttributeProto& attr) {
  if (attr.type() != AttributeProto::UNDEFINED) return attr.type();
  if (attr.has_f()) return AttributeProto::FLOAT;
  if (attr.has_i()) return AttributeProto::INT;
  if (attr.has_s()) return AttributeProto::STRING;
  if (attr.has_t()) return AttributeProto::TENSOR;
  if (attr.has_g()) return AttributeProto::GRAPH;
  if (attr.floats_size() > 0) return AttributeProto::FLOATS;
  if (attr.ints_size() > 0) return AttributeProto::INTS;
  if (attr.strings_size() > 0) return AttributeProto::STRINGS;
  if (attr.graphs_size() > 0) return AttributeProto::GRAPHS;
  if (attr.tensors_size() > 0) return AttributeProto::TENSORS;
  return AttributeProto::UNDEFINED;
}

StatusOr<Attribute> convert_attribute(const AttributeProto& attr, const std::string& node) {
  if (!attr.ref_attr_name().empty()) {
    return unimplemented(
        "{}: attribute '{}' refers to a function attribute, which kiln does not "
        "support",
        node, attr.name());
  }
  switch (attribute_type(attr)) {
    case AttributeProto::INT: return Attribute(static_cast<int64_t>(attr.i()));
    case AttributeProto::FLOAT: return Attribute(static_cast<double>(attr.f()));
    case AttributeProto::STRING: return Attribute(attr.s());
    case AttributeProto::INTS:
      return Attribute(std::vector<int64_t>(attr.ints().begin(), attr.ints().end()));
    case AttributeProto::FLOATS:
      return Attribute(std::vector<double>(attr.floats().begin(), attr.floats().end()));
    case AttributeProto::STRINGS:
      return Attribute(std::vector<std::string>(attr.strings().begin(), attr.strings().end()));
    case AttributeProto::GRAPH:
    case AttributeProto::GRAPHS:
      return unimplemented("{}: attribute '{}' is a subgraph; kiln does not support control flow",
                           node, attr.name());
    case AttributeProto::UNDEFINED:
      return invalid_argument("{}: attribute '{}' has no type and no value", node, attr.name());
    default:
      return unimplemented("{}: attribute '{}' of kind {} is only supported on Constant", node,
                           attr.name(), AttributeProto::AttributeType_Name(attribute_type(attr)));
  }
}

// A 1-D constant from Constant's value_floats / value_ints.
template <typename T, typename Field>
StatusOr<Tensor> vector_tensor(DType dtype, const Field& values) {
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(dtype, {static_cast<int64_t>(values.size())}));
  std::copy(values.begin(), values.end(), out.mutable_values<T>().begin());
  return out;
}

// The body attributes of the control-flow ops kiln runs as nested programs, in the order of
// ir::Node::bodies.
std::vector<std::string> body_attribute_names(const std::string& op_type) {
  if (op_type == "Loop" || op_type == "Scan" || op_type == "SequenceMap") return {"body"};
  if (op_type == "If") return {"then_branch", "else_branch"};
  return {};
}

// A sequence's or optional's form, dtype and tensors' rank (-1: not declared) from its ONNX type.
struct NonTensorType {
  ValueForm form = ValueForm::kSequence;
  DType dtype = DType::kF32;
  int64_t element_rank = -1;
};

StatusOr<NonTensorType> non_tensor_type(const onnx::TypeProto& type, const std::string& what) {
  NonTensorType out;
  const onnx::TypeProto* inner = &type;
  if (type.has_optional_type()) {
    inner = &type.optional_type().elem_type();
    out.form =
        inner->has_sequence_type() ? ValueForm::kOptionalSequence : ValueForm::kOptionalTensor;
    if (!inner->has_sequence_type() && !inner->has_tensor_type()) {
      return unimplemented("{} is an optional of neither a tensor nor a sequence", what);
    }
  } else if (!type.has_sequence_type()) {
    return unimplemented("{} is not a tensor, a sequence or an optional (maps are unsupported)",
                         what);
  }
  if (inner->has_sequence_type()) inner = &inner->sequence_type().elem_type();
  if (!inner->has_tensor_type()) {
    return unimplemented(
        "{} holds something other than tensors (kiln supports sequences of tensors)", what);
  }
  const auto& tensor = inner->tensor_type();
  if (tensor.elem_type() == 0) return invalid_argument("{} has no element type", what);
  KILN_ASSIGN_OR_RETURN(out.dtype, dtype_from_onnx(tensor.elem_type(), what));
  if (tensor.has_shape()) out.element_rank = tensor.shape().dim_size();
  return out;
}

bool is_non_tensor(const onnx::TypeProto& type) {
  return type.value_case() != onnx::TypeProto::VALUE_NOT_SET && !type.has_tensor_type();
}

class Builder {
 public:
  Builder(const onnx::GraphProto& proto, const std::string& model_dir, const ImportOptions& options,
          Builder* parent = nullptr, int depth = 0)
      : proto_(proto), model_dir_(model_dir), options_(options), parent_(parent), depth_(depth) {}

  // A body: its inputs (formal ones, then the captures found while its nodes are added), its
  // constants and nodes, its outputs; typed later by the node's inference.
  StatusOr<std::shared_ptr<ir::Graph>> build_body(int64_t opset) {
    graph_.name = proto_.name();
    graph_.opset = opset;
    if (proto_.sparse_initializer_size() > 0) {
      return unimplemented("sparse initializers are not supported (first: '{}')",
                           proto_.sparse_initializer(0).values().name());
    }
    for (const auto& init : proto_.initializer()) {
      if (init.name().empty()) return invalid_argument("an initializer has no name");
      initializers_.emplace(init.name(), &init);
    }
    for (const auto& input : proto_.input()) {
      if (input.name().empty()) return invalid_argument("a body input has no name");
      DType dtype = DType::kF32;
      if (input.type().has_tensor_type() && input.type().tensor_type().elem_type() != 0) {
        KILN_ASSIGN_OR_RETURN(dtype, dtype_from_onnx(input.type().tensor_type().elem_type(),
                                                     fmt::format("body input '{}'", input.name())));
      } else if (input.has_type() && is_non_tensor(input.type())) {
        // The node's inference gives it its form and dtype; only check that kiln can hold it.
        KILN_RETURN_IF_ERROR(
            non_tensor_type(input.type(), fmt::format("body input '{}'", input.name())).status());
      }
      KILN_RETURN_IF_ERROR(
          define(input.name(), graph_.add_input(input.name(), dtype, {}), "a body input"));
    }
    KILN_RETURN_IF_ERROR(add_initializers());
    KILN_RETURN_IF_ERROR(add_nodes());
    if (proto_.output_size() == 0)
      return invalid_argument("body '{}' has no outputs", proto_.name());
    for (const auto& output : proto_.output()) {
      std::optional<ir::ValueId> id = resolve(output.name());
      if (!id) {
        return invalid_argument("body output '{}' is not a value of the body or an enclosing graph",
                                output.name());
      }
      graph_.add_output(*id);
    }
    return std::make_shared<ir::Graph>(std::move(graph_));
  }

  // Outer-scope values this body reads, in its capture inputs' order (the parent's ids).
  const std::vector<ir::ValueId>& captures() const { return captures_; }

  StatusOr<ir::Graph> build(int64_t opset) {
    graph_.name = proto_.name();
    graph_.opset = opset;
    KILN_RETURN_IF_ERROR(add_inputs());
    KILN_RETURN_IF_ERROR(apply_bindings());
    KILN_RETURN_IF_ERROR(add_initializers());
    KILN_RETURN_IF_ERROR(add_nodes());
    KILN_RETURN_IF_ERROR(bind_compile_time_inputs());
    std::vector<std::string> unsupported = graph_eval::unsupported_ops(graph_);
    if (!unsupported.empty()) {
      return unimplemented("unsupported ops: {}", fmt::join(unsupported, ", "));
    }
    KILN_RETURN_IF_ERROR(graph_eval::infer_graph(graph_));
    KILN_RETURN_IF_ERROR(add_outputs());
    KILN_RETURN_IF_ERROR(ir::verify_graph(graph_));
    return std::move(graph_);
  }

 private:
  // The value `name` names here: one of this graph's, or, in a body, an enclosing graph's value,
  // which becomes a capture input of this body on first use.
  std::optional<ir::ValueId> resolve(const std::string& name) {
    auto it = by_name_.find(name);
    if (it != by_name_.end()) return it->second;
    if (parent_ == nullptr) return std::nullopt;
    std::optional<ir::ValueId> outer = parent_->resolve(name);
    if (!outer) return std::nullopt;
    const ir::Value& value = parent_->graph_.value(*outer);
    ir::ValueId id = graph_.add_input(name, value.dtype, {});
    by_name_.emplace(name, id);
    captures_.push_back(*outer);
    return id;
  }

  Status define(const std::string& name, ir::ValueId id, std::string_view by) {
    if (!by_name_.emplace(name, id).second) {
      return invalid_argument("value '{}' is defined twice (again by {})", name, by);
    }
    return ok_status();
  }

  void collect_declared_symbols(
      const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& infos) {
    for (const auto& info : infos) {
      if (!info.type().has_tensor_type()) continue;
      for (const auto& dim : info.type().tensor_type().shape().dim()) {
        if (dim.has_dim_param()) used_symbols_.insert(dim.dim_param());
      }
    }
  }

  std::string fresh_symbol(const std::string& input, int axis) {
    std::string base = fmt::format("unk_{}_{}", input, axis);
    std::string name = base;
    for (int n = 2; used_symbols_.count(name); ++n) name = fmt::format("{}_{}", base, n);
    used_symbols_.insert(name);
    return name;
  }

  StatusOr<graph_eval::ValueType> input_type(const onnx::ValueInfoProto& input,
                                             const onnx::TensorProto* initializer) {
    std::string what = fmt::format("graph input '{}'", input.name());
    const auto& type = input.type();
    if (initializer != nullptr && !type.tensor_type().has_shape()) {
      // weights_as_inputs with an untyped input: the initializer states the type.
      KILN_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx(initializer->data_type(), what));
      for (int64_t d : initializer->dims()) {
        if (d < 0) return invalid_argument("{} has a negative initializer dim", what);
      }
      ConcreteShape dims(initializer->dims().begin(), initializer->dims().end());
      return graph_eval::ValueType{dtype, shape_from_concrete(dims)};
    }
    if (!input.has_type()) return invalid_argument("{} has no type", what);
    if (!type.has_tensor_type()) {
      return unimplemented("{} is not a tensor (sequence, map and optional inputs are unsupported)",
                           what);
    }
    const auto& tensor = type.tensor_type();
    if (tensor.elem_type() == 0) return invalid_argument("{} has no element type", what);
    KILN_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx(tensor.elem_type(), what));
    if (!tensor.has_shape()) {
      return unimplemented("{} has an unknown rank; kiln needs the rank of every input", what);
    }
    Shape shape;
    for (int axis = 0; axis < tensor.shape().dim_size(); ++axis) {
      const auto& dim = tensor.shape().dim(axis);
      if (dim.has_dim_value() && dim.dim_value() >= 0) {
        shape.push_back(DimExpr(static_cast<int64_t>(dim.dim_value())));
      } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
        if (has_control_char(dim.dim_param())) {
          return invalid_argument("{}: dim {} has a symbolic name with control characters", what,
                                  axis);
        }
        shape.push_back(DimExpr::symbol(dim.dim_param()));
      } else {
        shape.push_back(DimExpr::symbol(fresh_symbol(input.name(), axis)));
      }
    }
    return graph_eval::ValueType{dtype, std::move(shape)};
  }

  // Turns graph inputs that feed compile-time operands into constants with the values
  // options_.compile_time_value gives.
  Status bind_compile_time_inputs() {
    if (!options_.compile_time_value) return ok_status();
    std::set<ir::ValueId> needed;
    for (const ir::Node& node : graph_.nodes()) {
      const graph_eval::OpDef* def =
          graph_eval::default_registry().find(node.op_type, graph_.opset);
      if (def == nullptr || def->compile_time_inputs == 0) continue;
      for (size_t i = 0; i < node.inputs.size() && i < 32; ++i) {
        if (((def->compile_time_inputs >> i) & 1u) != 0 && node.inputs[i] != ir::kAbsent) {
          needed.insert(node.inputs[i]);
        }
      }
    }
    std::vector<ir::ValueId> kept;
    const std::vector<ir::ValueId> inputs = graph_.inputs();
    for (size_t position = 0; position < inputs.size(); ++position) {
      const ir::ValueId id = inputs[position];
      ir::Value& value = graph_.value(id);
      if (!needed.count(id)) {
        kept.push_back(id);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(std::optional<Tensor> tensor,
                            options_.compile_time_value(position, value.name));
      if (!tensor) {
        kept.push_back(id);
        continue;
      }
      const std::string what = fmt::format("compile-time value of graph input '{}'", value.name);
      if (tensor->dtype() != value.dtype ||
          tensor->rank() != static_cast<int64_t>(value.shape.size())) {
        return invalid_argument("{} is {} {}, but the input is declared {} {}", what,
                                dtype_name(tensor->dtype()), shape_to_string(tensor->shape()),
                                dtype_name(value.dtype), shape_to_string(value.shape));
      }
      for (size_t d = 0; d < value.shape.size(); ++d) {
        auto declared = value.shape[d].constant_value();
        if (declared && *declared != tensor->shape()[d]) {
          return invalid_argument("{} has dim {} = {}, but the input declares {}", what, d,
                                  tensor->shape()[d], *declared);
        }
      }
      value.shape = shape_from_concrete(tensor->shape());
      value.constant = std::move(*tensor);
    }
    graph_.mutable_inputs() = std::move(kept);
    return ok_status();
  }

  Status add_inputs() {
    for (const auto& init : proto_.initializer()) {
      if (init.name().empty()) return invalid_argument("an initializer has no name");
      if (!initializers_.emplace(init.name(), &init).second) {
        return invalid_argument("initializer '{}' is defined twice", init.name());
      }
    }
    if (proto_.sparse_initializer_size() > 0) {
      return unimplemented("sparse initializers are not supported (first: '{}')",
                           proto_.sparse_initializer(0).values().name());
    }
    collect_declared_symbols(proto_.input());
    collect_declared_symbols(proto_.output());
    for (const auto& input : proto_.input()) {
      if (input.name().empty()) return invalid_argument("a graph input has no name");
      auto init = initializers_.find(input.name());
      const onnx::TensorProto* initializer = init == initializers_.end() ? nullptr : init->second;
      if (initializer != nullptr && !options_.weights_as_inputs) {
        declared_constant_types_[input.name()] = &input;
        continue;
      }
      if (initializer == nullptr && is_non_tensor(input.type())) {
        KILN_ASSIGN_OR_RETURN(
            NonTensorType type,
            non_tensor_type(input.type(), fmt::format("graph input '{}'", input.name())));
        ir::ValueId id = graph_.add_input(input.name(), type.dtype, {});
        graph_.value(id).form = type.form;
        graph_.value(id).element_rank = type.element_rank;
        KILN_RETURN_IF_ERROR(define(input.name(), id, "a graph input"));
        continue;
      }
      KILN_ASSIGN_OR_RETURN(graph_eval::ValueType type, input_type(input, initializer));
      ir::ValueId id = graph_.add_input(input.name(), type.dtype, std::move(type.shape));
      KILN_RETURN_IF_ERROR(define(input.name(), id, "a graph input"));
    }
    return ok_status();
  }

  Status apply_bindings() {
    if (options_.bind.empty()) return ok_status();
    std::set<std::string> symbols;
    for (ir::ValueId id : graph_.inputs()) {
      for (const DimExpr& dim : graph_.value(id).shape) {
        for (std::string& s : dim.symbols()) symbols.insert(std::move(s));
      }
    }
    std::map<std::string, DimExpr, std::less<>> replacements;
    for (const auto& [name, value] : options_.bind) {
      if (value < 0)
        return invalid_argument("bind: symbol '{}' bound to negative value {}", name, value);
      if (!symbols.count(name)) {
        return not_found("bind: symbol '{}' does not occur in any graph input (symbols: {})", name,
                         symbols.empty() ? "none" : fmt::format("{}", fmt::join(symbols, ", ")));
      }
      replacements.emplace(name, DimExpr(value));
    }
    for (ir::ValueId id : graph_.inputs()) {
      for (DimExpr& dim : graph_.value(id).shape) dim = dim.substitute(replacements);
    }
    return ok_status();
  }

  Status add_initializers() {
    for (const auto& init : proto_.initializer()) {
      if (by_name_.count(init.name())) continue;  // a runtime input (weights_as_inputs)
      std::string what = fmt::format("initializer '{}'", init.name());
      KILN_ASSIGN_OR_RETURN(Tensor data,
                            tensor_from_proto(init, model_dir_, what, external_files()));
      auto declared = declared_constant_types_.find(init.name());
      if (declared != declared_constant_types_.end()) {
        const auto& tensor = declared->second->type().tensor_type();
        if (tensor.elem_type() != 0 && tensor.elem_type() != init.data_type()) {
          return invalid_argument("{} has type {} but graph input '{}' declares {}", what,
                                  onnx_type_name(init.data_type()), init.name(),
                                  onnx_type_name(tensor.elem_type()));
        }
      }
      KILN_RETURN_IF_ERROR(
          define(init.name(), graph_.add_constant(init.name(), std::move(data)), what));
    }
    return ok_status();
  }

  StatusOr<Tensor> constant_node_value(const onnx::NodeProto& node, const std::string& desc) {
    if (node.attribute_size() != 1) {
      return invalid_argument("{}: Constant needs exactly one value attribute, got {}", desc,
                              node.attribute_size());
    }
    const AttributeProto& attr = node.attribute(0);
    auto kind = attribute_type(attr);
    auto expect = [&](AttributeProto::AttributeType want) -> Status {
      if (kind == want) return ok_status();
      return invalid_argument("{}: attribute '{}' must be {}, got {}", desc, attr.name(),
                              AttributeProto::AttributeType_Name(want),
                              AttributeProto::AttributeType_Name(kind));
    };
    const std::string& name = attr.name();
    if (name == "value") {
      KILN_RETURN_IF_ERROR(expect(AttributeProto::TENSOR));
      return tensor_from_proto(attr.t(), model_dir_, desc + " attribute 'value'", external_files());
    }
    if (name == "value_float" || name == "value_int") {
      bool is_float = name == "value_float";
      KILN_RETURN_IF_ERROR(expect(is_float ? AttributeProto::FLOAT : AttributeProto::INT));
      KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(is_float ? DType::kF32 : DType::kI64, {}));
      if (is_float)
        out.mutable_values<float>()[0] = attr.f();
      else
        out.mutable_values<int64_t>()[0] = attr.i();
      return out;
    }
    if (name == "value_floats") {
      KILN_RETURN_IF_ERROR(expect(AttributeProto::FLOATS));
      return vector_tensor<float>(DType::kF32, attr.floats());
    }
    if (name == "value_ints") {
      KILN_RETURN_IF_ERROR(expect(AttributeProto::INTS));
      return vector_tensor<int64_t>(DType::kI64, attr.ints());
    }
    return unimplemented(
        "{}: Constant attribute '{}' is not supported (supported: value, "
        "value_float, value_floats, value_int, value_ints)",
        desc, name);
  }

  // ConstantOfShape's `value`, a one-element tensor, as the number 'value' (int for integer and
  // bool dtypes, float otherwise) and its dtype 'kiln_value_dtype' (graph_eval/graph_eval.h).
  Status convert_fill_value(const AttributeProto& attr, const std::string& desc,
                            Attributes& attributes) {
    if (attribute_type(attr) != AttributeProto::TENSOR) {
      return invalid_argument("{}: attribute 'value' must be TENSOR, got {}", desc,
                              AttributeProto::AttributeType_Name(attribute_type(attr)));
    }
    KILN_ASSIGN_OR_RETURN(
        Tensor t,
        tensor_from_proto(attr.t(), model_dir_, desc + " attribute 'value'", external_files()));
    if (t.element_count() != 1) {
      return invalid_argument("{}: attribute 'value' must hold one element, got {}", desc,
                              t.element_count());
    }
    if (is_float(t.dtype())) {
      attributes.set("value", element_as_double(t, 0));
    } else {
      attributes.set("value", element_as_int64(t, 0));
    }
    attributes.set("kiln_value_dtype", std::string(dtype_name(t.dtype())));
    return ok_status();
  }

  // SequenceEmpty's `dtype` (an ONNX element type) and Optional's `type` (a TypeProto) as kiln's
  // attributes kiln_dtype (a dtype name) and kiln_form (base/sequence_ops.h).
  Status convert_value_type(const AttributeProto& attr, const std::string& desc, ir::Node& node) {
    const std::string what = fmt::format("{} attribute '{}'", desc, attr.name());
    if (attr.name() == "dtype" && node.op_type == "SequenceEmpty") {
      KILN_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx(static_cast<int>(attr.i()), what));
      node.attributes.set(sequence_ops::kDtypeAttribute, std::string(dtype_name(dtype)));
      return ok_status();
    }
    if (attr.name() == "type" && node.op_type == "Optional") {
      if (!attr.has_tp()) return invalid_argument("{} must be a type", what);
      DType dtype = DType::kF32;
      ValueForm form = ValueForm::kOptionalTensor;
      if (attr.tp().has_tensor_type()) {
        KILN_ASSIGN_OR_RETURN(dtype, dtype_from_onnx(attr.tp().tensor_type().elem_type(), what));
      } else {
        KILN_ASSIGN_OR_RETURN(NonTensorType type, non_tensor_type(attr.tp(), what));
        if (type.form != ValueForm::kSequence) {
          return unimplemented("{}: an optional holds a tensor or a sequence", what);
        }
        dtype = type.dtype;
        form = ValueForm::kOptionalSequence;
      }
      node.attributes.set(sequence_ops::kDtypeAttribute, std::string(dtype_name(dtype)));
      node.attributes.set(sequence_ops::kFormAttribute, static_cast<int64_t>(form));
      return ok_status();
    }
    return invalid_argument("{} is not an attribute of {}", what, node.op_type);
  }

  Status add_constant_node(const onnx::NodeProto& node, const std::string& desc) {
    if (node.input_size() != 0 || node.output_size() != 1 || node.output(0).empty()) {
      return invalid_argument("{}: Constant needs no inputs and one named output, got {} and {}",
                              desc, node.input_size(), node.output_size());
    }
    KILN_ASSIGN_OR_RETURN(Tensor value, constant_node_value(node, desc));
    return define(node.output(0), graph_.add_constant(node.output(0), std::move(value)), desc);
  }

  Status add_nodes() {
    std::vector<std::string> names = unique_node_names(proto_);
    const graph_eval::Registry& registry = graph_eval::default_registry();
    for (int i = 0; i < proto_.node_size(); ++i) {
      const onnx::NodeProto& proto = proto_.node(i);
      std::string desc = fmt::format("node '{}' ({})", names[i], proto.op_type());
      if (proto.op_type() == "Constant") {
        KILN_RETURN_IF_ERROR(add_constant_node(proto, desc));
        continue;
      }
      ir::Node node;
      node.name = names[i];
      node.op_type = proto.op_type();
      for (const std::string& input : proto.input()) {
        if (input.empty()) {
          node.inputs.push_back(ir::kAbsent);
          continue;
        }
        std::optional<ir::ValueId> id = resolve(input);
        if (!id) {
          return invalid_argument(
              "{}: input '{}' is not defined before this node (not a graph "
              "input, initializer or output of an earlier node)",
              desc, input);
        }
        node.inputs.push_back(*id);
      }
      const std::vector<std::string> body_names = body_attribute_names(node.op_type);
      if (!body_names.empty()) KILN_RETURN_IF_ERROR(add_bodies(proto, desc, body_names, node));
      int output_count = proto.output_size();
      while (output_count > 0 && proto.output(output_count - 1).empty()) --output_count;
      for (int o = 0; o < output_count; ++o) {
        // An omitted optional output in the middle still needs a value to keep positions.
        std::string name = proto.output(o).empty()
                               ? graph_.unique_value_name(fmt::format("{}_unused_{}", node.name, o))
                               : proto.output(o);
        ir::ValueId id =
            graph_.add_value(ir::Value{name, DType::kF32, {}, std::nullopt, std::nullopt});
        KILN_RETURN_IF_ERROR(define(name, id, desc));
        node.outputs.push_back(id);
      }
      // Attributes of unsupported ops are not converted: those ops are reported together below.
      const bool sequence_op = sequence_ops::is_sequence_op(node.op_type);
      if (registry.find(node.op_type, graph_.opset) != nullptr || !body_names.empty() ||
          sequence_op) {
        for (const AttributeProto& attr : proto.attribute()) {
          if (std::find(body_names.begin(), body_names.end(), attr.name()) != body_names.end())
            continue;
          if (node.attributes.has(attr.name())) {
            return invalid_argument("{}: attribute '{}' is given twice", desc, attr.name());
          }
          if (attr.name().rfind("kiln_", 0) == 0) {
            return invalid_argument("{}: attribute '{}' uses the prefix of kiln's own attributes",
                                    desc, attr.name());
          }
          if (node.op_type == "ConstantOfShape" && attr.name() == "value") {
            KILN_RETURN_IF_ERROR(convert_fill_value(attr, desc, node.attributes));
            continue;
          }
          if (sequence_op && (attr.name() == "dtype" || attr.name() == "type")) {
            KILN_RETURN_IF_ERROR(convert_value_type(attr, desc, node));
            continue;
          }
          KILN_ASSIGN_OR_RETURN(Attribute value, convert_attribute(attr, desc));
          node.attributes.set(attr.name(), std::move(value));
        }
      }
      graph_.add_node(std::move(node));
    }
    return ok_status();
  }

  // Builds the node's bodies (recursively) and appends their captures to its inputs.
  Status add_bodies(const onnx::NodeProto& proto, const std::string& desc,
                    const std::vector<std::string>& names, ir::Node& node) {
    if (depth_ >= ir::kMaxBodyDepth) {
      return invalid_argument("{}: bodies nested more than {} deep", desc, ir::kMaxBodyDepth);
    }
    int64_t captures = 0;
    for (const std::string& name : names) {
      const AttributeProto* found = nullptr;
      for (const AttributeProto& attr : proto.attribute()) {
        if (attr.name() == name) found = &attr;
      }
      if (found == nullptr || attribute_type(*found) != AttributeProto::GRAPH) {
        return invalid_argument("{}: attribute '{}' (a graph) is missing", desc, name);
      }
      Builder body(found->g(), model_dir_, options_, this, depth_ + 1);
      auto graph = body.build_body(graph_.opset);
      if (!graph.ok()) {
        return std::move(graph).status().with_note(fmt::format("in {} of {}", name, desc));
      }
      for (ir::ValueId outer : body.captures()) node.inputs.push_back(outer);
      captures += static_cast<int64_t>(body.captures().size());
      node.bodies.push_back(std::move(graph).value());
    }
    node.attributes.set(ir::kCapturesAttribute, captures);
    return ok_status();
  }

  Status add_outputs() {
    if (proto_.output_size() == 0)
      return invalid_argument("graph '{}' has no outputs", proto_.name());
    for (const auto& output : proto_.output()) {
      auto it = by_name_.find(output.name());
      if (it == by_name_.end()) {
        return invalid_argument(
            "graph output '{}' is not a graph input, initializer or node output", output.name());
      }
      const ir::Value& value = graph_.value(it->second);
      if (is_non_tensor(output.type()) || value.form != ValueForm::kTensor) {
        std::string what = fmt::format("graph output '{}'", output.name());
        if (output.has_type() && is_non_tensor(output.type())) {
          KILN_ASSIGN_OR_RETURN(NonTensorType type, non_tensor_type(output.type(), what));
          if (type.form != value.form || type.dtype != value.dtype) {
            return invalid_argument("{} is declared a {} of {} but inference gives a {} of {}",
                                    what, value_form_name(type.form), dtype_name(type.dtype),
                                    value_form_name(value.form), dtype_name(value.dtype));
          }
        } else if (output.type().has_tensor_type()) {
          return invalid_argument("{} is declared a tensor but inference gives a {}", what,
                                  value_form_name(value.form));
        }
        graph_.add_output(it->second);
        continue;
      }
      const auto& declared = output.type().tensor_type();
      if (output.type().has_tensor_type()) {
        std::string what = fmt::format("graph output '{}'", output.name());
        if (declared.elem_type() != 0) {
          KILN_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx(declared.elem_type(), what));
          if (dtype != value.dtype) {
            return invalid_argument("{} is declared {} but inference gives {}{}", what,
                                    dtype_name(dtype), dtype_name(value.dtype),
                                    shape_to_string(value.shape));
          }
        }
        if (declared.has_shape() &&
            declared.shape().dim_size() != static_cast<int>(value.shape.size())) {
          return invalid_argument("{} is declared with rank {} but inference gives {}{}", what,
                                  declared.shape().dim_size(), dtype_name(value.dtype),
                                  shape_to_string(value.shape));
        }
      }
      graph_.add_output(it->second);
    }
    return ok_status();
  }

  // Where external data stays mapped when the weights stay in their files, shared by the whole
  // model (the outermost graph's builder holds it); null when they are read in.
  ExternalDataFiles* external_files() {
    if (!options_.weights_by_reference) return nullptr;
    return parent_ != nullptr ? parent_->external_files() : &external_files_;
  }

  const onnx::GraphProto& proto_;
  const std::string& model_dir_;
  const ImportOptions& options_;
  ExternalDataFiles external_files_;
  ir::Graph graph_;
  std::map<std::string, ir::ValueId> by_name_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  // Graph inputs that are initializers imported as constants: their declared types, to check.
  std::map<std::string, const onnx::ValueInfoProto*> declared_constant_types_;
  std::set<std::string> used_symbols_;
  Builder* parent_ = nullptr;  // the enclosing graph's builder, for a body
  int depth_ = 0;              // bodies enclosing this graph
  std::vector<ir::ValueId> captures_;
};

}  // namespace

std::vector<std::string> unique_node_names(const onnx::GraphProto& graph) {
  std::set<std::string> used;
  for (const auto& node : graph.node()) {
    if (!node.name().empty()) used.insert(node.name());
  }
  std::vector<std::string> names;
  std::set<std::string> taken;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    std::string base = node.name().empty() ? fmt::format("{}_{}", node.op_type(), i) : node.name();
    std::string name = base;
    // A generated name must not steal a later node's given name; a repeated given name is
    // renamed after its first use.
    for (int n = 1; taken.count(name) || (name != node.name() && used.count(name)); ++n) {
      name = fmt::format("{}__{}", base, n);
    }
    taken.insert(name);
    names.push_back(std::move(name));
  }
  return names;
}

namespace {

// Adds `graph`'s nodes, and those of the bodies of its control-flow nodes, to `skeleton`.
void add_skeleton_nodes(const onnx::GraphProto& graph, int64_t opset, ir::Graph& skeleton) {
  std::vector<std::string> names = unique_node_names(graph);
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& proto = graph.node(i);
    if (proto.op_type() == "Constant") continue;  // becomes a constant, never a node
    if (!body_attribute_names(proto.op_type()).empty()) {
      for (const AttributeProto& attr : proto.attribute()) {
        if (attr.has_g()) add_skeleton_nodes(attr.g(), opset, skeleton);
      }
      continue;
    }
    ir::Node node;
    node.name = names[i];
    node.op_type = proto.op_type();
    // Ops that ONNX's version converter replaces on the way to the target opset.
    if (node.op_type == "Scatter" && opset >= 11) node.op_type = "ScatterElements";
    if (node.op_type == "Upsample" && opset >= 10) node.op_type = "Resize";
    skeleton.add_node(std::move(node));
  }
}

}  // namespace

Status check_supported_ops(const onnx::GraphProto& graph, int64_t opset) {
  ir::Graph skeleton;
  skeleton.opset = opset;
  add_skeleton_nodes(graph, opset, skeleton);
  std::vector<std::string> unsupported = graph_eval::unsupported_ops(skeleton);
  if (unsupported.empty()) return ok_status();
  return unimplemented("unsupported ops: {}", fmt::join(unsupported, ", "));
}

StatusOr<ir::Graph> build_graph(const onnx::GraphProto& graph, int64_t opset,
                                const std::string& model_dir, const ImportOptions& options) {
  return Builder(graph, model_dir, options).build(opset);
}

}  // namespace kiln::onnx_import
