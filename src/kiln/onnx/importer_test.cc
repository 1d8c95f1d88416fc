#include "kiln/onnx/importer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "kiln/graph_eval/graph_eval.h"
#include "tests/support/onnx/test_models.h"

namespace kiln::onnx_import {
namespace {

using ::testing::AllOf;
using testing::attr_float;
using testing::attr_int;
using testing::attr_ints;
using testing::DimSpec;
using ::testing::HasSubstr;
using testing::ModelBuilder;
namespace fs = std::filesystem;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kInt64 = onnx::TensorProto::INT64;
const std::string kNodeData = "/usr/share/libonnx-testdata/data/node";

StatusOr<ir::Graph> import(const ModelBuilder& b, const ImportOptions& options = {}) {
  std::string bytes = b.bytes();
  return import_bytes(bytes.data(), bytes.size(), "", options);
}

std::string shape_of(const ir::Graph& g, const std::string& name) {
  auto id = g.find_value(name);
  if (!id) return "<missing " + name + ">";
  return std::string(dtype_name(g.value(*id).dtype)) + shape_to_string(g.value(*id).shape);
}

std::string temp_dir() {
  std::string pattern = (fs::temp_directory_path() / "kiln_onnx_test_XXXXXX").string();
  char* made = mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr);
  return pattern;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// x[N,3,8,8] -> Conv(3x3, 4 filters, with bias) -> Relu -> y
ModelBuilder conv_relu_model() {
  ModelBuilder b;
  b.input("x", kFloat, {std::string("N"), int64_t{3}, int64_t{8}, int64_t{8}});
  b.initializer("w", {4, 3, 3, 3}, std::vector<float>(108, 0.5f));
  b.initializer("bias", {4}, {1, 2, 3, 4});
  auto* conv = b.node("Conv", {"x", "w", "bias"}, {"c"}, "conv0");
  attr_ints(conv, "kernel_shape", {3, 3});
  b.node("Relu", {"c"}, {"y"}, "relu0");
  b.output("y");
  return b;
}

TEST(Importer, SymbolicAndUnknownDims) {
  ModelBuilder b(17, "tiny");
  b.input("x", kFloat, {std::string("N"), int64_t{3}, DimSpec{}, int64_t{4}});
  b.node("Relu", {"x"}, {"y"}, "relu0");
  b.output("y");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->name, "tiny");
  EXPECT_EQ(g->opset, 17);
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(shape_of(*g, "x"), "f32[N,3,unk_x_2,4]");
  EXPECT_EQ(shape_of(*g, "y"), "f32[N,3,unk_x_2,4]");
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->value(g->outputs()[0]).name, "y");
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(g->node(0).name, "relu0");
  EXPECT_EQ(g->node(0).op_type, "Relu");
}

TEST(Importer, GeneratedSymbolAvoidsDeclaredNames) {
  ModelBuilder b;
  b.input("x", kFloat, {DimSpec{}, int64_t{2}});
  b.input("a", kFloat, {std::string("unk_x_0"), int64_t{2}});
  b.node("Add", {"x", "x"}, {"y"});
  b.node("Relu", {"a"}, {"z"});
  b.output("y");
  b.output("z");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(shape_of(*g, "x"), "f32[unk_x_0_2,2]");
  EXPECT_EQ(shape_of(*g, "a"), "f32[unk_x_0,2]");
}

TEST(Importer, BindFixesSymbols) {
  ModelBuilder b;
  b.input("x", kFloat, {std::string("N"), DimSpec{}});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  ImportOptions options;
  options.bind = {{"N", 8}, {"unk_x_1", 5}};
  auto g = import(b, options);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(shape_of(*g, "x"), "f32[8,5]");
  EXPECT_EQ(shape_of(*g, "y"), "f32[8,5]");

  options.bind = {{"batch", 8}};
  auto missing = import(b, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), AllOf(HasSubstr("'batch'"), HasSubstr("N")));

  options.bind = {{"N", -1}};
  auto negative = import(b, options);
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("negative"));
}

TEST(Importer, InitializersBecomeConstants) {
  auto g = import(conv_relu_model());
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->inputs().size(), 1u);
  auto w = g->find_value("w");
  ASSERT_TRUE(w.has_value());
  ASSERT_TRUE(g->is_constant(*w));
  EXPECT_EQ(shape_of(*g, "w"), "f32[4,3,3,3]");
  EXPECT_EQ(g->value(*w).constant->values<float>()[107], 0.5f);
  auto bias = g->find_value("bias");
  ASSERT_TRUE(bias.has_value());
  EXPECT_EQ(g->value(*bias).constant->values<float>()[3], 4.0f);
  EXPECT_EQ(shape_of(*g, "y"), "f32[N,4,6,6]");
}

TEST(Importer, TypedFieldInitializers) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{2}, int64_t{3}});
  b.initializer("w", {2, 3}, {1, 2, 3, 4, 5, 6}, /*raw=*/false);
  b.initializer_i64("shape", {2}, {3, 2});
  b.node("Add", {"x", "w"}, {"s"});
  b.node("Reshape", {"s", "shape"}, {"y"});
  b.output("y");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto w = g->find_value("w");
  EXPECT_EQ(g->value(*w).constant->values<float>()[5], 6.0f);
  auto shape = g->find_value("shape");
  EXPECT_EQ(g->value(*shape).constant->values<int64_t>()[0], 3);
  EXPECT_EQ(shape_of(*g, "y"), "f32[3,2]");
}

TEST(Importer, WeightsListedAsInputsAreConstantsByDefault) {
  ModelBuilder b = conv_relu_model();
  b.input("w", kFloat, {int64_t{4}, int64_t{3}, int64_t{3}, int64_t{3}});
  b.input("bias", kFloat, {int64_t{4}});
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->value(g->inputs()[0]).name, "x");
  EXPECT_TRUE(g->is_constant(*g->find_value("w")));
  EXPECT_TRUE(g->is_constant(*g->find_value("bias")));
}

