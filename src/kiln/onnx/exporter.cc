#include "kiln/onnx/exporter.h"

#include <map>
#include <set>

#include "onnx/checker.h"
#include "onnx/onnx_pb.h"

#include "kiln/base/file_util.h"
#include "kiln/onnx/domains.h"
#include "kiln/onnx/tensor_proto.h"

namespace kiln::onnx_import {
namespace {

// The IR version that introduced opset 17; the checker rejects older IR versions with it.
constexpr int64_t kIrVersion = 8;

StatusOr<int32_t> onnx_type(DType dtype, std::string_view what) {
  const onnx::TensorProto::DataType elem = onnx_type_of(dtype);
  if (elem == onnx::TensorProto::UNDEFINED) {
    return invalid_argument("{}: cannot export invalid dtype code {}", what,
                            static_cast<int>(dtype));
  }
  return elem;
}

Status set_value_info(const ir::Value& value, onnx::ValueInfoProto& info) {
  info.set_name(value.name);
  auto* tensor = info.mutable_type()->mutable_tensor_type();
  KILN_ASSIGN_OR_RETURN(int32_t elem,
                        onnx_type(value.dtype, fmt::format("value '{}'", value.name)));
  tensor->set_elem_type(elem);
  auto* shape = tensor->mutable_shape();
  for (const DimExpr& dim : value.shape) {
    auto* out = shape->add_dim();
    if (auto constant = dim.evaluate({}); constant.ok()) {
      out->set_dim_value(*constant);
    } else if (dim.is_symbol()) {
      out->set_dim_param(dim.symbols()[0]);
    }
  }
  return ok_status();
}

Status set_initializer(const ir::Value& value, onnx::TensorProto& proto) {
  const Tensor& data = *value.constant;
  proto.set_name(value.name);
  KILN_ASSIGN_OR_RETURN(int32_t elem,
                        onnx_type(data.dtype(), fmt::format("constant '{}'", value.name)));
  proto.set_data_type(elem);
  for (int64_t d : data.shape()) proto.add_dims(d);
  proto.set_raw_data(reinterpret_cast<const char*>(data.data()), data.byte_size());
  return ok_status();
}

Status set_attribute(const std::string& name, const Attribute& value, onnx::AttributeProto& attr) {
  if (name.rfind("kiln_", 0) == 0) {
    return unimplemented("attribute '{}' is a kiln extension with no ONNX form", name);
  }
  attr.set_name(name);
  if (const auto* i = std::get_if<int64_t>(&value)) {
    attr.set_type(onnx::AttributeProto::INT);
    attr.set_i(*i);
  } else if (const auto* f = std::get_if<double>(&value)) {
    attr.set_type(onnx::AttributeProto::FLOAT);
    attr.set_f(static_cast<float>(*f));
  } else if (const auto* s = std::get_if<std::string>(&value)) {
    attr.set_type(onnx::AttributeProto::STRING);
    attr.set_s(*s);
  } else if (const auto* ints = std::get_if<std::vector<int64_t>>(&value)) {
    attr.set_type(onnx::AttributeProto::INTS);
    for (int64_t x : *ints) attr.add_ints(x);
  } else if (const auto* floats = std::get_if<std::vector<double>>(&value)) {
    attr.set_type(onnx::AttributeProto::FLOATS);
    for (double x : *floats) attr.add_floats(static_cast<float>(x));
  } else if (const auto* strings = std::get_if<std::vector<std::string>>(&value)) {
    attr.set_type(onnx::AttributeProto::STRINGS);
    for (const std::string& x : *strings) attr.add_strings(x);
  }
  return ok_status();
}

Status check_and_write(const onnx::ModelProto& model, const std::string& path) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    return internal_error("the exported model fails the ONNX checker: {}", e.what());
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return internal_error("cannot serialize the exported model");
  return write_file_atomically(path, bytes);
}

Status export_nodes(const ir::Graph& graph, std::span<const ir::NodeId> nodes,
                    std::span<const ir::ValueId> outputs, const std::string& graph_name,
                    onnx::ModelProto& model) {
  if (nodes.empty()) return invalid_argument("no nodes to export");
  if (outputs.empty()) return invalid_argument("no outputs to export");
  const auto node_count = static_cast<ir::NodeId>(graph.nodes().size());
  const auto value_count = static_cast<ir::ValueId>(graph.values().size());
  model.set_ir_version(kIrVersion);
  model.set_producer_name("kiln");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(graph.opset);
  onnx::GraphProto* out = model.mutable_graph();
  out->set_name(graph_name);

  std::set<ir::ValueId> produced, declared;
  bool training_domain = false;  // its opset import written
  for (ir::NodeId id : nodes) {
    if (id < 0 || id >= node_count) return invalid_argument("node id {} is out of range", id);
    const ir::Node& node = graph.node(id);
    Status status = [&]() -> Status {
      if (!node.bodies.empty()) {
        return unimplemented("it has bodies (control flow), which the exporter does not write");
      }
      for (const auto* ids : {&node.inputs, &node.outputs}) {
        for (ir::ValueId v : *ids) {
          if (v >= 0 && static_cast<size_t>(v) < graph.values().size() &&
              graph.value(v).form != ValueForm::kTensor) {
            return unimplemented("value '{}' is a {}, which the exporter does not write",
                                 graph.value(v).name, value_form_name(graph.value(v).form));
          }
        }
      }
      onnx::NodeProto* proto = out->add_node();
      proto->set_name(node.name);
      proto->set_op_type(node.op_type);
      if (is_training_op(node.op_type)) {
        proto->set_domain(std::string(kTrainingDomain));
        if (!training_domain) {
          training_domain = true;
          auto* training = model.add_opset_import();
          training->set_domain(std::string(kTrainingDomain));
          training->set_version(kTrainingDomainVersion);
        }
      }
      for (ir::ValueId in : node.inputs) {
        if (in == ir::kAbsent) {
          proto->add_input("");
          continue;
        }
        if (in < 0 || in >= value_count)
          return invalid_argument("input value id {} is out of range", in);
        const ir::Value& value = graph.value(in);
        proto->add_input(value.name);
        if (produced.count(in) || !declared.insert(in).second) continue;
        if (value.constant) {
          KILN_RETURN_IF_ERROR(set_initializer(value, *out->add_initializer()));
        } else {
          KILN_RETURN_IF_ERROR(set_value_info(value, *out->add_input()));
        }
      }
      for (ir::ValueId o : node.outputs) {
        if (o < 0 || o >= value_count)
          return invalid_argument("output value id {} is out of range", o);
        proto->add_output(graph.value(o).name);
        produced.insert(o);
      }
      for (const auto& [name, value] : node.attributes.all()) {
        KILN_RETURN_IF_ERROR(set_attribute(name, value, *proto->add_attribute()));
      }
      return ok_status();
    }();
    if (!status.ok()) return std::move(status).with_note("in " + node.describe());
  }
  for (ir::ValueId o : outputs) {
    if (!produced.count(o)) {
      return invalid_argument("output value id {} is not produced by the exported nodes", o);
    }
    KILN_RETURN_IF_ERROR(set_value_info(graph.value(o), *out->add_output()));
  }
  return ok_status();
}

}  // namespace

