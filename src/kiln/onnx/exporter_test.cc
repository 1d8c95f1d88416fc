// IR -> ONNX export: a subgraph written out and imported back computes what it computed inside the
// whole graph (attributes, initializers, symbolic dims kept); kiln-only attributes and bad
// requests are errors; a model copy exposes intermediates as outputs.
#include "kiln/onnx/exporter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kiln/graph_eval/graph_eval.h"
#include "kiln/onnx/importer.h"
#include "tests/support/files.h"
#include "tests/support/onnx/test_models.h"

namespace kiln::onnx_import {
namespace {

using namespace testing;
using ::kiln::testing::TempDir;

// x[N,2,4,4] -> conv (3x3, pad 1) -> relu -> add(x') where x' = conv's input through an
// identity-like maxpool (k1) -> flatten.
ModelBuilder small_model() {
  ModelBuilder b;
  b.input("x", 1, {std::string("N"), int64_t{2}, int64_t{4}, int64_t{4}});
  std::vector<float> w(2 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  b.initializer("w", {2, 2, 3, 3}, w);
  b.initializer("b", {2}, {0.25f, -0.5f});
  auto* conv = b.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  attr_ints(conv, "pads", {1, 1, 1, 1});
  attr_ints(conv, "kernel_shape", {3, 3});
  b.node("Relu", {"c"}, {"r"}, "relu");
  auto* pool = b.node("MaxPool", {"x"}, {"p"}, "pool");
  attr_ints(pool, "kernel_shape", {1, 1});
  b.node("Add", {"r", "p"}, {"s"}, "add");
  b.node("Flatten", {"s"}, {"f"}, "flatten");
  b.output("f", 1);
  return b;
}

ir::NodeId node_id(const ir::Graph& g, const std::string& name) {
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    if (g.nodes()[n].name == name) return static_cast<ir::NodeId>(n);
  }
  ADD_FAILURE() << "no node " << name;
  return 0;
}

TEST(ExportSubgraph, RoundTripComputesTheSameValues) {
  TempDir dir;
  auto graph = import_bytes(small_model().bytes().data(), small_model().bytes().size(), "");
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  Tensor x = Tensor::create(DType::kF32, {2, 2, 4, 4}).value();
  auto xs = x.mutable_values<float>();
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i));
  std::map<ir::ValueId, Tensor> all;
  ASSERT_TRUE(graph_eval::evaluate_graph(*graph, std::vector<Tensor>{x}, &all).ok());

  const std::vector<ir::NodeId> nodes = {node_id(*graph, "conv"), node_id(*graph, "relu"),
                                         node_id(*graph, "add")};
  const std::vector<ir::ValueId> outputs = {graph->find_value("s").value()};
  const std::string path = dir.file("sub.onnx");
  Status exported = export_subgraph(*graph, nodes, outputs, "sub", path);
  ASSERT_TRUE(exported.ok()) << exported.to_string();

  auto sub = import_file(path);
  ASSERT_TRUE(sub.ok()) << sub.status().to_string();
  EXPECT_EQ(sub->name, "sub");
  ASSERT_EQ(sub->inputs().size(), 2u);  // x (the conv's input) and p (the add's other input)
  EXPECT_EQ(sub->value(sub->inputs()[0]).name, "x");
  EXPECT_EQ(shape_to_string(sub->value(sub->inputs()[0]).shape), "[N,2,4,4]");
  EXPECT_EQ(sub->value(sub->inputs()[1]).name, "p");
  ASSERT_EQ(sub->nodes().size(), 3u);
  EXPECT_EQ(sub->nodes()[0].name, "conv");
  EXPECT_TRUE(sub->value(sub->nodes()[0].inputs[1]).constant.has_value());
  auto sub_out = graph_eval::evaluate_graph(
      *sub, std::vector<Tensor>{x, all.at(graph->find_value("p").value())});
  ASSERT_TRUE(sub_out.ok()) << sub_out.status().to_string();
  const Tensor& want = all.at(outputs[0]);
  ASSERT_EQ((*sub_out)[0].shape(), want.shape());
  EXPECT_EQ(std::memcmp((*sub_out)[0].data(), want.data(), want.byte_size()), 0);
}