TEST(Importer, WeightsAsInputsKeepsThemRuntimeInputs) {
  ModelBuilder b = conv_relu_model();
  b.input("w", kFloat, {int64_t{4}, int64_t{3}, int64_t{3}, int64_t{3}});
  b.input("bias", kFloat, {int64_t{4}});
  ImportOptions options;
  options.weights_as_inputs = true;
  auto g = import(b, options);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->inputs().size(), 3u);
  EXPECT_EQ(g->value(g->inputs()[1]).name, "w");
  EXPECT_EQ(g->value(g->inputs()[2]).name, "bias");
  EXPECT_FALSE(g->is_constant(*g->find_value("w")));
  EXPECT_EQ(shape_of(*g, "w"), "f32[4,3,3,3]");
  EXPECT_EQ(shape_of(*g, "y"), "f32[N,4,6,6]");
}

TEST(Importer, InitializerDeclaredWithOtherTypeIsAnError) {
  ModelBuilder b = conv_relu_model();
  b.input("bias", kInt64, {int64_t{4}});
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'bias'"), HasSubstr("INT64")));
}

TEST(Importer, InitializerLengthMismatchNamesIt) {
  {
    ModelBuilder b = conv_relu_model();
    b.graph().mutable_initializer(1)->set_raw_data(std::string(12, '\0'));  // 3 floats, need 4
    auto g = import(b);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'bias'"), HasSubstr("12 bytes")));
  }
  {
    ModelBuilder b;
    b.input("x", kFloat, {int64_t{3}});
    b.initializer("k", {3}, {1, 2}, /*raw=*/false);
    b.node("Add", {"x", "k"}, {"y"});
    b.output("y");
    auto g = import(b);
    ASSERT_FALSE(g.ok());
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'k'"), HasSubstr("2")));
  }
  {
    ModelBuilder b = conv_relu_model();
    auto* w = b.graph().mutable_initializer(0);
    w->clear_dims();
    for (int i = 0; i < 4; ++i) w->add_dims(int64_t{1} << 40);  // product overflows
    auto g = import(b);
    ASSERT_FALSE(g.ok());
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'w'"), HasSubstr("overflow")));
  }
  {
    ModelBuilder b = conv_relu_model();
    b.graph().mutable_initializer(0)->set_dims(0, -4);
    auto g = import(b);
    ASSERT_FALSE(g.ok());
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'w'"), HasSubstr("negative")));
  }
}

TEST(Importer, ConstantNodesBecomeConstants) {
  ModelBuilder b;
  b.input("x", kFloat, {std::string("N"), int64_t{6}});
  auto* shape = b.node("Constant", {}, {"shape"}, "shape_const");
  auto* value = testing::add_attr(shape, "value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(kInt64);
  value->mutable_t()->add_dims(3);
  for (int64_t v : {0, 3, 2}) value->mutable_t()->add_int64_data(v);
  auto* scale = b.node("Constant", {}, {"scale"});
  attr_float(scale, "value_float", 2.5f);
  auto* ints = b.node("Constant", {}, {"ints"});
  attr_ints(ints, "value_ints", {7, 8});
  auto* floats = b.node("Constant", {}, {"floats"});
  auto* floats_attr = testing::add_attr(floats, "value_floats");
  floats_attr->set_type(onnx::AttributeProto::FLOATS);
  floats_attr->add_floats(0.5f);
  floats_attr->add_floats(-1.5f);
  b.node("Mul", {"x", "scale"}, {"m"});
  b.node("Reshape", {"m", "shape"}, {"y"});
  b.output("y");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->nodes().size(), 2u);  // Constants are values, not nodes
  EXPECT_EQ(shape_of(*g, "shape"), "i64[3]");
  EXPECT_EQ(shape_of(*g, "scale"), "f32[]");
  EXPECT_EQ(g->value(*g->find_value("scale")).constant->values<float>()[0], 2.5f);
  EXPECT_EQ(shape_of(*g, "ints"), "i64[2]");
  EXPECT_EQ(g->value(*g->find_value("ints")).constant->values<int64_t>()[1], 8);
  EXPECT_EQ(shape_of(*g, "floats"), "f32[2]");
  EXPECT_EQ(g->value(*g->find_value("floats")).constant->values<float>()[1], -1.5f);
  EXPECT_EQ(shape_of(*g, "y"), "f32[N,3,2]");
}

TEST(Importer, UnsupportedConstantAttribute) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{1}});
  auto* c = b.node("Constant", {}, {"s"}, "strs");
  testing::attr_string(c, "value_string", "hi");
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'strs'"), HasSubstr("value_string")));
}

// ConstantOfShape's tensor attribute becomes a number plus its dtype (graph_eval/graph_eval.h).
ModelBuilder constant_of_shape_model(int32_t dtype, std::vector<int32_t> values) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{1}});
  auto* shape = b.node("Constant", {}, {"shape"});
  attr_ints(shape, "value_ints", {2, 3});
  auto* fill = b.node("ConstantOfShape", {"shape"}, {"y"}, "fill");
  auto* value = testing::add_attr(fill, "value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(dtype);
  value->mutable_t()->add_dims(static_cast<int64_t>(values.size()));
  for (int32_t v : values) value->mutable_t()->add_int32_data(v);
  b.node("Relu", {"x"}, {"r"});
  b.output("y");
  b.output("r");
  return b;
}

TEST(Importer, ConstantOfShapeValueBecomesNumberAndDtype) {
  auto g = import(constant_of_shape_model(onnx::TensorProto::INT32, {7}));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& fill = g->node(0);
  ASSERT_EQ(fill.op_type, "ConstantOfShape");
  EXPECT_EQ(fill.attributes.get_int("value", 0).value(), 7);
  EXPECT_EQ(fill.attributes.get_string("kiln_value_dtype", "").value(), "i32");
  EXPECT_EQ(shape_of(*g, "y"), "i32[2,3]");
}

TEST(Importer, ConstantOfShapeValueMustHoldOneElement) {
  auto g = import(constant_of_shape_model(onnx::TensorProto::INT32, {7, 8}));
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("'fill'"), HasSubstr("'value' must hold one element, got 2")));
}