Status export_subgraph(const ir::Graph& graph, std::span<const ir::NodeId> nodes,
                       std::span<const ir::ValueId> outputs, const std::string& graph_name,
                       const std::string& path) {
  onnx::ModelProto model;
  Status status = export_nodes(graph, nodes, outputs, graph_name, model);
  if (status.ok()) status = check_and_write(model, path);
  if (!status.ok())
    return std::move(status).with_note(fmt::format("exporting a subgraph to '{}'", path));
  return ok_status();
}

Status write_model_with_outputs(const std::string& model_path,
                                std::span<const std::pair<std::string, DType>> extra_outputs,
                                const std::string& out_path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(model_path, uint64_t{2} << 30));
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    return data_loss("'{}' is not a valid ONNX model: protobuf parsing failed", model_path);
  }
  bytes.clear();
  onnx::GraphProto* graph = model.mutable_graph();
  for (const auto& init : graph->initializer()) {
    if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      return unimplemented(
          "'{}' keeps initializer '{}' in an external data file; a copy with more "
          "outputs cannot refer to it",
          model_path, init.name());
    }
  }
  std::set<std::string> produced, existing;
  for (const auto& node : graph->node())
    produced.insert(node.output().begin(), node.output().end());
  for (const auto& output : graph->output()) existing.insert(output.name());
  for (const auto& [name, dtype] : extra_outputs) {
    if (existing.count(name)) continue;
    if (!produced.count(name)) {
      return invalid_argument("'{}': no node of the model produces '{}'", model_path, name);
    }
    onnx::ValueInfoProto* info = graph->add_output();
    info->set_name(name);
    KILN_ASSIGN_OR_RETURN(int32_t elem, onnx_type(dtype, fmt::format("value '{}'", name)));
    info->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    existing.insert(name);
  }
  if (!model.SerializeToString(&bytes))
    return internal_error("cannot serialize a copy of '{}'", model_path);
  return write_file_atomically(out_path, bytes);
}

}  // namespace kiln::onnx_import
