// Test helpers for kiln_ops tests (not part of the library): tensor builders, a strict comparator
// (DESIGN.md invariant 3) and OpGraph, which states a one-node op test in a few lines, runs shape
// inference and reference evaluation through the public registry API, and checks that the
// inferred (possibly symbolic) output shapes evaluate to the shapes actually produced.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/ops/registry.h"

namespace kiln::ops::testing {

inline Tensor make_tensor(DType dtype, ConcreteShape shape, const std::vector<double>& values) {
  Tensor t = Tensor::create(dtype, std::move(shape)).value();
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.element_count());
  for (int64_t i = 0; i < t.element_count() && i < static_cast<int64_t>(values.size()); ++i) {
    switch (dtype) {
      case DType::kF32:
        t.mutable_values<float>()[i] = static_cast<float>(values[i]);
        break;
      case DType::kF64:
        t.mutable_values<double>()[i] = values[i];
        break;
      case DType::kI64:
        t.mutable_values<int64_t>()[i] = static_cast<int64_t>(values[i]);
        break;
      case DType::kBool:
        t.mutable_values<uint8_t>()[i] = values[i] != 0;
        break;
      default:
        ADD_FAILURE() << "make_tensor: unsupported dtype";
    }
  }
  return t;
}
inline Tensor f32(ConcreteShape shape, const std::vector<double>& values) {
  return make_tensor(DType::kF32, std::move(shape), values);
}
inline Tensor f64(ConcreteShape shape, const std::vector<double>& values) {
  return make_tensor(DType::kF64, std::move(shape), values);
}
inline Tensor i64(ConcreteShape shape, const std::vector<double>& values) {
  return make_tensor(DType::kI64, std::move(shape), values);
}

// Deterministic test data, reproduced by the numpy scripts that computed the expected values:
// element i is ((i * mul + add) % mod - mod / 2) / div (integer ops, then one division).
inline std::vector<double> pattern(int64_t count, int64_t mul, int64_t add, int64_t mod,
                                   double div) {
  std::vector<double> out;
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(static_cast<double>((i * mul + add) % mod - mod / 2) / div);
  }
  return out;
}

inline std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.element_count(); ++i) out.push_back(element_as_double(t, i));
  return out;
}

// |a - e| <= atol + rtol * |e|; NaN or Inf in `actual` where `expected` is finite fails.
inline void expect_close(const Tensor& actual, const ConcreteShape& shape,
                         const std::vector<double>& expected, double atol = 1e-5,
                         double rtol = 1e-5) {
  ASSERT_EQ(actual.shape(), shape);
  ASSERT_EQ(actual.element_count(), static_cast<int64_t>(expected.size()));
  int failures = 0;
  for (int64_t i = 0; i < actual.element_count(); ++i) {
    double a = element_as_double(actual, i);
    double e = expected[i];
    bool ok = std::isfinite(a) && std::fabs(a - e) <= atol + rtol * std::fabs(e);
    if (!std::isfinite(e)) ok = (std::isnan(e) && std::isnan(a)) || a == e;
    if (!ok && ++failures <= 10)
      ADD_FAILURE() << "element " << i << ": got " << a << ", expected " << e;
  }
}

inline ::testing::AssertionResult has_error(const Status& status, StatusCode code,
                                            std::initializer_list<std::string> fragments) {
  if (status.ok()) return ::testing::AssertionFailure() << "expected an error, got ok";
  std::string text = status.to_string();
  if (status.code() != code) {
    return ::testing::AssertionFailure()
           << "expected code " << status_code_name(code) << ", got: " << text;
  }
  for (const std::string& f : fragments) {
    if (text.find(f) == std::string::npos) {
      return ::testing::AssertionFailure() << "missing '" << f << "' in: " << text;
    }
  }
  return ::testing::AssertionSuccess();
}

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
    return infer_graph(graph_);
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
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> results, evaluate_graph(graph_, inputs));
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

inline DimExpr sym(const std::string& name) { return DimExpr::symbol(name); }

}  // namespace kiln::ops::testing