TEST(Importer, TensorAttributeOnOtherOpsIsUnimplemented) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{2}});
  auto* relu = b.node("Relu", {"x"}, {"y"}, "odd");
  auto* t = testing::add_attr(relu, "weights");
  t->set_type(onnx::AttributeProto::TENSOR);
  t->mutable_t()->set_data_type(kFloat);
  t->mutable_t()->add_float_data(1.f);
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'weights'"), HasSubstr("only supported")));
}

TEST(Importer, KilnAttributePrefixIsRejected) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{2}});
  auto* relu = b.node("Relu", {"x"}, {"y"}, "spoof");
  testing::attr_string(relu, "kiln_activation", "relu");
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'spoof'"), HasSubstr("kiln_activation")));
}

TEST(Importer, NodeNamesAreGeneratedAndUnique) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{2}});
  b.node("Relu", {"x"}, {"a"});
  b.node("Relu", {"a"}, {"b"}, "dup");
  b.node("Relu", {"b"}, {"c"}, "dup");
  b.node("Relu", {"c"}, {"d"}, "Relu_3");
  b.output("d");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->nodes().size(), 4u);
  EXPECT_EQ(g->node(0).name, "Relu_0");
  EXPECT_EQ(g->node(1).name, "dup");
  EXPECT_EQ(g->node(2).name, "dup__1");
  EXPECT_EQ(g->node(3).name, "Relu_3");
}

TEST(Importer, AbsentOptionalInputsAndOutputs) {
  ModelBuilder b;
  b.input("x", kFloat, {std::string("N"), int64_t{3}, int64_t{5}, int64_t{5}});
  b.initializer("w", {2, 3, 1, 1}, std::vector<float>(6, 1.0f));
  b.node("Conv", {"x", "w", ""}, {"c"}, "conv");
  b.node("Dropout", {"c"}, {"y", ""}, "drop");
  b.output("y");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->node(0).inputs.size(), 3u);
  EXPECT_EQ(g->node(0).inputs[2], ir::kAbsent);
  EXPECT_EQ(g->node(1).outputs.size(), 1u);
  EXPECT_EQ(shape_of(*g, "y"), "f32[N,2,5,5]");
}

TEST(Importer, AttributesAreConverted) {
  auto g = import(conv_relu_model());
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto kernel = g->node(0).attributes.get_ints("kernel_shape", {});
  ASSERT_TRUE(kernel.ok());
  EXPECT_EQ(*kernel, (std::vector<int64_t>{3, 3}));
}

TEST(Importer, GraphAttributeIsUnimplemented) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{2}});
  auto* relu = b.node("Relu", {"x"}, {"y"}, "odd");
  auto* body = testing::add_attr(relu, "body");
  body->set_type(onnx::AttributeProto::GRAPH);
  body->mutable_g()->set_name("sub");
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'odd'"), HasSubstr("body")));
}

// ONNX Runtime accepts nodes out of order (real fp16 models ship that way); kiln sorts them,
// moving only the nodes that must move.
TEST(Importer, OutOfOrderNodesAreSorted) {
  ModelBuilder b;
  b.input("x", kFloat, {std::string("N"), int64_t{2}});
  b.node("Add", {"a", "b"}, {"y"}, "add");
  b.node("Relu", {"x"}, {"c"}, "independent");
  b.node("Neg", {"a"}, {"b"}, "neg");
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.output("y");
  b.output("c");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::vector<std::string> order;
  for (const ir::Node& node : g->nodes()) order.push_back(node.name);
  EXPECT_EQ(order, (std::vector<std::string>{"independent", "relu", "neg", "add"}));
  EXPECT_EQ(shape_of(*g, "y"), "f32[N,2]");
}

TEST(Importer, NodeCycleIsRefusedNamingItsNodes) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{2}});
  b.node("Relu", {"x"}, {"r"}, "fine");
  b.node("Add", {"r", "w"}, {"v"}, "a");
  b.node("Neg", {"v"}, {"u"});
  b.node("Relu", {"u"}, {"w"}, "c");
  b.output("v");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(
      g.status().message(),
      HasSubstr(
          "the graph's nodes form a cycle, which ONNX does not allow: node 'a' (Add) reads 'w' "
          "from node 'c' (Relu), which reads 'u' from node #2 (Neg), which reads 'v' from node "
          "'a' (Add)"));
  // A node reading its own output is a cycle too.
  ModelBuilder self;
  self.input("x", kFloat, {int64_t{2}});
  self.node("Add", {"x", "y"}, {"y"}, "loop");
  self.output("y");
  g = import(self);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(),
              HasSubstr("node 'loop' (Add) reads 'y' from node 'loop' (Add)"));
}

TEST(Importer, ValueNoNodeProducesIsNamed) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{2}});
  b.node("Relu", {"nowhere"}, {"y"}, "early");
  b.node("Relu", {"x"}, {"later"}, "late");
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'early'"), HasSubstr("'nowhere'")));
}

// Softmax before opset 13 flattened its input to 2-D at `axis`; ONNX's converter cannot upgrade
// it without the input's shape. kiln writes the old meaning out (tests/e2e/legacy_axis_ops_test.cc
// runs it against ONNX Runtime).
TEST(Importer, Opset12SoftmaxOverSeveralDimsIsSpelledOut) {
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    ModelBuilder b(12);
    b.input("x", kFloat, {std::string("N"), std::string("S"), int64_t{4}});
    b.node("Relu", {"x"}, {"r"});  // undeclared: the converter sees no shape
    b.node(op, {"r"}, {"y"}, "sm");
    b.output("y", kFloat);
    auto g = import(b);
    ASSERT_TRUE(g.ok()) << op << ": " << g.status().to_string();
    std::vector<std::string> ops;
    for (const ir::Node& node : g->nodes()) ops.push_back(node.op_type);
    EXPECT_EQ(ops, (std::vector<std::string>{"Relu", "Flatten", op, "Shape", "Reshape"})) << op;
    EXPECT_EQ(shape_of(*g, "y"), "f32[N,S,4]") << op;
    EXPECT_EQ(g->node(2).name, "sm");
    EXPECT_EQ(g->node(2).attributes.get_int("axis", 0).value(), -1);
  }
}

