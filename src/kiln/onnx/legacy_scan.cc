#include "kiln/onnx/legacy_scan.h"

#include <set>
#include <string>
#include <vector>

namespace kiln::onnx_import {
namespace {

bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

void collect_names(const onnx::GraphProto& graph, std::set<std::string>& names) {
  for (const auto& v : graph.input()) names.insert(v.name());
  for (const auto& v : graph.output()) names.insert(v.name());
  for (const auto& t : graph.initializer()) names.insert(t.name());
  for (const auto& node : graph.node()) {
    names.insert(node.name());
    names.insert(node.output().begin(), node.output().end());
    for (const auto& attribute : node.attribute()) {
      if (attribute.has_g()) collect_names(attribute.g(), names);
    }
  }
}

class ScanRewriter {
 public:
  explicit ScanRewriter(std::set<std::string>& names) : names_(names) {}

  Status run(onnx::GraphProto& graph) {
    std::vector<onnx::NodeProto> nodes;
    for (onnx::NodeProto& node : *graph.mutable_node()) {
      for (onnx::AttributeProto& attribute : *node.mutable_attribute()) {
        if (attribute.has_g()) KILN_RETURN_IF_ERROR(run(*attribute.mutable_g()));
      }
      if (!is_default_domain(node.domain()) || node.op_type() != "Scan") {
        nodes.push_back(std::move(node));
        continue;
      }
      KILN_RETURN_IF_ERROR(rewrite(node, nodes));
    }
    graph.clear_node();
    for (onnx::NodeProto& node : nodes) *graph.add_node() = std::move(node);
    return ok_status();
  }

 private:
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int n = 1; names_.count(name); ++n) name = base + "_" + std::to_string(n);
    names_.insert(name);
    return name;
  }

  static onnx::NodeProto* add(std::vector<onnx::NodeProto>& nodes, const std::string& op,
                              std::vector<std::string> inputs, std::vector<std::string> outputs,
                              const std::string& name) {
    onnx::NodeProto& node = nodes.emplace_back();
    node.set_op_type(op);
    node.set_name(name);
    for (const std::string& i : inputs) node.add_input(i);
    for (const std::string& o : outputs) node.add_output(o);
    return &node;
  }

  static void int_attribute(onnx::NodeProto* node, const char* name, int64_t value) {
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }

  // A Constant node with one int64 scalar.
  void constant(std::vector<onnx::NodeProto>& nodes, const std::string& name, int64_t value) {
    onnx::NodeProto* node = add(nodes, "Constant", {}, {name}, fresh(name));
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
    a->mutable_t()->add_int64_data(value);
  }

  // Gather(data, index, axis 0) into `out`.
  void gather(std::vector<onnx::NodeProto>& nodes, const std::string& data,
              const std::string& index, const std::string& out) {
    int_attribute(add(nodes, "Gather", {data, index}, {out}, fresh(out)), "axis", 0);
  }

  static void scalar_input(onnx::GraphProto& graph, const std::string& name, int32_t type) {
    onnx::ValueInfoProto* input = graph.add_input();
    input->set_name(name);
    input->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    input->mutable_type()->mutable_tensor_type()->mutable_shape();
  }

  static void set_graph(onnx::NodeProto* node, onnx::GraphProto graph) {
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = std::move(graph);
  }

