#include "kiln/ir/text_format.h"

#include <cctype>
#include <cstring>
#include <map>
#include <set>

#include "kiln/base/file_util.h"

namespace kiln::ir {
namespace {

constexpr uint64_t kBlobAlignment = 64;
// A .kir file is read whole; this only stops absurd inputs before allocation.
constexpr uint64_t kMaxKirBytes = uint64_t{1} << 40;

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

bool is_bare_word(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!is_word_char(c)) return false;
  }
  return true;
}

bool has_control_char(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string word_or_quote(std::string_view s) {
  return is_bare_word(s) ? std::string(s) : quote(s);
}

std::string type_text(DType dtype, const Shape& shape) {
  return std::string(dtype_name(dtype)) + shape_to_string(shape);
}

bool valid_id(const Graph& graph, ValueId id) {
  return id >= 0 && static_cast<size_t>(id) < graph.values().size();
}

// Shortest text that reads back to the same double.
std::string float_text(double v) { return fmt::format("{}", v); }

std::string attribute_text(const std::string& name, const Attribute& attr) {
  struct Visitor {
    std::string operator()(int64_t v) const { return fmt::format("int={}", v); }
    std::string operator()(double v) const { return "float=" + float_text(v); }
    std::string operator()(const std::string& v) const { return "string=" + quote(v); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return fmt::format("ints=[{}]", fmt::join(v, ","));
    }
    std::string operator()(const std::vector<double>& v) const {
      std::vector<std::string> parts;
      for (double d : v) parts.push_back(float_text(d));
      return fmt::format("floats=[{}]", fmt::join(parts, ","));
    }
    std::string operator()(const std::vector<std::string>& v) const {
      std::vector<std::string> parts;
      for (const auto& s : v) parts.push_back(quote(s));
      return fmt::format("strings=[{}]", fmt::join(parts, ","));
    }
  };
  return word_or_quote(name) + ":" + std::visit(Visitor{}, attr);
}

std::string value_ref(const Graph& graph, ValueId id) {
  if (id == kAbsent) return "-";
  if (!valid_id(graph, id)) return fmt::format("<invalid id {}>", id);
  const Value& v = graph.value(id);
  return quote(v.name) + ": " + type_text(v.dtype, v.shape);
}

struct Layout {
  std::vector<std::pair<ValueId, uint64_t>> constants;  // id, offset into the blob
  uint64_t blob_size = 0;
};

Layout layout_constants(const Graph& graph) {
  Layout layout;
  for (size_t v = 0; v < graph.values().size(); ++v) {
    const Value& value = graph.values()[v];
    if (!value.constant) continue;
    uint64_t offset = (layout.blob_size + kBlobAlignment - 1) / kBlobAlignment * kBlobAlignment;
    layout.constants.push_back({static_cast<ValueId>(v), offset});
    layout.blob_size = offset + value.constant->byte_size();
  }
  return layout;
}

// Symbols of every value the text mentions, so that a reprint lists the same ones.
std::set<std::string> printed_symbols(const Graph& graph) {
  std::set<std::string> symbols;
  auto add = [&](ValueId id) {
    if (!valid_id(graph, id)) return;
    for (const DimExpr& dim : graph.value(id).shape) {
      for (std::string& s : dim.symbols()) symbols.insert(std::move(s));
    }
  };
  for (ValueId id : graph.inputs()) add(id);
  for (size_t v = 0; v < graph.values().size(); ++v) {
    if (graph.values()[v].constant) add(static_cast<ValueId>(v));
  }
  for (const Node& node : graph.nodes()) {
    for (ValueId id : node.inputs) add(id);
    for (ValueId id : node.outputs) add(id);
  }
  for (ValueId id : graph.outputs()) add(id);
  return symbols;
}

std::string print_header(const Graph& graph, const Layout& layout) {
  std::string out = fmt::format("kiln-ir {}\ngraph {}\nopset {}\nsymbols", kKirVersion,
                                quote(graph.name), graph.opset);
  for (const std::string& s : printed_symbols(graph)) {
    out += ' ';
    out += DimExpr::symbol(s).to_string();
  }
  out += "\n";
  for (ValueId id : graph.inputs()) out += "input " + value_ref(graph, id) + "\n";
  for (const auto& [id, offset] : layout.constants) {
    out += fmt::format("const {} offset={} size={}\n", value_ref(graph, id), offset,
                       graph.value(id).constant->byte_size());
  }
  for (const Node& node : graph.nodes()) {
    std::vector<std::string> ins, outs, attrs, origins;
    for (ValueId id : node.inputs) ins.push_back(value_ref(graph, id));
    for (ValueId id : node.outputs) outs.push_back(value_ref(graph, id));
    for (const auto& [name, attr] : node.attributes.all())
      attrs.push_back(attribute_text(name, attr));
    for (const auto& origin : node.origins) origins.push_back(quote(origin));
    out += fmt::format("node {} {} in({}) out({})", quote(node.name), word_or_quote(node.op_type),
                       fmt::join(ins, ", "), fmt::join(outs, ", "));
    if (!attrs.empty()) out += fmt::format(" attrs({})", fmt::join(attrs, ", "));
    out += fmt::format(" origins({})\n", fmt::join(origins, ", "));
  }
  for (ValueId id : graph.outputs()) out += "output " + value_ref(graph, id) + "\n";
  return out;
}

Status check_representable(const Graph& graph) {
  KILN_RETURN_IF_ERROR(verify_graph(graph));
  std::set<std::string> names;
  for (ValueId id : graph.inputs()) {
    if (graph.is_constant(id)) {
      return invalid_argument("value '{}' is both a graph input and a constant",
                              graph.value(id).name);
    }
  }
  auto check_value = [&](ValueId id) -> Status {
    const Value& value = graph.value(id);
    if (value.constant && value.constant->empty_storage() && value.constant->byte_size() > 0) {
      return invalid_argument("constant '{}' has no data", value.name);
    }
    if (value.form != ValueForm::kTensor) {
      return unimplemented("value '{}' is a {}, which .kir cannot hold", value.name,
                           value_form_name(value.form));
    }
    if (!names.insert(graph.value(id).name).second) {
      return invalid_argument("two values are named '{}'; .kir refers to values by name",
                              graph.value(id).name);
    }
    for (const DimExpr& dim : graph.value(id).shape) {
      for (const std::string& s : dim.symbols()) {
        if (has_control_char(s)) {
          return invalid_argument("value '{}' has a symbol with control characters",
                                  graph.value(id).name);
        }
      }
    }
    return ok_status();
  };
  for (ValueId id : graph.inputs()) KILN_RETURN_IF_ERROR(check_value(id));
  for (size_t v = 0; v < graph.values().size(); ++v) {
    if (graph.values()[v].constant) KILN_RETURN_IF_ERROR(check_value(static_cast<ValueId>(v)));
  }
  std::set<std::string> node_names;
  for (const Node& node : graph.nodes()) {
    if (!node_names.insert(node.name).second) {
      return invalid_argument("two nodes are named '{}'", node.name);
    }
    if (!node.bodies.empty()) {
      return unimplemented("{} has bodies (control flow), which .kir cannot hold", node.describe());
    }
    for (ValueId id : node.outputs) {
      if (id == kAbsent)
        return unimplemented("{} has an absent output, which .kir cannot hold", node.describe());
      KILN_RETURN_IF_ERROR(check_value(id));
    }
  }
  return ok_status();
}

}  // namespace

