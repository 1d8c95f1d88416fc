// Helpers that build small ONNX models in memory with the protobuf API.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "onnx/onnx_pb.h"

namespace kiln::onnx_import::testing {

// A dim as written in a model: unset (unknown), dim_value, or dim_param.
using DimSpec = std::variant<std::monostate, int64_t, std::string>;

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17, std::string graph_name = "g") {
    model.set_ir_version(8);
    auto* op = model.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model.mutable_graph()->set_name(std::move(graph_name));
  }

  onnx::GraphProto& graph() { return *model.mutable_graph(); }

  onnx::ValueInfoProto* input(const std::string& name, int32_t elem_type,
                              const std::vector<DimSpec>& dims) {
    return fill(graph().add_input(), name, elem_type, &dims);
  }
  // Output with an optional declared type (elem_type 0 leaves it undeclared).
  onnx::ValueInfoProto* output(const std::string& name, int32_t elem_type = 0,
                               const std::vector<DimSpec>* dims = nullptr) {
    return fill(graph().add_output(), name, elem_type, dims);
  }

  onnx::TensorProto* initializer(const std::string& name, const std::vector<int64_t>& dims,
                                 const std::vector<float>& values, bool raw = true) {
    onnx::TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    if (raw) {
      t->set_raw_data(
          std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    } else {
      for (float v : values) t->add_float_data(v);
    }
    return t;
  }
  onnx::TensorProto* initializer_i64(const std::string& name, const std::vector<int64_t>& dims,
                                     const std::vector<int64_t>& values) {
    onnx::TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
    return t;
  }

  onnx::NodeProto* node(const std::string& op_type, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    onnx::NodeProto* n = graph().add_node();
    n->set_op_type(op_type);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }

  std::string bytes() const { return model.SerializeAsString(); }

  onnx::ModelProto model;

 private:
  static onnx::ValueInfoProto* fill(onnx::ValueInfoProto* info, const std::string& name,
                                    int32_t elem_type, const std::vector<DimSpec>* dims) {
    info->set_name(name);
    if (elem_type == 0 && dims == nullptr) return info;
    auto* tensor = info->mutable_type()->mutable_tensor_type();
    if (elem_type != 0) tensor->set_elem_type(elem_type);
    if (dims == nullptr) return info;
    auto* shape = tensor->mutable_shape();
    for (const DimSpec& d : *dims) {
      auto* dim = shape->add_dim();
      if (auto* v = std::get_if<int64_t>(&d)) dim->set_dim_value(*v);
      if (auto* p = std::get_if<std::string>(&d)) dim->set_dim_param(*p);
    }
    return info;
  }
};

inline onnx::AttributeProto* add_attr(onnx::NodeProto* node, const std::string& name) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  return a;
}
inline void attr_int(onnx::NodeProto* node, const std::string& name, int64_t v) {
  auto* a = add_attr(node, name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void attr_float(onnx::NodeProto* node, const std::string& name, float v) {
  auto* a = add_attr(node, name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void attr_ints(onnx::NodeProto* node, const std::string& name,
                      const std::vector<int64_t>& v) {
  auto* a = add_attr(node, name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void attr_string(onnx::NodeProto* node, const std::string& name, const std::string& v) {
  auto* a = add_attr(node, name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

}  // namespace kiln::onnx_import::testing