  Status rewrite(const onnx::NodeProto& scan, std::vector<onnx::NodeProto>& nodes) {
    const std::string label = scan.name().empty() ? scan.output(0) : scan.name();
    const std::string where = fmt::format("node '{}' (Scan)", label);
    const onnx::GraphProto* body = nullptr;
    int64_t m = 0;
    std::vector<int64_t> directions;
    for (const onnx::AttributeProto& a : scan.attribute()) {
      if (a.name() == "body" && a.has_g()) body = &a.g();
      if (a.name() == "num_scan_inputs") m = a.i();
      if (a.name() == "directions") directions.assign(a.ints().begin(), a.ints().end());
    }
    if (body == nullptr)
      return invalid_argument("{}: attribute 'body' (a graph) is missing", where);
    if (scan.input_size() > 0 && !scan.input(0).empty()) {
      return unimplemented("{}: Scan-8's sequence_lens is not supported", where);
    }
    const int64_t total = scan.input_size() - 1;
    if (m < 1 || m > total) {
      return invalid_argument("{}: num_scan_inputs is {} for {} inputs", where, m, total);
    }
    const int64_t states = total - m;
    const int64_t scans = scan.output_size() - states;
    if (scans < 0 || body->input_size() != states + m || body->output_size() != states + scans) {
      return invalid_argument(
          "{}: the body has {} inputs and {} outputs for {} states, {} scan inputs and {} "
          "outputs",
          where, body->input_size(), body->output_size(), states, m, scan.output_size());
    }
    if (!directions.empty() && static_cast<int64_t>(directions.size()) != m) {
      return invalid_argument("{}: 'directions' has {} values for {} scan inputs", where,
                              directions.size(), m);
    }
    auto state = [&](int64_t j) { return scan.input(1 + j); };
    auto scanned = [&](int64_t j) { return scan.input(1 + states + j); };

    // B = Gather(Shape(x_0), 0), in the enclosing graph.
    const std::string zero = fresh(label + "/kiln_zero"), shape = fresh(label + "/kiln_shape"),
                      batch = fresh(label + "/kiln_batch");
    constant(nodes, zero, 0);
    add(nodes, "Shape", {scanned(0)}, {shape}, fresh(shape));
    gather(nodes, shape, zero, batch);

    // The inner body: the Scan's body reading its slices from the batch entry's scan inputs.
    onnx::GraphProto inner = *body;
    inner.clear_input();
    const std::string t = fresh(label + "/kiln_t"), inner_cond = fresh(label + "/kiln_inner_cond");
    // Loop before opset 11 needs a loop-carried value: each loop carries one unused scalar.
    const std::string inner_carry = fresh(label + "/kiln_inner_carry");
    scalar_input(inner, t, onnx::TensorProto::INT64);
    scalar_input(inner, inner_cond, onnx::TensorProto::BOOL);
    scalar_input(inner, inner_carry, onnx::TensorProto::INT64);
    for (int64_t j = 0; j < states; ++j) *inner.add_input() = body->input(static_cast<int>(j));
    std::vector<std::string> entry(m);  // x_j[b], names in the outer body
    for (int64_t j = 0; j < m; ++j) entry[j] = fresh(scanned(j) + "/kiln_entry");
    const std::string length = fresh(label + "/kiln_length");
    std::vector<onnx::NodeProto> slicing;
    std::string last;  // T - 1, made once if a direction is 1
    for (int64_t j = 0; j < m; ++j) {
      std::string index = t;
      if (!directions.empty() && directions[j] == 1) {
        if (last.empty()) {
          const std::string one = fresh(label + "/kiln_one");
          last = fresh(label + "/kiln_last");
          constant(slicing, one, 1);
          add(slicing, "Sub", {length, one}, {last}, fresh(last));
        }
        index = fresh(label + "/kiln_reversed");
        add(slicing, "Sub", {last, t}, {index}, fresh(index));
      }
      gather(slicing, entry[j], index, body->input(static_cast<int>(states + j)).name());
    }
    const std::string inner_cond_out = fresh(inner_cond + "_out");
    add(slicing, "Identity", {inner_cond}, {inner_cond_out}, fresh(inner_cond_out));
    for (onnx::NodeProto& node : *inner.mutable_node()) slicing.push_back(std::move(node));
    inner.clear_node();
    for (onnx::NodeProto& node : slicing) *inner.add_node() = std::move(node);
    inner.clear_output();
    inner.add_output()->set_name(inner_cond_out);
    inner.add_output()->set_name(inner_carry);
    for (const auto& output : body->output()) *inner.add_output() = output;

    // The outer body: one batch entry.
    onnx::GraphProto outer;
    outer.set_name(label + "/kiln_batch_entry");
    const std::string b = fresh(label + "/kiln_b"), outer_cond = fresh(label + "/kiln_outer_cond");
    const std::string outer_carry = fresh(label + "/kiln_outer_carry");
    scalar_input(outer, b, onnx::TensorProto::INT64);
    scalar_input(outer, outer_cond, onnx::TensorProto::BOOL);
    scalar_input(outer, outer_carry, onnx::TensorProto::INT64);
    std::vector<onnx::NodeProto> per_entry;
    std::vector<std::string> loop_inputs = {length, "", outer_carry};
    for (int64_t j = 0; j < states; ++j) {
      const std::string s = fresh(state(j) + "/kiln_entry");
      gather(per_entry, state(j), b, s);
      loop_inputs.push_back(s);
    }
    for (int64_t j = 0; j < m; ++j) gather(per_entry, scanned(j), b, entry[j]);
    const std::string entry_shape = fresh(label + "/kiln_entry_shape"),
                      entry_zero = fresh(label + "/kiln_entry_zero");
    constant(per_entry, entry_zero, 0);
    add(per_entry, "Shape", {entry[0]}, {entry_shape}, fresh(entry_shape));
    gather(per_entry, entry_shape, entry_zero, length);
    std::vector<std::string> inner_outputs = {fresh(label + "/kiln_inner_carry_final")};
    for (int64_t k = 0; k < states + scans; ++k) {
      inner_outputs.push_back(fresh(scan.output(static_cast<int>(k)) + "/kiln_entry"));
    }
    onnx::NodeProto* inner_loop =
        add(per_entry, "Loop", loop_inputs, inner_outputs, fresh(label + "/kiln_time_loop"));
    set_graph(inner_loop, std::move(inner));
    const std::string outer_cond_out = fresh(outer_cond + "_out");
    add(per_entry, "Identity", {outer_cond}, {outer_cond_out}, fresh(outer_cond_out));
    for (onnx::NodeProto& node : per_entry) *outer.add_node() = std::move(node);
    outer.add_output()->set_name(outer_cond_out);
    outer.add_output()->set_name(outer_carry);
    for (size_t k = 1; k < inner_outputs.size(); ++k)
      outer.add_output()->set_name(inner_outputs[k]);

    const std::string carry = fresh(label + "/kiln_carry"),
                      carry_final = fresh(label + "/kiln_carry_final");
    constant(nodes, carry, 0);
    std::vector<std::string> outputs = {carry_final};
    outputs.insert(outputs.end(), scan.output().begin(), scan.output().end());
    onnx::NodeProto* outer_loop = add(nodes, "Loop", {batch, "", carry}, outputs, label);
    set_graph(outer_loop, std::move(outer));
    return ok_status();
  }

  std::set<std::string>& names_;
};

}  // namespace

Status spell_out_legacy_scan(onnx::GraphProto& graph, int64_t opset) {
  if (opset != 8) return ok_status();
  std::set<std::string> names;
  collect_names(graph, names);
  return ScanRewriter(names).run(graph);
}

}  // namespace kiln::onnx_import
