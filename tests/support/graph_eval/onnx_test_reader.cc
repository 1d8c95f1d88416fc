#include "tests/support/graph_eval/onnx_test_reader.h"

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace kiln::testing {
namespace {

// One protobuf message's bytes; fields are visited in order by for_each_field.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  StatusOr<uint64_t> varint() {
    uint64_t out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return data_loss("truncated varint");
      auto byte = static_cast<uint8_t>(data_[pos_++]);
      out |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return out;
    }
    return data_loss("varint too long");
  }
  StatusOr<std::string_view> bytes(size_t n) {
    if (n > data_.size() - pos_) return data_loss("truncated field");
    std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  bool done() const { return pos_ >= data_.size(); }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t value = 0;      // varint, fixed32, fixed64
  std::string_view bytes;  // length-delimited
};

Status for_each_field(std::string_view data, const std::function<Status(const Field&)>& fn) {
  Reader r(data);
  while (!r.done()) {
    KILN_ASSIGN_OR_RETURN(uint64_t key, r.varint());
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    switch (f.wire) {
      case 0: {
        KILN_ASSIGN_OR_RETURN(f.value, r.varint());
        break;
      }
      case 1: {
        KILN_ASSIGN_OR_RETURN(std::string_view b, r.bytes(8));
        std::memcpy(&f.value, b.data(), 8);
        break;
      }
      case 5: {
        KILN_ASSIGN_OR_RETURN(std::string_view b, r.bytes(4));
        uint32_t v;
        std::memcpy(&v, b.data(), 4);
        f.value = v;
        break;
      }
      case 2: {
        KILN_ASSIGN_OR_RETURN(uint64_t n, r.varint());
        KILN_ASSIGN_OR_RETURN(f.bytes, r.bytes(n));
        break;
      }
      default: return data_loss("unsupported wire type {}", f.wire);
    }
    KILN_RETURN_IF_ERROR(fn(f));
  }
  return ok_status();
}

// Repeated scalar fields, packed (wire 2) or not.
Status append_varints(const Field& f, std::vector<int64_t>& out) {
  if (f.wire == 0) {
    out.push_back(static_cast<int64_t>(f.value));
    return ok_status();
  }
  Reader r(f.bytes);
  while (!r.done()) {
    KILN_ASSIGN_OR_RETURN(uint64_t v, r.varint());
    out.push_back(static_cast<int64_t>(v));
  }
  return ok_status();
}
template <typename T>
void append_fixed(const Field& f, std::vector<T>& out) {
  if (f.wire != 2) {
    T v;
    std::memcpy(&v, &f.value, sizeof(T));
    out.push_back(v);
    return;
  }
  for (size_t i = 0; i + sizeof(T) <= f.bytes.size(); i += sizeof(T)) {
    T v;
    std::memcpy(&v, f.bytes.data() + i, sizeof(T));
    out.push_back(v);
  }
}

StatusOr<DType> onnx_dtype(int64_t code) {
  switch (code) {
    case 1: return DType::kF32;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    case 11: return DType::kF64;
    default: return unimplemented("ONNX data type {}", code);
  }
}

