// Which dims are known never changes the bits. For graphs that compute values from input sizes
// (ConstantOfShape, Range, Expand built from Shape, feeding float ops and Convs, and NonZero over
// such values), each written with a dynamic batch N and with N written as B in the file:
//   - `kiln compile --bind N=B` (binding at import), the static model, and binding after import
//     (CompileOptions::bind, what `kiln test-suite` does) give the same module file, byte for byte;
//   - the dynamic module run at N=B gives the bound module's outputs bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>

#include "kiln/compiler/model_loader.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/ir/text_format.h"
#include "kiln/module/module.h"
#include "kiln/onnx/importer.h"
#include "kiln/runtime/session.h"
#include "tests/support/expect.h"
#include "tests/support/onnx/test_models.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using onnx_import::testing::attr_int;
using onnx_import::testing::attr_ints;
using onnx_import::testing::DimSpec;
using onnx_import::testing::ModelBuilder;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kInt64 = onnx::TensorProto::INT64;

// Builds a model whose batch dim is `batch` ("N", or a number for the static form).
using testing::expect_same_bits;
using ModelFn = std::function<void(ModelBuilder&, const DimSpec& batch)>;

void fill_value(onnx::NodeProto* node, int32_t type, double value) {
  auto* a = onnx_import::testing::add_attr(node, "value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto* t = a->mutable_t();
  t->set_data_type(type);
  t->add_dims(1);
  if (type == kFloat)
    t->add_float_data(static_cast<float>(value));
  else
    t->add_int64_data(static_cast<int64_t>(value));
}

std::vector<float> ramp(size_t count, float start, float step) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = start + step * static_cast<float>(i % 17) - 0.03f * static_cast<float>(i % 5);
  return v;
}

// x[N,3,6,6]. A tensor of x's shape filled by ConstantOfShape, scaled per channel, goes through
// a 3x3 Conv (the bound compile could otherwise fold it in float64); the Conv of x takes weights
// multiplied by N/N (constant weights in a bound compile would pick another kernel).
void conv_from_constant_of_shape(ModelBuilder& b, const DimSpec& batch) {
  b.input("x", kFloat, {batch, int64_t{3}, int64_t{6}, int64_t{6}});
  b.initializer("scale", {1, 3, 1, 1}, {1.1f, 0.7f, 1.3f});
  b.initializer("w", {4, 3, 3, 3}, ramp(4 * 3 * 3 * 3, -0.4f, 0.05f));
  b.initializer("bias", {4}, {0.1f, -0.2f, 0.3f, 0.05f});
  b.initializer_i64("zero", {}, {0});
  b.node("Shape", {"x"}, {"s"});
  fill_value(b.node("ConstantOfShape", {"s"}, {"c"}), kFloat, 0.37);
  b.node("Mul", {"c", "scale"}, {"m"});
  auto* conv_c = b.node("Conv", {"m", "w", "bias"}, {"hc"}, "conv_c");
  attr_ints(conv_c, "pads", {1, 1, 1, 1});
  b.node("Gather", {"s", "zero"}, {"n"});
  b.node("Div", {"n", "n"}, {"one"});
  auto* cast = b.node("Cast", {"one"}, {"one_f"});
  attr_int(cast, "to", kFloat);
  b.node("Mul", {"w", "one_f"}, {"w_n"});
  auto* conv_x = b.node("Conv", {"x", "w_n", "bias"}, {"hx"}, "conv_x");
  attr_ints(conv_x, "pads", {1, 1, 1, 1});
  b.node("Add", {"hc", "hx"}, {"y"});
  b.output("y");
}

