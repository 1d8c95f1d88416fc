#include "kiln/onnx/inline_if.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kiln/base/sequence_ops.h"

namespace kiln::onnx_import {
namespace {

bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

bool is_if(const onnx::NodeProto& node) {
  return is_default_domain(node.domain()) && node.op_type() == "If";
}

// Every value and node name of `graph` and its subgraphs, so generated names never collide.
void collect_names(const onnx::GraphProto& graph, std::set<std::string>& names) {
  for (const auto& v : graph.input()) names.insert(v.name());
  for (const auto& v : graph.output()) names.insert(v.name());
  for (const auto& t : graph.initializer()) names.insert(t.name());
  for (const auto& node : graph.node()) {
    names.insert(node.name());
    for (const auto& output : node.output()) names.insert(output);
    for (const auto& attribute : node.attribute()) {
      if (attribute.has_g()) collect_names(attribute.g(), names);
      for (const auto& g : attribute.graphs()) collect_names(g, names);
    }
  }
}

// Nodes in `graph` and its subgraphs; `loops` is set when one of them is a Loop, a Scan or a
// sequence or optional op, or when the graph outputs a sequence or an optional: Where cannot select
// between those, which live on the host.
int count_nodes(const onnx::GraphProto& graph, bool& loops) {
  int count = 0;
  for (const auto& output : graph.output()) {
    loops = loops || output.type().has_sequence_type() || output.type().has_optional_type();
  }
  for (const auto& node : graph.node()) {
    ++count;
    loops = loops || node.op_type() == "Loop" || node.op_type() == "Scan" ||
            sequence_ops::is_sequence_op(node.op_type());
    for (const auto& attribute : node.attribute()) {
      if (attribute.has_g()) count += count_nodes(attribute.g(), loops);
      for (const auto& g : attribute.graphs()) count += count_nodes(g, loops);
    }
  }
  return count;
}

// The size rule (inline_if.h).
bool is_small(const onnx::NodeProto& node) {
  int count = 0;
  bool loops = false;
  for (const auto& attribute : node.attribute()) {
    if (attribute.has_g()) count += count_nodes(attribute.g(), loops);
  }
  return count <= kMaxInlinedIfNodes && !loops;
}

class IfInliner {
 public:
  IfInliner(std::set<std::string>& names, int64_t opset) : names_(names), opset_(opset) {}

  // Rewrites `graph`'s node list (and initializers) with every If flattened. `depth`: how many
  // If branches enclose `graph`.
  Status run(onnx::GraphProto& graph, int depth = 0) {
    std::vector<onnx::NodeProto> nodes;
    for (int i = 0; i < graph.node_size(); ++i) {
      const onnx::NodeProto& node = graph.node(i);
      if (is_if(node) && is_small(node)) {
        if (opset_ < 9) {
          return unimplemented(
              "kiln runs a small If as dataflow selected by Where, which needs opset 9 or "
              "later; this model declares opset {}",
              opset_);
        }
        KILN_RETURN_IF_ERROR(flatten(node, i, depth, graph, nodes));
        continue;
      }
      nodes.push_back(node);
      // A body run as a nested program (Loop, Scan, a large If): its small Ifs are inlined in it.
      for (onnx::AttributeProto& attribute : *nodes.back().mutable_attribute()) {
        if (!attribute.has_g()) continue;
        if (depth >= kMaxIfNesting) {
          return invalid_argument("node '{}' ({}): bodies nested more than {} deep", node.name(),
                                  node.op_type(), kMaxIfNesting);
        }
        KILN_RETURN_IF_ERROR(run(*attribute.mutable_g(), depth + 1));
      }
    }
    graph.clear_node();
    for (auto& node : nodes) *graph.add_node() = std::move(node);
    return ok_status();
  }

 private:
  // `base`, or `base` with the first free "_<n>" suffix.
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int n = 1; names_.count(name); ++n) name = base + "_" + std::to_string(n);
    names_.insert(name);
    return name;
  }

