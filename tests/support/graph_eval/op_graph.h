// OpGraph states a one-node op test in a few lines: it builds an IR graph around the node, runs
// shape inference and the float64 reference evaluator (graph_eval::evaluate_graph) through the
// public registry API, and checks that the inferred (possibly symbolic) output shapes evaluate to
// the shapes actually produced. It is also the tests' reference for an op: what a backend computes
// is compared with OpGraph(op).run(...).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/graph_eval/graph_eval.h"
#include "kiln/ir/graph.h"
#include "kiln/shape/shape.h"
#include "tests/support/tensors.h"

namespace kiln::testing {

class OpGraph {
 public:
  explicit OpGraph(std::string op_type, int64_t opset = 17) : op_type_(std::move(op_type)) {
    graph_.name = "test";
    graph_.opset = opset;
  }
  // A runtime graph input with a (possibly symbolic) shape.
  OpGraph& input(const std::string& name, DType dtype, Shape shape) {
    node_inputs_.push_back(graph_.add_input(name, dtype, std::move(shape)));
    return *this;
  }
  OpGraph& constant(const std::string& name, Tensor data) {
    node_inputs_.push_back(graph_.add_constant(name, std::move(data)));
    return *this;
  }
  OpGraph& absent() {
    node_inputs_.push_back(ir::kAbsent);
    return *this;
  }
  OpGraph& attr(const std::string& name, Attribute value) {
    attributes_.set(name, std::move(value));
    return *this;
  }
  // Number of node outputs (trailing optional outputs are omitted, as the IR does).
  OpGraph& outputs(size_t count) {
    output_count_ = count;
    return *this;
  }

  // Builds the graph (once) and runs infer_graph.
  Status infer() {
    build();
    return graph_eval::infer_graph(graph_);
  }
  const Shape& output_shape(size_t i = 0) { return graph_.value(node().outputs[i]).shape; }
  DType output_dtype(size_t i = 0) { return graph_.value(node().outputs[i]).dtype; }
  ir::Graph& graph() {
    build();
    return graph_;
  }
  const ir::Node& node() {
    build();
    return graph_.node(0);
  }

  // infer_graph + evaluate_graph with `inputs` for the runtime inputs; checks each inferred
  // output shape, evaluated under the symbols bound from the inputs, against the result.
  StatusOr<std::vector<Tensor>> run(std::vector<Tensor> inputs) {
    KILN_RETURN_IF_ERROR(infer());
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> results, graph_eval::evaluate_graph(graph_, inputs));
    Bindings bindings;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Shape& shape = graph_.value(graph_.inputs()[i]).shape;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d].is_symbol()) bindings[shape[d].symbols()[0]] = inputs[i].shape()[d];
      }
    }
    for (size_t i = 0; i < results.size(); ++i) {
      const ir::Value& v = graph_.value(graph_.outputs()[i]);
      auto dims = evaluate_shape(v.shape, bindings);
      EXPECT_TRUE(dims.ok()) << dims.status().to_string();
      if (dims.ok()) {
        EXPECT_EQ(*dims, results[i].shape())
            << "inferred " << shape_to_string(v.shape) << " for output " << i;
      }
      EXPECT_EQ(v.dtype, results[i].dtype());
    }
    return results;
  }
  // Single-output convenience: run and return output 0 (asserting success).
  Tensor run1(std::vector<Tensor> inputs) {
    auto out = run(std::move(inputs));
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (!out.ok() || out->empty()) return Tensor();
    return (*out)[0];
  }

 private:
  void build() {
    if (built_) return;
    built_ = true;
    ir::Node node;
    node.name = "n0";
    node.op_type = op_type_;
    node.inputs = node_inputs_;
    node.attributes = attributes_;
    for (size_t i = 0; i < output_count_; ++i) {
      ir::ValueId out = graph_.add_value({fmt::format("y{}", i), DType::kF32, {}, {}, {}});
      node.outputs.push_back(out);
      graph_.add_output(out);
    }
    graph_.add_node(std::move(node));
  }

  std::string op_type_;
  ir::Graph graph_;
  std::vector<ir::ValueId> node_inputs_;
  Attributes attributes_;
  size_t output_count_ = 1;
  bool built_ = false;
};

}  // namespace kiln::testing