std::string print_graph_text(const Graph& graph, bool include_constant_data) {
  Layout layout = layout_constants(graph);
  std::string out = print_header(graph, layout);
  if (!include_constant_data)
    return out + fmt::format("blob {} (data omitted)\n", layout.blob_size);
  out += fmt::format("blob {}\n", layout.blob_size);
  size_t blob_start = out.size();
  out.resize(blob_start + layout.blob_size, '\0');
  for (const auto& [id, offset] : layout.constants) {
    const Tensor& data = *graph.value(id).constant;
    if (data.byte_size() > 0 && !data.empty_storage()) {
      std::memcpy(out.data() + blob_start + offset, data.data(), data.byte_size());
    }
  }
  return out;
}

Status write_kir(const Graph& graph, const std::string& path) {
  Status representable = check_representable(graph);
  if (!representable.ok()) {
    return std::move(representable).with_note(fmt::format("writing IR file '{}'", path));
  }
  return write_file_atomically(path, print_graph_text(graph, /*include_constant_data=*/true));
}

StatusOr<Graph> read_kir(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path, kMaxKirBytes));
  auto graph = parse_kir(bytes);
  if (!graph.ok()) return std::move(graph).status().with_note(fmt::format("in IR file '{}'", path));
  return graph;
}

}  // namespace kiln::ir
