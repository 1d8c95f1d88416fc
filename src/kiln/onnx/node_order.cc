#include "kiln/onnx/node_order.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::onnx_import {
namespace {

std::string describe(const onnx::GraphProto& graph, int index) {
  const onnx::NodeProto& node = graph.node(index);
  return fmt::format("node {} ({})",
                     node.name().empty() ? fmt::format("#{}", index) : "'" + node.name() + "'",
                     node.op_type());
}

// One cycle through the nodes left unsorted, each of which still reads a value of another
// unsorted node: walk from reader to producer until a node repeats.
std::string describe_cycle(const onnx::GraphProto& graph,
                           const std::unordered_map<std::string, int>& producer,
                           const std::vector<bool>& sorted) {
  int start = 0;
  while (sorted[start]) ++start;
  std::vector<std::pair<int, std::string>> path;  // (reader, the value it reads from the next)
  std::map<int, size_t> seen;
  int at = start;
  while (!seen.count(at)) {
    seen[at] = path.size();
    std::string read;
    int next = -1;
    for (const std::string& input : graph.node(at).input()) {
      auto it = producer.find(input);
      if (input.empty() || it == producer.end() || sorted[it->second]) continue;
      read = input;
      next = it->second;
      break;
    }
    path.emplace_back(at, read);
    at = next;
  }
  std::string text = describe(graph, at);
  for (size_t i = seen[at]; i < path.size(); ++i) {
    const int producer_index = i + 1 < path.size() ? path[i + 1].first : at;
    text += fmt::format("{} reads '{}' from {}", i == seen[at] ? "" : ", which", path[i].second,
                        describe(graph, producer_index));
  }
  return text;
}

void subgraph_reads(const onnx::NodeProto& node, std::vector<std::string>& names);

// The names `graph` reads (its nodes' inputs and its outputs, its subgraphs' reads included)
// that it does not define itself: values of the graphs around it.
void outer_reads(const onnx::GraphProto& graph, std::vector<std::string>& names) {
  std::set<std::string> defined;
  for (const auto& input : graph.input()) defined.insert(input.name());
  for (const auto& tensor : graph.initializer()) defined.insert(tensor.name());
  for (const onnx::NodeProto& node : graph.node()) {
    defined.insert(node.output().begin(), node.output().end());
  }
  std::vector<std::string> reads;
  for (const onnx::NodeProto& node : graph.node()) {
    reads.insert(reads.end(), node.input().begin(), node.input().end());
    subgraph_reads(node, reads);
  }
  for (const auto& output : graph.output()) reads.push_back(output.name());
  for (std::string& name : reads) {
    if (!defined.count(name)) names.push_back(std::move(name));
  }
}

// The outer values a node's subgraphs (Loop, Scan and If bodies, recursively) read: the node
// depends on them without listing them as inputs.
void subgraph_reads(const onnx::NodeProto& node, std::vector<std::string>& names) {
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (attribute.has_g()) outer_reads(attribute.g(), names);
    for (const onnx::GraphProto& graph : attribute.graphs()) outer_reads(graph, names);
  }
}

}  // namespace

Status sort_nodes_topologically(onnx::GraphProto& graph) {
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    for (onnx::AttributeProto& attribute : *node.mutable_attribute()) {
      if (attribute.has_g()) KILN_RETURN_IF_ERROR(sort_nodes_topologically(*attribute.mutable_g()));
      for (onnx::GraphProto& body : *attribute.mutable_graphs())
        KILN_RETURN_IF_ERROR(sort_nodes_topologically(body));
    }
  }
  const int count = graph.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < count; ++i) {
    for (const std::string& output : graph.node(i).output()) {
      if (!output.empty()) producer.emplace(output, i);
    }
  }
  std::vector<std::vector<int>> readers(count);
  std::vector<int> waiting(count, 0);
  bool in_order = true;
  for (int i = 0; i < count; ++i) {
    std::vector<int> deps;
    for (const std::string& input : graph.node(i).input()) {
      auto it = producer.find(input);
      if (!input.empty() && it != producer.end()) deps.push_back(it->second);
    }
    // A body reading the node's own output is refused later (not a value before the node).
    std::vector<std::string> body_reads;
    subgraph_reads(graph.node(i), body_reads);
    for (const std::string& input : body_reads) {
      auto it = producer.find(input);
      if (!input.empty() && it != producer.end() && it->second != i) deps.push_back(it->second);
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (int p : deps) {
      readers[p].push_back(i);
      ++waiting[i];
      in_order = in_order && p < i;
    }
  }
  if (in_order) return ok_status();

  // Kahn's algorithm, always taking the earliest ready node, so the order moves as little as
  // it must.
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < count; ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  std::vector<bool> sorted(count, false);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    sorted[i] = true;
    for (int r : readers[i]) {
      if (--waiting[r] == 0) ready.push(r);
    }
  }
  if (static_cast<int>(order.size()) < count) {
    return invalid_argument("the graph's nodes form a cycle, which ONNX does not allow: {}",
                            describe_cycle(graph, producer, sorted));
  }
  std::vector<onnx::NodeProto> nodes(count);
  for (int i = 0; i < count; ++i) nodes[i].Swap(graph.mutable_node(i));
  for (int i = 0; i < count; ++i) graph.mutable_node(i)->Swap(&nodes[order[i]]);
  return ok_status();
}

}  // namespace kiln::onnx_import