  Status flatten(const onnx::NodeProto& node, int index, int depth, onnx::GraphProto& graph,
                 std::vector<onnx::NodeProto>& nodes) {
    const std::string label =
        node.name().empty()
            ? (node.output_size() > 0 ? node.output(0) : fmt::format("If_{}", index))
            : node.name();
    const std::string where = fmt::format("node '{}' (If)", label);
    if (depth >= kMaxIfNesting) {
      return invalid_argument("{}: If nested more than {} deep", where, kMaxIfNesting);
    }
    if (node.input_size() != 1 || node.input(0).empty()) {
      return invalid_argument("{}: takes exactly one input, the condition; got {}", where,
                              node.input_size());
    }
    const onnx::GraphProto* branches[2] = {nullptr, nullptr};
    for (const auto& attribute : node.attribute()) {
      if (attribute.name() == "then_branch" && attribute.has_g()) branches[0] = &attribute.g();
      if (attribute.name() == "else_branch" && attribute.has_g()) branches[1] = &attribute.g();
    }
    std::vector<std::string> outputs[2];
    for (int b = 0; b < 2; ++b) {
      const char* which = b == 0 ? "then" : "else";
      if (branches[b] == nullptr) {
        return invalid_argument("{}: attribute '{}_branch' (a graph) is missing", where, which);
      }
      KILN_ASSIGN_OR_RETURN(
          outputs[b], inline_branch(*branches[b], fmt::format("{}/{}/", label, which), where, which,
                                    node.output_size(), depth + 1, graph, nodes));
    }
    // The condition as a scalar: Reshape(cond, []).
    onnx::TensorProto* scalar_shape = graph.add_initializer();
    scalar_shape->set_name(fresh(label + "/scalar_shape"));
    scalar_shape->set_data_type(onnx::TensorProto::INT64);
    scalar_shape->add_dims(0);
    onnx::NodeProto reshape;
    reshape.set_name(fresh(label + "/condition"));
    reshape.set_op_type("Reshape");
    reshape.add_input(node.input(0));
    reshape.add_input(scalar_shape->name());
    const std::string condition = fresh(label + "/condition");
    reshape.add_output(condition);
    nodes.push_back(std::move(reshape));
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      onnx::NodeProto select;
      select.set_name(fresh(fmt::format("{}/select_{}", label, i)));
      select.set_op_type("Where");
      select.add_input(condition);
      select.add_input(outputs[0][i]);
      select.add_input(outputs[1][i]);
      select.add_output(node.output(i));
      nodes.push_back(std::move(select));
    }
    return ok_status();
  }

  // Appends the branch's nodes (Ifs inside flattened first) with branch-local names prefixed;
  // returns the names its outputs have in the enclosing graph.
  StatusOr<std::vector<std::string>> inline_branch(const onnx::GraphProto& branch_in,
                                                   const std::string& prefix,
                                                   const std::string& where, const char* which,
                                                   int output_count, int depth,
                                                   onnx::GraphProto& graph,
                                                   std::vector<onnx::NodeProto>& nodes) {
    if (branch_in.input_size() != 0) {
      return invalid_argument("{}: {}_branch declares {} inputs; If branches take none", where,
                              which, branch_in.input_size());
    }
    if (branch_in.output_size() != output_count) {
      return invalid_argument("{}: {}_branch has {} outputs; the node has {}", where, which,
                              branch_in.output_size(), output_count);
    }
    if (branch_in.sparse_initializer_size() != 0) {
      return invalid_argument("{}: {}_branch has sparse initializers, which kiln does not support",
                              where, which);
    }
    onnx::GraphProto branch = branch_in;
    KILN_RETURN_IF_ERROR(run(branch, depth));
    std::map<std::string, std::string> renamed;  // branch-local name -> enclosing-graph name
    auto local = [&](const std::string& name) {
      if (name.empty()) return name;
      auto it = renamed.find(name);
      return it == renamed.end() ? name : it->second;
    };
    for (const onnx::TensorProto& tensor : branch.initializer()) {
      onnx::TensorProto* copy = graph.add_initializer();
      *copy = tensor;
      copy->set_name(fresh(prefix + tensor.name()));
      renamed[tensor.name()] = copy->name();
    }
    for (const onnx::NodeProto& node : branch.node()) {
      onnx::NodeProto copy = node;
      if (!node.name().empty()) copy.set_name(fresh(prefix + node.name()));
      for (int i = 0; i < copy.input_size(); ++i) copy.set_input(i, local(node.input(i)));
      for (int i = 0; i < copy.output_size(); ++i) {
        if (node.output(i).empty()) continue;
        const std::string name = fresh(prefix + node.output(i));
        renamed[node.output(i)] = name;
        copy.set_output(i, name);
      }
      nodes.push_back(std::move(copy));
    }
    std::vector<std::string> outputs;
    for (const auto& output : branch.output()) outputs.push_back(local(output.name()));
    return outputs;
  }

  std::set<std::string>& names_;
  int64_t opset_;
};

}  // namespace

Status inline_if_nodes(onnx::GraphProto& graph, int64_t opset) {
  std::set<std::string> names;
  collect_names(graph, names);
  return IfInliner(names, opset).run(graph);
}

}  // namespace kiln::onnx_import