TEST(Importer, Opset12SoftmaxOnItsLastAxisStaysOneNode) {
  for (int64_t axis : {2, -1}) {
    ModelBuilder b(12);
    b.input("x", kFloat, {std::string("N"), std::string("S"), int64_t{4}});
    b.node("Relu", {"x"}, {"r"});
    attr_int(b.node("Softmax", {"r"}, {"y"}, "sm"), "axis", axis);
    b.output("y", kFloat);
    auto g = import(b);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_EQ(g->nodes().size(), 2u);
    EXPECT_EQ(g->node(1).op_type, "Softmax");
    EXPECT_EQ(g->node(1).attributes.get_int("axis", 0).value(), -1);
  }
}

TEST(Importer, ValueDefinedTwice) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{2}});
  b.node("Relu", {"x"}, {"y"}, "r0");
  b.node("Relu", {"x"}, {"y"}, "r1");
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'y'"), HasSubstr("twice"), HasSubstr("'r1'")));
}

TEST(Importer, UndefinedGraphOutput) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{2}});
  b.node("Relu", {"x"}, {"y"});
  b.output("nope");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("'nope'"));
}

TEST(Importer, DeclaredOutputTypeConflicts) {
  {
    ModelBuilder b;
    b.input("x", kFloat, {int64_t{2}});
    b.node("Relu", {"x"}, {"y"});
    b.output("y", kInt64);
    auto g = import(b);
    ASSERT_FALSE(g.ok());
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'y'"), HasSubstr("i64"), HasSubstr("f32")));
  }
  {
    ModelBuilder b;
    b.input("x", kFloat, {int64_t{2}});
    b.node("Relu", {"x"}, {"y"});
    std::vector<DimSpec> dims{int64_t{1}, int64_t{2}};
    b.output("y", kFloat, &dims);
    auto g = import(b);
    ASSERT_FALSE(g.ok());
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'y'"), HasSubstr("rank 2")));
  }
  {
    ModelBuilder b;
    b.input("x", kFloat, {std::string("N")});
    b.node("Relu", {"x"}, {"y"});
    std::vector<DimSpec> dims{std::string("M")};  // names may differ; only dtype and rank count
    b.output("y", kFloat, &dims);
    EXPECT_TRUE(import(b).ok());
  }
}

TEST(Importer, UnsupportedElementTypesNameTheValue) {
  {
    ModelBuilder b;
    b.input("complex", onnx::TensorProto::COMPLEX64, {int64_t{2}});
    b.node("Relu", {"complex"}, {"y"});
    b.output("y");
    auto g = import(b);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'complex'"), HasSubstr("COMPLEX64")));
  }
  {
    ModelBuilder b;
    b.input("x", kFloat, {int64_t{1}});
    auto* t = b.graph().add_initializer();
    t->set_name("words");
    t->set_data_type(onnx::TensorProto::STRING);
    t->add_dims(1);
    t->add_string_data("hello");
    b.node("Add", {"x", "words"}, {"y"});
    b.output("y");
    auto g = import(b);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'words'"), HasSubstr("STRING")));
  }
  {
    ModelBuilder b;
    b.input("x", kFloat, {int64_t{1}});
    b.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    auto g = import(b);
    ASSERT_FALSE(g.ok());
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'x'"), HasSubstr("rank")));
  }
}

TEST(Importer, ListsEveryUnsupportedOpAtOnce) {
  ModelBuilder b;
  b.input("x", kFloat, {int64_t{1}, int64_t{4}});
  b.node("Relu", {"x"}, {"r"}, "relu0");
  b.node("Multinomial", {"r"}, {"n"}, "multinomial0");
  b.node("Foo", {"n"}, {"f1"}, "a");
  b.node("Foo", {"f1"}, {"f2"}, "b");
  b.node("Bar", {"f2"}, {"y"});
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  const std::string& m = g.status().message();
  EXPECT_THAT(m, HasSubstr("unsupported ops"));
  EXPECT_THAT(m, HasSubstr("Multinomial (node 'multinomial0')"));
  EXPECT_THAT(m, HasSubstr("Foo (node 'a', node 'b')"));
  EXPECT_THAT(m, HasSubstr("Bar (node 'Bar_4')"));
  EXPECT_THAT(m, ::testing::Not(HasSubstr("Relu")));
}

TEST(Importer, NodeArityCheckedBeforeOpsetConversion) {
  // ONNX's converter indexes Upsample's scales input without checking that it exists.
  ModelBuilder b(9);
  b.input("x", kFloat, {int64_t{1}, int64_t{1}, int64_t{2}, int64_t{2}});
  auto* up = b.node("Upsample", {"x"}, {"y"}, "up0");
  testing::add_attr(up, "mode")->set_s("nearest");
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(),
              HasSubstr("node 'up0' (Upsample): has 1 inputs; Upsample at opset 9 takes 2"));
}

TEST(Importer, AttributesOnnxReadsUncheckedAreCheckedBeforeOpsetConversion) {
  // A zero stride divided by zero inside ONNX's shape inference (found by fuzz_onnx_import;
  // bytes: tests/fuzz/regressions/fuzz_onnx_import/conv_pool_zero_stride_shape_inference.onnx).
  auto conv_model = [](std::vector<int64_t> strides, bool typed_pads) {
    ModelBuilder b(11);
    b.input("x", kFloat, {int64_t{1}, int64_t{1}, int64_t{4}, int64_t{4}});
    b.initializer("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
    auto* conv = b.node("Conv", {"x", "w"}, {"y"}, "conv0");
    attr_ints(conv, "strides", strides);
    if (typed_pads) {
      attr_ints(conv, "pads", {1, 1, 1, 1});
    } else {
      auto* pads = testing::add_attr(conv, "pads");  // no type
      for (int i = 0; i < 4; ++i) pads->add_ints(1);
    }
    b.output("y");
    return b;
  };
  auto zero = import(conv_model({2, 0}, true));
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(),
              HasSubstr("node 'conv0' (Conv): attribute 'strides' values must be >= 1, got 0"));
  auto untyped = import(conv_model({2, 2}, false));
  ASSERT_FALSE(untyped.ok());
  EXPECT_THAT(untyped.status().message(),
              HasSubstr("node 'conv0' (Conv): attribute 'pads' has no type"));
  EXPECT_TRUE(import(conv_model({2, 2}, true)).ok());
}