// x[N,5]: y = (Cast(Range(0, N)) unsqueezed) * Expand(e, Shape(x)) / 3 + x; a float chain on
// ConstantOfShape of [N] (Sqrt of a sum); MatMul, Exp and ReduceMean of the values made from N.
void range_and_expand(ModelBuilder& b, const DimSpec& batch) {
  b.input("x", kFloat, {batch, int64_t{5}});
  b.initializer("e", {1, 5}, {0.1f, 0.2f, 0.3f, 0.7f, 1.9f});
  b.initializer("three", {}, {3.0f});
  b.initializer_i64("zero", {}, {0});
  b.initializer_i64("one", {}, {1});
  b.initializer_i64("axes", {1}, {1});
  b.initializer_i64("first", {1}, {0});
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "zero"}, {"n"});
  b.node("Range", {"zero", "n", "one"}, {"r"});
  auto* cast = b.node("Cast", {"r"}, {"rf"});
  attr_int(cast, "to", kFloat);
  b.node("Unsqueeze", {"rf", "axes"}, {"ru"});
  b.node("Expand", {"e", "s"}, {"ex"});
  b.node("Mul", {"ru", "ex"}, {"p"});
  b.node("Div", {"p", "three"}, {"q"});
  b.node("Add", {"q", "x"}, {"y"});
  b.node("Gather", {"s", "first"}, {"n1"});
  fill_value(b.node("ConstantOfShape", {"n1"}, {"c"}), kFloat, 0.1);
  b.node("Add", {"c", "three"}, {"c3"});
  b.node("Sqrt", {"c3"}, {"z"});
  b.initializer("mat", {5, 3}, ramp(15, -0.9f, 0.13f));
  b.initializer("seven", {}, {7.0f});
  b.node("MatMul", {"p", "mat"}, {"mm"});
  b.node("Div", {"rf", "seven"}, {"r7"});
  b.node("Exp", {"r7"}, {"er"});
  auto* mean = b.node("ReduceMean", {"ex"}, {"me"});
  attr_ints(mean, "axes", {1});
  b.output("y");
  b.output("z");
  b.output("mm");
  b.output("er");
  b.output("me");
}

// The reported bug: NonZero(Greater(ConstantOfShape(Shape(x)), 0)) compiled dynamically but not
// bound or static. Also NonZero of an integer ConstantOfShape, which a bound compile folds.
void nonzero_of_constant_of_shape(ModelBuilder& b, const DimSpec& batch) {
  b.input("x", kFloat, {batch, int64_t{4}});
  b.initializer("zero_f", {}, {0.0f});
  b.node("Shape", {"x"}, {"s"});
  b.node("ConstantOfShape", {"s"}, {"c0"});  // f32 zeros
  b.node("Greater", {"c0", "zero_f"}, {"g0"});
  b.node("NonZero", {"g0"}, {"none"});
  fill_value(b.node("ConstantOfShape", {"s"}, {"c1"}), kFloat, 2.0);
  b.node("Greater", {"c1", "zero_f"}, {"g1"});
  b.node("NonZero", {"g1"}, {"all"});
  fill_value(b.node("ConstantOfShape", {"s"}, {"ci"}), kInt64, 1);
  b.node("NonZero", {"ci"}, {"all_i"});
  b.node("Relu", {"x"}, {"rx"});
  b.output("none");
  b.output("all");
  b.output("all_i");
  b.output("rx");
}

std::string model_bytes(const ModelFn& build, const DimSpec& batch) {
  ModelBuilder b(17, "sizes");
  build(b, batch);
  return b.bytes();
}

ir::Graph import(const std::string& bytes, std::map<std::string, int64_t> bind = {}) {
  onnx_import::ImportOptions options;
  options.bind = std::move(bind);
  auto graph = onnx_import::import_bytes(bytes.data(), bytes.size(), "", options);
  EXPECT_TRUE(graph.ok()) << graph.status().to_string();
  return graph.ok() ? std::move(graph).value() : ir::Graph{};
}

std::shared_ptr<const module::ModuleContents> compile_module(
    ir::Graph graph, compiler::CompileOptions options = {}) {
  auto contents = compiler::compile(std::move(graph), options);
  EXPECT_TRUE(contents.ok()) << contents.status().to_string();
  if (!contents.ok()) return nullptr;
  return std::make_shared<const module::ModuleContents>(std::move(contents).value());
}