// An optimizer of ai.onnx.preview.training goes back into its domain (kiln's IR knows it by name
// alone), so the exported model passes the checker and imports again.
TEST(ExportSubgraph, TrainingDomainOpsKeepTheirDomain) {
  TempDir dir;
  ModelBuilder b;
  auto* training = b.model.add_opset_import();
  training->set_domain("ai.onnx.preview.training");
  training->set_version(1);
  b.input("r", 1, {});
  b.input("t", 7, {});
  for (const char* name : {"x", "g", "h"}) b.input(name, 1, {std::string("N")});
  b.node("Adagrad", {"r", "t", "x", "g", "h"}, {"x_new", "h_new"}, "adagrad")
      ->set_domain("ai.onnx.preview.training");
  b.output("x_new");
  b.output("h_new");
  auto graph = import_bytes(b.bytes().data(), b.bytes().size(), "");
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  const std::vector<ir::NodeId> nodes = {node_id(*graph, "adagrad")};
  const std::vector<ir::ValueId> outputs = {graph->find_value("x_new").value(),
                                            graph->find_value("h_new").value()};
  const std::string path = dir.file("adagrad.onnx");
  Status exported = export_subgraph(*graph, nodes, outputs, "sub", path);
  ASSERT_TRUE(exported.ok()) << exported.to_string();
  auto again = import_file(path);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  ASSERT_EQ(again->nodes().size(), 1u);
  EXPECT_EQ(again->nodes()[0].op_type, "Adagrad");
  EXPECT_EQ(shape_to_string(again->value(again->outputs()[1]).shape), "[N]");
}

TEST(ExportSubgraph, RefusesWhatOnnxCannotSay) {
  TempDir dir;
  auto graph = import_bytes(small_model().bytes().data(), small_model().bytes().size(), "");
  ASSERT_TRUE(graph.ok());
  const std::string path = dir.file("bad.onnx");
  const std::vector<ir::NodeId> relu = {node_id(*graph, "relu")};
  const std::vector<ir::ValueId> r = {graph->find_value("r").value()};
  const std::vector<ir::ValueId> s = {graph->find_value("s").value()};
  EXPECT_EQ(export_subgraph(*graph, {}, r, "g", path).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(export_subgraph(*graph, relu, {}, "g", path).code(), StatusCode::kInvalidArgument);
  Status not_produced = export_subgraph(*graph, relu, s, "g", path);
  EXPECT_EQ(not_produced.code(), StatusCode::kInvalidArgument) << not_produced.to_string();
  const std::vector<ir::NodeId> out_of_range = {999};
  EXPECT_EQ(export_subgraph(*graph, out_of_range, r, "g", path).code(),
            StatusCode::kInvalidArgument);

  graph->node(node_id(*graph, "relu")).attributes.set("kiln_activation", std::string("relu"));
  Status kiln_only = export_subgraph(*graph, relu, r, "g", path);
  EXPECT_EQ(kiln_only.code(), StatusCode::kUnimplemented);
  EXPECT_NE(kiln_only.to_string().find("kiln_activation"), std::string::npos);
  EXPECT_NE(kiln_only.to_string().find("node 'relu'"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(WriteModelWithOutputs, ExposesIntermediates) {
  TempDir dir;
  const std::string model = dir.file("model.onnx");
  {
    std::ofstream out(model, std::ios::binary);
    out << small_model().bytes();
  }
  const std::string copy = dir.file("copy.onnx");
  const std::vector<std::pair<std::string, DType>> extra = {
      {"c", DType::kF32}, {"p", DType::kF32}, {"f", DType::kF32}};
  Status written = write_model_with_outputs(model, extra, copy);
  ASSERT_TRUE(written.ok()) << written.to_string();
  auto graph = import_file(copy);
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  ASSERT_EQ(graph->outputs().size(), 3u);  // f was already an output
  EXPECT_EQ(graph->value(graph->outputs()[1]).name, "c");

  const std::vector<std::pair<std::string, DType>> unknown = {{"nope", DType::kF32}};
  Status missing = write_model_with_outputs(model, unknown, dir.file("copy2.onnx"));
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("'nope'"), std::string::npos);
}

}  // namespace
}  // namespace kiln::onnx_import