TEST(Importer, Opset9UpsampleBecomesResizeWithItsOwnSemantics) {
  // Upsample reads input coordinate x / scale and floors it for nearest; opset 11's Resize
  // defaults (half_pixel, round_prefer_floor) would pick other pixels.
  ModelBuilder b(9);
  b.input("x", kFloat, {int64_t{1}, int64_t{1}, int64_t{2}, int64_t{2}});
  b.initializer("scales", {4}, {1, 1, 2, 3});
  auto* up = b.node("Upsample", {"x", "scales"}, {"y"}, "up0");
  testing::attr_string(up, "mode", "nearest");
  b.output("y");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->nodes().size(), 1u);
  const ir::Node& resize = g->node(0);
  EXPECT_EQ(resize.op_type, "Resize");
  EXPECT_EQ(resize.attributes.get_string("coordinate_transformation_mode", "").value(),
            "asymmetric");
  EXPECT_EQ(resize.attributes.get_string("nearest_mode", "").value(), "floor");
  EXPECT_EQ(shape_of(*g, "y"), "f32[1,1,4,6]");
}

TEST(Importer, Opset6PReluSlopeStaysPerChannel) {
  // Before opset 7 a slope of C elements applied along dim 1; opset 7 would align it with W.
  ModelBuilder b(6);
  b.input("x", kFloat, {int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}});
  b.initializer("slope", {3}, {0.1f, 0.2f, 0.3f});
  b.node("PRelu", {"x", "slope"}, {"y"}, "prelu");
  b.output("y");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(shape_to_string(g->value(g->node(0).inputs[1]).shape), "[3,1,1]");
  EXPECT_EQ(shape_of(*g, "y"), "f32[2,3,4,5]");
}

TEST(Importer, Opset9ScatterBecomesScatterElements) {
  ModelBuilder b(9);
  b.input("data", kFloat, {int64_t{2}, int64_t{3}});
  b.input("indices", kInt64, {int64_t{1}, int64_t{2}});
  b.input("updates", kFloat, {int64_t{1}, int64_t{2}});
  auto* s = b.node("Scatter", {"data", "indices", "updates"}, {"y"}, "sc");
  attr_int(s, "axis", 1);
  b.output("y");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(g->node(0).op_type, "ScatterElements");
  EXPECT_EQ(shape_of(*g, "y"), "f32[2,3]");
}

TEST(Importer, RejectsNonDefaultDomains) {
  ModelBuilder b;
  auto* ml = b.model.add_opset_import();
  ml->set_domain("ai.onnx.ml");
  ml->set_version(3);
  b.input("x", kFloat, {int64_t{2}});
  b.node("LinearClassifier", {"x"}, {"a"}, "clf")->set_domain("ai.onnx.ml");
  b.node("FusedGemm", {"a"}, {"y"}, "fg")->set_domain("com.microsoft");
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("ai.onnx.ml"), HasSubstr("'clf'"),
                                          HasSubstr("com.microsoft"), HasSubstr("'fg'")));
}

// ai.onnx.preview.training version 1 is accepted for Adagrad, Adam and Momentum, next to
// default-domain ops of an older opset (which the converter upgrades) or alone, without a
// default opset.
TEST(Importer, AcceptsTrainingDomainOptimizers) {
  ModelBuilder b(13);
  auto* training = b.model.add_opset_import();
  training->set_domain("ai.onnx.preview.training");
  training->set_version(1);
  b.input("r", kFloat, {});
  b.input("t", kInt64, {});
  for (const char* name : {"x", "g", "v"}) b.input(name, kFloat, {std::string("N"), int64_t{3}});
  b.node("Relu", {"g"}, {"g_pos"}, "relu");
  auto* m = b.node("Momentum", {"r", "t", "x", "g_pos", "v"}, {"x_new", "v_new"}, "momentum");
  m->set_domain("ai.onnx.preview.training");
  attr_float(m, "alpha", 0.9f);
  attr_float(m, "beta", 0.1f);
  attr_float(m, "norm_coefficient", 0.0f);
  testing::attr_string(m, "mode", "standard");
  b.output("x_new");
  b.output("v_new");
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(shape_of(*g, "x_new"), "f32[N,3]");
  EXPECT_EQ(shape_of(*g, "v_new"), "f32[N,3]");

  ModelBuilder alone;
  alone.model.clear_opset_import();
  training = alone.model.add_opset_import();
  training->set_domain("ai.onnx.preview.training");
  training->set_version(1);
  alone.input("r", kFloat, {});
  alone.input("t", kInt64, {});
  for (const char* name : {"x", "g", "h"}) alone.input(name, kFloat, {int64_t{2}});
  alone.node("Adagrad", {"r", "t", "x", "g", "h"}, {"x_new", "h_new"}, "adagrad")
      ->set_domain("ai.onnx.preview.training");
  alone.output("x_new");
  alone.output("h_new");
  auto a = import(alone);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(shape_of(*a, "h_new"), "f32[2]");

  // Another version of the domain is refused, naming it.
  training->set_version(2);
  auto v2 = import(alone);
  ASSERT_FALSE(v2.ok());
  EXPECT_EQ(v2.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(v2.status().message(),
              AllOf(HasSubstr("ai.onnx.preview.training version 2"), HasSubstr("version 1")));
}

// Other ops of the training domain, and the optimizers' names in the default domain, are refused
// like any foreign operator.
TEST(Importer, RejectsOtherTrainingDomainOps) {
  ModelBuilder b;
  auto* training = b.model.add_opset_import();
  training->set_domain("ai.onnx.preview.training");
  training->set_version(1);
  b.input("x", kFloat, {int64_t{2}});
  b.node("Gradient", {"x"}, {"a"}, "grad")->set_domain("ai.onnx.preview.training");
  b.node("Adam", {"a"}, {"y"}, "adam");
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("non-default domains"),
                    HasSubstr("ai.onnx.preview.training (node 'grad' (Gradient))"),
                    HasSubstr("ai.onnx (node 'adam' (Adam))")));
}