std::string file_bytes(const module::ModuleContents& contents, const std::string& path) {
  Status written = module::write_module(contents, path);
  EXPECT_TRUE(written.ok()) << written.to_string();
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<Tensor> run(std::shared_ptr<const module::ModuleContents> m, const Tensor& x) {
  auto session = runtime::Session::create(std::move(m), {"cpu", 1});
  EXPECT_TRUE(session.ok()) << session.status().to_string();
  if (!session.ok()) return {};
  std::vector<Tensor> inputs = {x};
  auto out = (*session)->run(inputs);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? std::move(out).value() : std::vector<Tensor>{};
}

void check_model(const std::string& name, const ModelFn& build, ConcreteShape x_dims) {
  const std::string dynamic_bytes = model_bytes(build, std::string("N"));
  ir::Graph dynamic_graph = import(dynamic_bytes);
  auto dynamic = compile_module(dynamic_graph);
  ASSERT_NE(dynamic, nullptr) << name;
  const std::string dir = testing::make_temp_dir("bind_static_" + name);
  for (int64_t batch : {1, 3, 11}) {
    SCOPED_TRACE(fmt::format("{} at N={}", name, batch));
    auto bound = compile_module(import(dynamic_bytes, {{"N", batch}}));
    auto made_static = compile_module(import(model_bytes(build, batch)));
    compiler::CompileOptions late;
    late.bind = {{"N", batch}};
    auto bound_late = compile_module(dynamic_graph, late);
    ASSERT_TRUE(bound && made_static && bound_late);
    const std::string bound_file = file_bytes(*bound, dir + "/bound.kmod");
    EXPECT_EQ(bound_file, file_bytes(*made_static, dir + "/static.kmod"))
        << "--bind vs static module bytes";
    EXPECT_EQ(bound_file, file_bytes(*bound_late, dir + "/late.kmod"))
        << "--bind vs bound after import";

    x_dims[0] = batch;
    Tensor x = Tensor::create(DType::kF32, x_dims).value();
    std::mt19937 rng(static_cast<unsigned>(batch) * 7919u);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (float& v : x.mutable_values<float>()) v = dist(rng);
    const std::vector<Tensor> from_dynamic = run(dynamic, x);
    expect_same_bits(from_dynamic, run(bound, x), "dynamic vs --bind");
    expect_same_bits(from_dynamic, run(made_static, x), "dynamic vs static");
  }
}

TEST(BindStatic, ConvOfConstantOfShapeGivesTheSameBits) {
  check_model("conv", conv_from_constant_of_shape, {1, 3, 6, 6});
}

TEST(BindStatic, RangeAndExpandFromShapeGiveTheSameBits) {
  check_model("range", range_and_expand, {1, 5});
}

TEST(BindStatic, NonZeroOfConstantOfShapeCompilesEveryWayAndAgrees) {
  check_model("nonzero", nonzero_of_constant_of_shape, {1, 4});
}

// x[N,4,8] -> MatMul(w) -> Add(bias) -> Add(x) -> Relu -> MatMul(v) -> Add(bias2): the bias and
// residual Adds that passes::fuse_matmul folds into the MatMuls (kiln_bias, kiln_residual).
void matmul_bias_residual(ModelBuilder& b, const DimSpec& batch) {
  b.input("x", kFloat, {batch, int64_t{4}, int64_t{8}});
  b.initializer("w", {8, 8}, ramp(64, -0.7f, 0.021f));
  b.initializer("bias", {8}, ramp(8, -0.3f, 0.07f));
  b.initializer("v", {8, 3}, ramp(24, 0.5f, -0.043f));
  b.initializer("bias2", {1, 3}, {0.25f, -1.5f, 0.125f});
  b.node("MatMul", {"x", "w"}, {"p"});
  b.node("Add", {"bias", "p"}, {"q"});
  b.node("Add", {"q", "x"}, {"h"});
  b.node("Relu", {"h"}, {"r"});
  b.node("MatMul", {"r", "v"}, {"p2"});
  b.node("Add", {"p2", "bias2"}, {"y"});
  b.output("y");
}

TEST(BindStatic, MatMulWithFoldedBiasAndResidualGivesTheSameBits) {
  check_model("matmul_bias_residual", matmul_bias_residual, {1, 4, 8});
}

// x[N,S] -> x[:, 1:] -> Relu: a slice that is not a whole symbolic dim, which import may refuse
// while the sizes are unknown.
void slice_of_symbolic_dim(ModelBuilder& b, const DimSpec& batch) {
  b.input("x", kFloat, {batch, std::string("S")});
  b.initializer_i64("starts", {1}, {1});
  b.initializer_i64("ends", {1}, {INT64_MAX});
  b.initializer_i64("axes", {1}, {1});
  b.node("Slice", {"x", "starts", "ends", "axes"}, {"sliced"});
  b.node("Relu", {"sliced"}, {"y"});
  b.output("y");
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// `kiln compile --bind` binds as the model loads (compiler::load_model), before import decides
// any shape: what compiles with the dims written into the file compiles with them bound, to the
// same module. For a .kir file too.
TEST(BindStatic, BindingAtLoadEqualsTheStaticModel) {
  const std::string dir = testing::make_temp_dir("bind_at_load");
  const std::string dynamic_path = dir + "/slice.onnx";
  write_file(dynamic_path, [] {
    ModelBuilder b(17, "sizes");
    slice_of_symbolic_dim(b, std::string("N"));
    return b.bytes();
  }());
  ModelBuilder fixed(17, "sizes");
  fixed.input("x", kFloat, {int64_t{2}, int64_t{5}});
  fixed.initializer_i64("starts", {1}, {1});
  fixed.initializer_i64("ends", {1}, {INT64_MAX});
  fixed.initializer_i64("axes", {1}, {1});
  fixed.node("Slice", {"x", "starts", "ends", "axes"}, {"sliced"});
  fixed.node("Relu", {"sliced"}, {"y"});
  fixed.output("y");
  auto made_static = compile_module(import(fixed.bytes()));
  ASSERT_NE(made_static, nullptr);

  onnx_import::ImportOptions options;
  options.bind = {{"N", 2}, {"S", 5}};
  auto loaded = compiler::load_model(dynamic_path, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto bound = compile_module(std::move(loaded).value());
  ASSERT_NE(bound, nullptr);
  EXPECT_EQ(file_bytes(*bound, dir + "/bound.kmod"),
            file_bytes(*made_static, dir + "/static.kmod"));

  // The same through a .kir written from the dynamic conv model.
  const std::string kir = dir + "/conv.kir";
  ASSERT_TRUE(
      ir::write_kir(import(model_bytes(conv_from_constant_of_shape, std::string("N"))), kir).ok());
  onnx_import::ImportOptions bind_n;
  bind_n.bind = {{"N", 3}};
  auto from_kir = compiler::load_model(kir, bind_n);
  ASSERT_TRUE(from_kir.ok()) << from_kir.status().to_string();
  auto kir_bound = compile_module(std::move(from_kir).value());
  auto conv_static = compile_module(import(model_bytes(conv_from_constant_of_shape, int64_t{3})));
  ASSERT_TRUE(kir_bound && conv_static);
  EXPECT_EQ(file_bytes(*kir_bound, dir + "/kir.kmod"),
            file_bytes(*conv_static, dir + "/conv.kmod"));

  // A name that is no symbol of the model is an error naming it.
  onnx_import::ImportOptions unknown;
  unknown.bind = {{"M", 2}};
  auto refused = compiler::load_model(kir, unknown);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().to_string().find("'M'"), std::string::npos)
      << refused.status().to_string();
}

}  // namespace
}  // namespace kiln