StatusOr<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<Tensor> decode_tensor(std::string_view data) {
  std::vector<int64_t> dims, ints;
  std::vector<float> floats;
  std::vector<double> doubles;
  std::string_view raw;
  bool has_raw = false;
  int64_t type = 0;
  KILN_RETURN_IF_ERROR(for_each_field(data, [&](const Field& f) -> Status {
    switch (f.number) {
      case 1: return append_varints(f, dims);
      case 2: type = static_cast<int64_t>(f.value); break;
      case 4: append_fixed(f, floats); break;
      case 5:
      case 7: return append_varints(f, ints);
      case 9:
        raw = f.bytes;
        has_raw = true;
        break;
      case 10: append_fixed(f, doubles); break;
      default: break;
    }
    return ok_status();
  }));
  KILN_ASSIGN_OR_RETURN(DType dtype, onnx_dtype(type));
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(dtype, dims));
  const size_t n = static_cast<size_t>(t.element_count());
  if (has_raw) {
    if (raw.size() != t.byte_size()) {
      return data_loss("raw_data has {} bytes, expected {}", raw.size(), t.byte_size());
    }
    if (!raw.empty()) std::memcpy(t.mutable_data(), raw.data(), raw.size());
    return t;
  }
  auto check = [&](size_t got) -> Status {
    if (got != n) return data_loss("tensor has {} values, expected {}", got, n);
    return ok_status();
  };
  switch (dtype) {
    case DType::kF32:
      KILN_RETURN_IF_ERROR(check(floats.size()));
      for (size_t i = 0; i < n; ++i) t.mutable_values<float>()[i] = floats[i];
      break;
    case DType::kF64:
      KILN_RETURN_IF_ERROR(check(doubles.size()));
      for (size_t i = 0; i < n; ++i) t.mutable_values<double>()[i] = doubles[i];
      break;
    case DType::kI64:
      KILN_RETURN_IF_ERROR(check(ints.size()));
      for (size_t i = 0; i < n; ++i) t.mutable_values<int64_t>()[i] = ints[i];
      break;
    case DType::kI32:
      KILN_RETURN_IF_ERROR(check(ints.size()));
      for (size_t i = 0; i < n; ++i) t.mutable_values<int32_t>()[i] = static_cast<int32_t>(ints[i]);
      break;
    case DType::kBool:
    case DType::kU8:
      KILN_RETURN_IF_ERROR(check(ints.size()));
      for (size_t i = 0; i < n; ++i) t.mutable_values<uint8_t>()[i] = static_cast<uint8_t>(ints[i]);
      break;
    default: return unimplemented("tensor data of dtype {}", dtype_name(dtype));
  }
  return t;
}

struct ValueInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

StatusOr<ValueInfo> decode_value_info(std::string_view data, int& fresh_symbols) {
  ValueInfo info;
  std::string_view type;
  KILN_RETURN_IF_ERROR(for_each_field(data, [&](const Field& f) -> Status {
    if (f.number == 1) info.name = std::string(f.bytes);
    if (f.number == 2) type = f.bytes;
    return ok_status();
  }));
  std::string_view tensor_type;
  KILN_RETURN_IF_ERROR(for_each_field(type, [&](const Field& f) -> Status {
    if (f.number == 1) tensor_type = f.bytes;
    return ok_status();
  }));
  int64_t elem = 1;
  std::string_view shape;
  KILN_RETURN_IF_ERROR(for_each_field(tensor_type, [&](const Field& f) -> Status {
    if (f.number == 1) elem = static_cast<int64_t>(f.value);
    if (f.number == 2) shape = f.bytes;
    return ok_status();
  }));
  KILN_ASSIGN_OR_RETURN(info.dtype, onnx_dtype(elem));
  KILN_RETURN_IF_ERROR(for_each_field(shape, [&](const Field& f) -> Status {
    if (f.number != 1) return ok_status();
    std::optional<DimExpr> dim;
    KILN_RETURN_IF_ERROR(for_each_field(f.bytes, [&](const Field& d) -> Status {
      if (d.number == 1) dim = DimExpr(static_cast<int64_t>(d.value));
      if (d.number == 2) dim = DimExpr::symbol(std::string(d.bytes));
      return ok_status();
    }));
    info.shape.push_back(dim ? *dim : DimExpr::symbol(fmt::format("unk__{}", fresh_symbols++)));
    return ok_status();
  }));
  return info;
}

StatusOr<std::pair<std::string, Attribute>> decode_attribute(std::string_view data) {
  std::string name;
  int64_t type = 0;
  double f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  KILN_RETURN_IF_ERROR(for_each_field(data, [&](const Field& field) -> Status {
    switch (field.number) {
      case 1: name = std::string(field.bytes); break;
      case 2: {
        float v;
        auto bits = static_cast<uint32_t>(field.value);
        std::memcpy(&v, &bits, 4);
        f = v;
        break;
      }
      case 3: i = static_cast<int64_t>(field.value); break;
      case 4: s = std::string(field.bytes); break;
      case 7: append_fixed(field, floats); break;
      case 8: return append_varints(field, ints);
      case 9: strings.emplace_back(field.bytes); break;
      case 20: type = static_cast<int64_t>(field.value); break;
      default: break;
    }
    return ok_status();
  }));
  switch (type) {
    case 1: return std::pair<std::string, Attribute>{name, f};
    case 2: return std::pair<std::string, Attribute>{name, i};
    case 3: return std::pair<std::string, Attribute>{name, s};
    case 6:
      return std::pair<std::string, Attribute>{name,
                                               std::vector<double>(floats.begin(), floats.end())};
    case 7: return std::pair<std::string, Attribute>{name, ints};
    case 8: return std::pair<std::string, Attribute>{name, strings};
    default: return unimplemented("attribute '{}' of type {}", name, type);
  }
}

}  // namespace