TEST(Importer, DeclaredButUnusedDomainIsIgnored) {
  ModelBuilder b = conv_relu_model();
  auto* ml = b.model.add_opset_import();
  ml->set_domain("ai.onnx.ml");
  ml->set_version(3);
  EXPECT_TRUE(import(b).ok());
}

TEST(Importer, OpsetAboveTargetIsAnError) {
  ModelBuilder b(18);
  b.input("x", kFloat, {int64_t{2}});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("18"), HasSubstr("17")));
  ImportOptions options;
  options.target_opset = 18;
  auto ok = import(b, options);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->opset, 18);
}

TEST(Importer, MissingDefaultOpset) {
  ModelBuilder b;
  b.model.clear_opset_import();
  b.input("x", kFloat, {int64_t{2}});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto g = import(b);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("opset"));
}

// The MXNet / resnet50-v2-7 shape: opset 7, IR 3, BatchNormalization(spatial=1), weights also
// listed as graph inputs.
ModelBuilder opset7_model(bool ir3_with_weight_inputs, int64_t spatial = 1) {
  ModelBuilder b(7);
  b.input("x", kFloat, {std::string("N"), int64_t{3}, int64_t{8}, int64_t{8}});
  for (const char* name : {"scale", "bn_b", "mean", "var"}) b.initializer(name, {3}, {1, 1, 1});
  b.initializer("w", {4, 3, 3, 3}, std::vector<float>(108, 0.1f));
  b.initializer_i64("shape", {2}, {0, -1});
  b.initializer("gw", {10, 144}, std::vector<float>(1440, 0.1f));
  b.initializer("gb", {10}, std::vector<float>(10, 0.1f));
  if (ir3_with_weight_inputs) {
    b.model.set_ir_version(3);
    for (const auto& init : b.model.graph().initializer()) {
      std::vector<DimSpec> dims(init.dims().begin(), init.dims().end());
      b.input(init.name(), init.data_type(), dims);
    }
  }
  auto* bn = b.node("BatchNormalization", {"x", "scale", "bn_b", "mean", "var"}, {"bn"}, "bn0");
  attr_int(bn, "spatial", spatial);
  attr_float(bn, "epsilon", 1e-5f);
  auto* conv = b.node("Conv", {"bn", "w"}, {"c"}, "conv0");
  attr_ints(conv, "kernel_shape", {3, 3});
  b.node("Reshape", {"c", "shape"}, {"r"}, "reshape0");
  auto* gemm = b.node("Gemm", {"r", "gw", "gb"}, {"y"}, "gemm0");
  attr_int(gemm, "transB", 1);
  b.output("y", kFloat);
  return b;
}

TEST(Importer, UpgradesOpset7BatchNormModelTo17) {
  for (bool ir3 : {false, true}) {
    SCOPED_TRACE(ir3 ? "ir3, weights as inputs" : "ir8");
    auto g = import(opset7_model(ir3));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(g->opset, 17);
    ASSERT_EQ(g->inputs().size(), 1u);
    std::vector<std::string> ops;
    for (const auto& node : g->nodes()) ops.push_back(node.op_type);
    EXPECT_EQ(ops, (std::vector<std::string>{"BatchNormalization", "Conv", "Reshape", "Gemm"}));
    EXPECT_FALSE(g->node(0).attributes.has("spatial"));
    EXPECT_EQ(g->node(0).name, "bn0");
    EXPECT_EQ(shape_of(*g, "bn"), "f32[N,3,8,8]");
    EXPECT_EQ(shape_of(*g, "c"), "f32[N,4,6,6]");
    EXPECT_EQ(shape_of(*g, "r"), "f32[N,144]");
    EXPECT_EQ(shape_of(*g, "y"), "f32[N,10]");
  }
}

TEST(Importer, ConversionFailureNamesStepAndNode) {
  auto g = import(opset7_model(false, /*spatial=*/0));
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("opset 8 -> 9"), HasSubstr("spatial"),
                                          HasSubstr("node 'bn0' (BatchNormalization)")));
}

TEST(Importer, ModelAtTargetIsNotConverted) {
  ImportOptions options;
  options.target_opset = 7;
  auto g = import(opset7_model(false), options);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->opset, 7);
  EXPECT_TRUE(g->node(0).attributes.has("spatial"));
}

// Found by fuzz_onnx_import: a MaxPool model whose graph output 'Y' is never produced ('y' is).
// ONNX's version converter dereferenced the missing name and crashed; the wiring is now checked
// before conversion. Bytes:
// tests/fuzz/regressions/fuzz_onnx_import/onnx_undefined_graph_output.onnx.
TEST(Importer, UndefinedGraphOutputIsAnErrorBeforeOpsetConversion) {
  static const unsigned char kModel[] = {
      0x08, 0x07, 0x12, 0x0c, 0x62, 0x61, 0x63, 0x6b, 0x65, 0x6e, 0x64, 0x2d, 0x74, 0x65, 0x73,
      0x74, 0x3a, 0x8b, 0x01, 0x0a, 0x39, 0x0a, 0x01, 0x78, 0x12, 0x01, 0x79, 0x22, 0x07, 0x4d,
      0x61, 0x78, 0x50, 0x6f, 0x6f, 0x6c, 0x2a, 0x15, 0x0a, 0x0c, 0x6b, 0x65, 0x72, 0x6e, 0x65,
      0x6c, 0x5f, 0x73, 0x68, 0x61, 0x70, 0x65, 0x40, 0x03, 0x40, 0x03, 0xa0, 0x01, 0x07, 0x2a,
      0x11, 0x0a, 0x04, 0x70, 0x61, 0x64, 0x73, 0x40, 0x02, 0x40, 0x02, 0x40, 0x02, 0x40, 0x02,
      0xa0, 0x01, 0x07, 0x12, 0x14, 0x74, 0x65, 0x73, 0x74, 0x5f, 0x6d, 0x61, 0x78, 0x70, 0x6f,
      0x6f, 0x6c, 0x5f, 0x32, 0x64, 0x5f, 0x70, 0x61, 0x64, 0x73, 0x5a, 0x1b, 0x0a, 0x01, 0x78,
      0x12, 0x16, 0x0a, 0x14, 0x08, 0x01, 0x12, 0x10, 0x0a, 0x02, 0x08, 0x01, 0x0a, 0x02, 0x08,
      0x03, 0x0a, 0x02, 0x08, 0x1c, 0x0a, 0x02, 0x08, 0x1c, 0x62, 0x1b, 0x0a, 0x01, 0x59, 0x12,
      0x16, 0x0a, 0x14, 0x08, 0x01, 0x12, 0x10, 0x0a, 0x02, 0x08, 0x01, 0x0a, 0x02, 0x08, 0x03,
      0x0a, 0x02, 0x08, 0x1e, 0x0a, 0x02, 0x08, 0x1e, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x0c,
  };
  auto g = import_bytes(kModel, sizeof(kModel), "");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("graph output 'Y'"));
}

