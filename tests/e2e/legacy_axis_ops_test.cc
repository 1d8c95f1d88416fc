// Softmax, LogSoftmax and Hardmax from opsets 11 and 12 (which flatten the input to 2-D at
// `axis`), on inputs with symbolic dims and on intermediates whose shapes the model does not
// declare, imported at opset 17 and run at several sizes: against the old semantics worked out
// here in float64, and against ONNX Runtime running the original model when onnxruntime-node is
// installed. ONNX's version converter alone fails on these (Softmax) or changes their meaning
// (Hardmax).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "kiln/compiler/pipeline.h"
#include "kiln/onnx/importer.h"
#include "kiln/runtime/session.h"
#include "kiln/suite/ort_reference.h"
#include "kiln/tooling/comparator.h"
#include "tests/support/expect.h"
#include "tests/support/onnx/test_models.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using onnx_import::testing::attr_int;
using onnx_import::testing::DimSpec;
using onnx_import::testing::ModelBuilder;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

struct Case {
  std::string op;
  int64_t opset;
  std::optional<int64_t> axis;  // nullopt: the default, 1
  bool through_relu;            // the op reads an undeclared intermediate
};

std::string case_name(const Case& c) {
  return fmt::format("{}{}_axis{}{}", c.op, c.opset, c.axis ? std::to_string(*c.axis) : "default",
                     c.through_relu ? "_relu" : "");
}

// x[N,S,4] -> (Relu) -> op -> y.
std::string model_bytes(const Case& c) {
  ModelBuilder b(c.opset, "legacy");
  b.input("x", kFloat, {std::string("N"), std::string("S"), int64_t{4}});
  std::string in = "x";
  if (c.through_relu) {
    b.node("Relu", {"x"}, {"r"});
    in = "r";
  }
  auto* node = b.node(c.op, {in}, {"y"}, "legacy_op");
  if (c.axis) attr_int(node, "axis", *c.axis);
  b.output("y", kFloat);
  return b.bytes();
}

// The opset < 13 meaning, in float64: rows of prod(dims[axis:]) elements.
std::vector<double> old_semantics(const Case& c, const Tensor& x) {
  const ConcreteShape& dims = x.shape();
  int64_t axis = c.axis.value_or(1);
  if (axis < 0) axis += static_cast<int64_t>(dims.size());
  int64_t row = 1;
  for (size_t d = static_cast<size_t>(axis); d < dims.size(); ++d) row *= dims[d];
  auto in = x.values<float>();
  std::vector<double> out(in.size());
  for (size_t start = 0; start < in.size(); start += static_cast<size_t>(row)) {
    double max = -INFINITY;
    size_t arg = start;
    for (size_t i = start; i < start + row; ++i) {
      const double v = c.through_relu ? std::max(0.0, double{in[i]}) : in[i];
      if (v > max) max = v, arg = i;
    }
    double sum = 0;
    for (size_t i = start; i < start + row; ++i) {
      const double v = c.through_relu ? std::max(0.0, double{in[i]}) : in[i];
      sum += std::exp(v - max);
    }
    for (size_t i = start; i < start + row; ++i) {
      const double v = c.through_relu ? std::max(0.0, double{in[i]}) : in[i];
      if (c.op == "Softmax") out[i] = std::exp(v - max) / sum;
      if (c.op == "LogSoftmax") out[i] = v - max - std::log(sum);
      if (c.op == "Hardmax") out[i] = i == arg ? 1.0 : 0.0;
    }
  }
  return out;
}

bool ort_available() {
  const char* source = std::getenv("KILN_SOURCE_DIR");
  return source != nullptr &&
         fs::exists(fs::path(source) / "tools/ort/node_modules/onnxruntime-node");
}

TEST(LegacyAxisOps, ImportedAtOpset17KeepTheirOldMeaning) {
  std::vector<Case> cases;
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    for (int64_t opset : {11, 12}) {
      for (std::optional<int64_t> axis :
           {std::optional<int64_t>{}, std::optional<int64_t>{0}, std::optional<int64_t>{2},
            std::optional<int64_t>{-1}, std::optional<int64_t>{-2}}) {
        for (bool relu : {false, true}) cases.push_back({op, opset, axis, relu});
      }
    }
  }
  const std::string dir = testing::make_temp_dir("legacy_axis_ops");
  const bool with_ort = ort_available();
  if (!with_ort)
    std::fprintf(stderr, "onnxruntime-node is not installed: checking against float64 only\n");
  suite::OrtRunner ort;
  if (with_ort) ort.script = std::string(std::getenv("KILN_SOURCE_DIR")) + "/tools/ort/run_ort.js";
  ort.cache_dir = dir + "/ort-cache";
  for (const Case& c : cases) {
    SCOPED_TRACE(case_name(c));
    const std::string bytes = model_bytes(c);
    auto graph = onnx_import::import_bytes(bytes.data(), bytes.size(), "", {});
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    auto contents = compiler::compile(std::move(graph).value(), {});
    ASSERT_TRUE(contents.ok()) << contents.status().to_string();
    auto session = runtime::Session::create(
        std::make_shared<const module::ModuleContents>(std::move(contents).value()), {"cpu", 1});
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const std::string model_path = dir + "/" + case_name(c) + ".onnx";
    {
      std::ofstream out(model_path, std::ios::binary);
      out << bytes;
    }
    for (ConcreteShape dims :
         {ConcreteShape{1, 1, 4}, ConcreteShape{2, 3, 4}, ConcreteShape{3, 5, 4}}) {
      SCOPED_TRACE(fmt::format("x {}x{}x{}", dims[0], dims[1], dims[2]));
      Tensor x = Tensor::create(DType::kF32, dims).value();
      std::mt19937 rng(static_cast<unsigned>(dims[0] * 31 + dims[1]));
      std::uniform_real_distribution<float> dist(-3.f, 3.f);
      for (float& v : x.mutable_values<float>()) v = dist(rng);
      std::vector<Tensor> inputs = {x};
      auto out = (*session)->run(inputs);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      ASSERT_EQ(out->size(), 1u);
      const Tensor& y = (*out)[0];
      ASSERT_EQ(y.shape(), dims);
      const std::vector<double> expected = old_semantics(c, x);
      ASSERT_TRUE(testing::all_close(y, dims, expected, {.atol = 1e-6, .rtol = 1e-5}));
      // ONNX Runtime once per model of opset 12 (opset 11 takes the same path in kiln), at
      // the middle size: each call starts node.
      if (!with_ort || c.opset != 12 || dims[0] != 2) continue;
      std::vector<suite::NamedTensor> named = {{"x", x}};
      std::vector<suite::OutputType> types = {{"y", DType::kF32}};
      auto reference = suite::onnxruntime_reference(model_path, named, types, ort);
      ASSERT_TRUE(reference.ok()) << reference.status().to_string();
      auto result = compare_tensors(y, (*reference)[0], Tolerance{1e-6, 1e-5});
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      EXPECT_TRUE(result->passed())
          << "vs ONNX Runtime: " << format_compare_result(*result, Tolerance{1e-6, 1e-5});
    }
  }
}

}  // namespace
}  // namespace kiln