StatusOr<Tensor> read_tensor_proto(const std::string& bytes) { return decode_tensor(bytes); }

StatusOr<Tensor> read_tensor_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  auto t = decode_tensor(bytes);
  if (!t.ok()) return std::move(t).status().with_note("in " + path);
  return t;
}

StatusOr<OnnxTestModel> read_onnx_test_model(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  std::string_view graph_bytes;
  int64_t opset = 0;
  KILN_RETURN_IF_ERROR(for_each_field(bytes, [&](const Field& f) -> Status {
    if (f.number == 7) graph_bytes = f.bytes;
    if (f.number == 8) {
      std::string domain;
      int64_t version = 0;
      KILN_RETURN_IF_ERROR(for_each_field(f.bytes, [&](const Field& o) -> Status {
        if (o.number == 1) domain = std::string(o.bytes);
        if (o.number == 2) version = static_cast<int64_t>(o.value);
        return ok_status();
      }));
      if (domain.empty() || domain == "ai.onnx") opset = version;
    }
    return ok_status();
  }));
  std::vector<std::string_view> nodes, inputs, outputs;
  std::map<std::string, Tensor> initializers;
  KILN_RETURN_IF_ERROR(for_each_field(graph_bytes, [&](const Field& f) -> Status {
    if (f.number == 1) nodes.push_back(f.bytes);
    if (f.number == 11) inputs.push_back(f.bytes);
    if (f.number == 12) outputs.push_back(f.bytes);
    if (f.number == 5) {
      KILN_ASSIGN_OR_RETURN(Tensor t, decode_tensor(f.bytes));
      std::string name;
      KILN_RETURN_IF_ERROR(for_each_field(f.bytes, [&](const Field& tf) -> Status {
        if (tf.number == 8) name = std::string(tf.bytes);
        return ok_status();
      }));
      initializers[name] = t;
    }
    return ok_status();
  }));

  OnnxTestModel model;
  ir::Graph& g = model.graph;
  g.name = path;
  g.opset = opset;
  int fresh = 0;
  std::map<std::string, ir::ValueId> values;
  for (const auto& [name, t] : initializers) values[name] = g.add_constant(name, t);
  for (std::string_view in : inputs) {
    KILN_ASSIGN_OR_RETURN(ValueInfo info, decode_value_info(in, fresh));
    if (values.count(info.name)) continue;
    values[info.name] = g.add_input(info.name, info.dtype, info.shape);
    model.runtime_inputs.push_back(info.name);
  }
  int node_index = 0;
  for (std::string_view data : nodes) {
    ir::Node node;
    std::vector<std::string> in_names, out_names;
    KILN_RETURN_IF_ERROR(for_each_field(data, [&](const Field& f) -> Status {
      switch (f.number) {
        case 1: in_names.emplace_back(f.bytes); break;
        case 2: out_names.emplace_back(f.bytes); break;
        case 3: node.name = std::string(f.bytes); break;
        case 4: node.op_type = std::string(f.bytes); break;
        case 5: {
          KILN_ASSIGN_OR_RETURN(auto attr, decode_attribute(f.bytes));
          node.attributes.set(attr.first, attr.second);
          break;
        }
        default: break;
      }
      return ok_status();
    }));
    if (node.name.empty()) node.name = fmt::format("{}_{}", node.op_type, node_index);
    ++node_index;
    for (const std::string& n : in_names) {
      if (n.empty()) {
        node.inputs.push_back(ir::kAbsent);
      } else if (values.count(n)) {
        node.inputs.push_back(values[n]);
      } else {
        return invalid_argument("node '{}' reads unknown value '{}'", node.name, n);
      }
    }
    while (!out_names.empty() && out_names.back().empty()) out_names.pop_back();
    for (const std::string& n : out_names) {
      ir::ValueId id = g.add_value({n, DType::kF32, {}, {}, {}});
      if (!n.empty()) values[n] = id;
      node.outputs.push_back(id);
    }
    g.add_node(std::move(node));
  }
  for (std::string_view out : outputs) {
    KILN_ASSIGN_OR_RETURN(ValueInfo info, decode_value_info(out, fresh));
    if (!values.count(info.name)) return invalid_argument("unknown graph output '{}'", info.name);
    g.add_output(values[info.name]);
  }
  return model;
}

}  // namespace kiln::testing