TEST(Importer, GarbageBytes) {
  std::string text = "this is not an ONNX model \x01\xff\xfe garbage";
  auto g = import_bytes(text.data(), text.size(), "");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(g.status().message(), HasSubstr("model bytes"));

  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(1 + rng() % 512, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    auto r = import_bytes(bytes.data(), bytes.size(), "");
    EXPECT_FALSE(r.ok());
  }
  auto empty = import_bytes("", 0, "");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kDataLoss);
}

TEST(Importer, EveryTruncationFails) {
  std::string bytes = conv_relu_model().bytes();
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    auto g = import_bytes(bytes.data(), cut, "");
    EXPECT_FALSE(g.ok()) << "cut at " << cut;
  }
  EXPECT_TRUE(import_bytes(bytes.data(), bytes.size(), "").ok());
}

TEST(Importer, TruncatedFileNamesThePath) {
  std::string dir = temp_dir();
  std::string path = dir + "/truncated.onnx";
  std::string bytes = conv_relu_model().bytes();
  write_bytes(path, bytes.substr(0, bytes.size() / 2));
  auto g = import_file(path);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(g.status().message(), HasSubstr(path));
  fs::remove_all(dir);
}

TEST(Importer, FileErrors) {
  auto missing = import_file("/nonexistent/dir/model.onnx");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/dir/model.onnx"));

  std::string dir = temp_dir();
  std::string path = dir + "/model.onnx";
  write_bytes(path, conv_relu_model().bytes());
  ImportOptions options;
  options.max_model_bytes = 16;
  auto big = import_file(path, options);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfRange);
  EXPECT_THAT(big.status().message(), HasSubstr(path));
  auto ok = import_file(path);
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
  fs::remove_all(dir);
}

TEST(Importer, SequenceInputsImportAndMapInputsAreUnimplemented) {
  ModelBuilder b(16);
  auto* input = b.graph().add_input();
  input->set_name("seq");
  auto* tensor =
      input->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
  tensor->set_elem_type(kFloat);
  tensor->mutable_shape()->add_dim()->set_dim_value(3);
  b.node("Identity", {"seq"}, {"y"});
  b.output("y");
  // The declared type survives the opset converter (16 -> 17), which drops it.
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Value& in = g->value(g->inputs()[0]);
  EXPECT_EQ(in.form, ValueForm::kSequence);
  EXPECT_EQ(in.dtype, DType::kF32);
  EXPECT_EQ(in.element_rank, 1);
  EXPECT_EQ(g->value(g->outputs()[0]).form, ValueForm::kSequence);

  ModelBuilder m(16);
  auto* map = m.graph().add_input();
  map->set_name("map");
  map->mutable_type()->mutable_map_type()->set_key_type(onnx::TensorProto::INT64);
  map->mutable_type()
      ->mutable_map_type()
      ->mutable_value_type()
      ->mutable_tensor_type()
      ->set_elem_type(kFloat);
  m.node("Identity", {"map"}, {"y"});
  m.output("y");
  auto refused = import(m);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(refused.status().message(),
              AllOf(HasSubstr("'map'"), HasSubstr("maps are unsupported")));
}

// Opset 6 broadcasting Add with an undeclared Constant operand: the converter needs ONNX shape
// inference to know the Constant's shape (PyTorch's early exports look like this).
// ONNX's 6 -> 7 broadcasting adapters refused any symbolic dim ("N Dimension is a param instead
// of an int"), so an old model with a dynamic batch did not import.
TEST(Importer, UpgradesOpset6BroadcastWithASymbolicBatch) {
  ModelBuilder b(6);
  b.input("x", kFloat, {std::string("N"), int64_t{3}});
  b.initializer("w", {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  b.initializer("bias", {4}, {0.5f, -1, 2, 0});
  b.initializer("shift", {4}, {1, 2, 3, 4});
  b.node("Relu", {"x"}, {"r"});
  attr_int(b.node("Gemm", {"r", "w", "bias"}, {"g"}, "gemm"), "broadcast", 1);
  attr_int(b.node("Add", {"g", "shift"}, {"y"}, "add"), "broadcast", 1);
  const std::vector<DimSpec> y_dims = {std::string("N"), int64_t{4}};
  b.output("y", kFloat, &y_dims);
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(shape_of(*g, "y"), "f32[N,4]");
  Tensor x = Tensor::create(DType::kF32, {2, 3}).value();
  const std::vector<float> xs = {1, -1, 2, 0.5f, 3, -2};
  std::copy(xs.begin(), xs.end(), x.mutable_values<float>().begin());
  std::vector<Tensor> inputs = {x};
  auto out = graph_eval::evaluate_graph(*g, inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  // relu(x) @ w + bias + shift, by hand.
  const std::vector<float> expected = {1 + 18 + 0.5f + 1, 2 + 20 - 1 + 2,       3 + 22 + 2 + 3,
                                       4 + 24 + 0 + 4,    0.5f + 15 + 0.5f + 1, 1 + 18 - 1 + 2,
                                       1.5f + 21 + 2 + 3, 2 + 24 + 0 + 4};
  auto got = (*out)[0].values<float>();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_FLOAT_EQ(got[i], expected[i]) << i;
}

TEST(Importer, UpgradesOpset6BroadcastWithConstant) {
  ModelBuilder b(6);
  b.model.set_ir_version(3);
  b.input("x", kFloat, {int64_t{2}, int64_t{3}});
  auto* c = b.node("Constant", {}, {"one"});
  auto* value = testing::add_attr(c, "value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(kFloat);
  value->mutable_t()->add_float_data(1.0f);
  auto* add = b.node("Add", {"x", "one"}, {"y"}, "add0");
  attr_int(add, "broadcast", 1);
  b.output("y", kFloat);
  auto g = import(b);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->opset, 17);
  EXPECT_FALSE(g->node(0).attributes.has("broadcast"));
  EXPECT_EQ(shape_of(*g, "y"), "f32[2,3]");
}

// The model zoo's ResNet-50 v2 (opset 7, BatchNormalization spatial=1, weights listed as inputs)
// when the fixtures are present ($KILN_MODEL_DIR, as the end-to-end tests use).
TEST(Importer, ZooResNet50V2UpgradesTo17) {
  const char* dir = std::getenv("KILN_MODEL_DIR");
  std::string path = std::string(dir ? dir : "") + "/resnet50-v2-7.onnx";
  if (dir == nullptr || !fs::exists(path)) GTEST_SKIP() << "set KILN_MODEL_DIR to the fixtures";
  auto g = import_file(path);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->opset, 17);
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(std::string(dtype_name(g->value(g->inputs()[0]).dtype)) +
                shape_to_string(g->value(g->inputs()[0]).shape),
            "f32[N,3,224,224]");
  const ir::Value& out = g->value(g->outputs()[0]);
  EXPECT_EQ(shape_to_string(out.shape), "[N,1000]");
  for (const auto& node : g->nodes()) EXPECT_FALSE(node.attributes.has("spatial")) << node.name;
}

// Real files from Debian's libonnx-testdata: every declared output shape must match inference.
TEST(Importer, BackendTestDataNodeModels) {
  if (!fs::exists(kNodeData)) GTEST_SKIP() << kNodeData << " not installed";
  struct Case {
    const char* name;
    const char* expected;  // "" to only compare with the declared output
  };
  const Case cases[] = {
      {"test_conv_with_strides_padding", "f32[1,1,4,3]"},
      {"test_gemm_default_no_bias", "f32[2,3]"},
      {"test_conv_with_strides_no_padding", "f32[1,1,3,2]"},
      {"test_relu", ""},
      {"test_add_bcast", ""},
      {"test_matmul_2d", ""},
      {"test_flatten_axis0", ""},
      {"test_globalaveragepool", ""},
      {"test_maxpool_2d_default", ""},
      {"test_averagepool_2d_default", ""},
      {"test_batchnorm_example", ""},
      {"test_softmax_axis_0", ""},
      {"../pytorch-operator/test_operator_mm", ""},  // opset 6, upgraded
      {"../pytorch-operator/test_operator_addconstant", "f64[2,3]"},
      {"../pytorch-converted/test_Conv2d", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = kNodeData + "/" + c.name + "/model.onnx";
    auto g = import_file(path);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    // The declared output type, via a second parse with the protobuf API.
    onnx::ModelProto model;
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(model.ParseFromIstream(&in));
    const auto& declared = model.graph().output(0).type().tensor_type().shape();
    Shape expected_shape;
    for (const auto& dim : declared.dim()) expected_shape.push_back(DimExpr(dim.dim_value()));
    const ir::Value& out = g->value(g->outputs()[0]);
    EXPECT_EQ(shape_to_string(out.shape), shape_to_string(expected_shape));
    if (*c.expected) {
      EXPECT_EQ(std::string(dtype_name(out.dtype)) + shape_to_string(out.shape), c.expected);
    }
  }
}

}  // namespace

// x[N,6] -> Reshape(x, shape) with `shape` a graph input (as in ONNX backend node tests).
ModelBuilder reshape_with_shape_input() {
  ModelBuilder b;
  b.input("x", kFloat, {std::string("N"), int64_t{6}});
  b.input("shape", kInt64, {int64_t{2}});
  b.node("Reshape", {"x", "shape"}, {"y"}, "reshape0");
  b.output("y");
  return b;
}

TEST(Importer, CompileTimeValueBindsShapeOperandsOnly) {
  std::vector<std::pair<size_t, std::string>> asked;
  ImportOptions options;
  options.compile_time_value = [&](size_t position,
                                   const std::string& name) -> StatusOr<std::optional<Tensor>> {
    asked.emplace_back(position, name);
    Tensor t = Tensor::create(DType::kI64, {2}).value();
    t.mutable_values<int64_t>()[0] = -1;
    t.mutable_values<int64_t>()[1] = 3;
    return std::optional<Tensor>(std::move(t));
  };
  auto g = import(reshape_with_shape_input(), options);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  // Only the shape operand was asked for, by its position among the runtime inputs.
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].first, 1u);
  EXPECT_EQ(asked[0].second, "shape");
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->value(g->inputs()[0]).name, "x");
  EXPECT_EQ(shape_of(*g, "y"), "f32[2*N,3]");
}

TEST(Importer, CompileTimeValueOfTheWrongTypeIsRefused) {
  ImportOptions options;
  options.compile_time_value = [](size_t, const std::string&) -> StatusOr<std::optional<Tensor>> {
    return std::optional<Tensor>(Tensor::create(DType::kI64, {3}).value());
  };
  auto g = import(reshape_with_shape_input(), options);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("graph input 'shape'"));
  EXPECT_THAT(g.status().message(), HasSubstr("dim 0 = 3"));
}

TEST(Importer, ShapeOperandLeftAsInputIsRefusedNamingIt) {
  auto g = import(reshape_with_shape_input());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().to_string(), HasSubstr("'shape' must be known at compile time"));
  EXPECT_THAT(g.status().to_string(), HasSubstr("reshape0"));
}
}  // namespace kiln::onnx_import
