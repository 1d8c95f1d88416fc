// The triage engine on a small graph built in code: statistics, per-layer tolerance, the mapping of
// dispatch outputs to ONNX values, the module/model match check, dispatch selectors, running one
// dispatch alone, and both verdicts of the at-fault decision (a faulty dispatch; a dispatch fed
// values that were already off).
#include "kiln/triage/triage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "kiln/compiler/pipeline.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/triage/isolate.h"
#include "kiln/triage/repro.h"
#include "kiln/triage/tracer.h"

namespace kiln::triage {
namespace {

Tensor values(ConcreteShape shape, float scale, float offset) {
  Tensor t = Tensor::create(DType::kF32, std::move(shape)).value();
  auto v = t.mutable_values<float>();
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = scale * std::sin(0.7f * static_cast<float>(i)) + offset;
  return t;
}

// x[N,3,6,6] -> conv (4 out, 3x3, pad 1) -> relu -> gap -> flatten.
ir::Graph small_graph(const std::string& output = "f") {
  ir::Graph g;
  g.name = "small";
  const ir::ValueId x =
      g.add_input("x", DType::kF32, {DimExpr::symbol("N"), DimExpr(3), DimExpr(6), DimExpr(6)});
  const ir::ValueId w = g.add_constant("w", values({4, 3, 3, 3}, 0.3f, 0.0f));
  const ir::ValueId b = g.add_constant("b", values({4}, 0.1f, 0.2f));
  auto value = [&](const std::string& name) {
    return g.add_value(ir::Value{name, DType::kF32, {}, std::nullopt, std::nullopt});
  };
  const ir::ValueId c = value("c"), r = value("r"), gp = value("g"), f = value(output);
  ir::Node conv{"conv", "Conv", {x, w, b}, {c}, {}, {}};
  conv.attributes.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  g.add_node(std::move(conv));
  g.add_node(ir::Node{"relu", "Relu", {c}, {r}, {}, {}});
  g.add_node(ir::Node{"gap", "GlobalAveragePool", {r}, {gp}, {}, {}});
  g.add_node(ir::Node{"flat", "Flatten", {gp}, {f}, {}, {}});
  g.add_output(f);
  KILN_CHECK(graph_eval::infer_graph(g).ok());
  return g;
}

std::shared_ptr<const module::ModuleContents> compile_graph(const ir::Graph& g) {
  auto contents = compiler::compile(g, {});
  KILN_CHECK(contents.ok());
  return std::make_shared<const module::ModuleContents>(std::move(contents).value());
}

class SmallGraph : public ::testing::Test {
 protected:
  ir::Graph graph_ = small_graph();
  std::shared_ptr<const module::ModuleContents> module_ = compile_graph(graph_);
  std::vector<Tensor> inputs_ = {values({2, 3, 6, 6}, 1.0f, 0.1f)};
};

TEST(TensorStats, CountsNonFiniteAndSummarizesTheRest) {
  Tensor t = Tensor::create(DType::kF32, {5}).value();
  auto v = t.mutable_values<float>();
  v[0] = 1;
  v[1] = -2;
  v[2] = std::numeric_limits<float>::quiet_NaN();
  v[3] = -std::numeric_limits<float>::infinity();
  v[4] = 3;
  TensorStats s = compute_stats(t);
  EXPECT_EQ(s.count, 5);
  EXPECT_EQ(s.nan, 1);
  EXPECT_EQ(s.inf, 1);
  EXPECT_EQ(s.min, -2);
  EXPECT_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.mean, 2.0 / 3.0);
  EXPECT_EQ(s.max_abs, 3);
  EXPECT_EQ(format_stats(s), "NaN 1/5, Inf 1/5, min -2, max 3, mean 0.666667");
}

TEST(LayerTolerance, ScalesWithTheLayerAndRejectsBadSettings) {
  auto t = layer_tolerance({1e-5, 1e-4, 1e-3}, 8.0);
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->atol, 1e-5 + 8e-3);
  EXPECT_DOUBLE_EQ(t->rtol, 1e-4);
  EXPECT_FALSE(t->nan_equal);
  EXPECT_FALSE(layer_tolerance({-1, 0, 0}, 1).ok());
  EXPECT_FALSE(layer_tolerance({0, std::nan(""), 0}, 1).ok());
}

TEST_F(SmallGraph, DispatchOutputsMapToTheLastOriginsOutput) {
  ASSERT_EQ(module_->dispatches.size(), 3u);
  EXPECT_EQ(module_->dispatches[0].origins, (std::vector<std::string>{"conv", "relu"}));
  const std::vector<std::string> names = reference_names(*module_, &graph_);
  EXPECT_EQ(names[module_->dispatches[0].outputs[0]], "r");
  EXPECT_EQ(names[module_->dispatches[1].outputs[0]], "g");
  EXPECT_EQ(names[module_->dispatches[2].outputs[0]], "f");
}

TEST_F(SmallGraph, ModuleMustComeFromTheModel) {
  EXPECT_TRUE(check_module_matches_graph(*module_, graph_, "m").ok());
  auto other = compile_graph(small_graph("logits"));
  Status mismatch = check_module_matches_graph(*other, graph_, "--against module 'o.kmod'");
  EXPECT_EQ(mismatch.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.message().find("--against module 'o.kmod' was not built from this model"),
            std::string::npos);
  EXPECT_NE(mismatch.message().find("[logits]"), std::string::npos) << mismatch.message();

  module::ModuleContents renamed = *module_;
  renamed.dispatches[1].origins = {"pool_from_elsewhere"};
  Status unknown = check_module_matches_graph(renamed, graph_, "m");
  EXPECT_NE(unknown.message().find("'pool_from_elsewhere'"), std::string::npos)
      << unknown.message();
}

TEST_F(SmallGraph, FindDispatchByIndexNameOrNode) {
  EXPECT_EQ(find_dispatch(*module_, "1").value(), 1);
  EXPECT_EQ(find_dispatch(*module_, "relu").value(), 0);
  EXPECT_EQ(find_dispatch(*module_, module_->dispatches[2].name).value(), 2);
  EXPECT_NE(find_dispatch(*module_, "3").status().message().find("out of range"),
            std::string::npos);
  EXPECT_NE(find_dispatch(*module_, "nope").status().message().find("'nope'"), std::string::npos);
}

TEST_F(SmallGraph, OneDispatchAloneEqualsItsPartOfTheWholeRun) {
  auto session = runtime::Session::create(module_, {"cpu", 1});
  ASSERT_TRUE(session.ok());
  auto whole = run_module_reference(**session, inputs_, "whole");
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  auto bindings = (*session)->bind(inputs_).value();
  std::vector<Tensor> fed = {whole->values.at("r")};
  auto alone = run_dispatch_alone(*module_, 1, fed, bindings, {"cpu", 1});
  ASSERT_TRUE(alone.ok()) << alone.status().to_string();
  ASSERT_EQ(alone->size(), 1u);
  EXPECT_TRUE(bitwise_equal((*alone)[0], whole->values.at("g")));
  std::vector<Tensor> conv_inputs = {inputs_[0], Tensor(), Tensor()};  // weights from the module
  auto conv = run_dispatch_alone(*module_, 0, conv_inputs, bindings, {"cpu", 1});
  ASSERT_TRUE(conv.ok()) << conv.status().to_string();
  EXPECT_TRUE(bitwise_equal((*conv)[0], whole->values.at("r")));
  EXPECT_FALSE(run_dispatch_alone(*module_, 1, {}, bindings, {"cpu", 1}).ok());
  EXPECT_FALSE(run_dispatch_alone(*module_, 7, fed, bindings, {"cpu", 1}).ok());
}

TEST_F(SmallGraph, CleanFaultyAndMisfedVerdicts) {
  auto reference = evaluate_reference(graph_, inputs_);
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  TriageOptions options;
  options.session.threads = 1;
  Triage triage(module_, &graph_, options);

  auto clean = triage.run(inputs_, *reference);
  ASSERT_TRUE(clean.ok()) << clean.status().to_string();
  EXPECT_TRUE(clean->clean());
  EXPECT_EQ(clean->layers.size(), 3u);

  TriageOptions faulted = options;
  faulted.fault = parse_fault("dispatch:gap:inf").value();
  Triage faulty_triage(module_, &graph_, faulted);
  auto faulty = faulty_triage.run(inputs_, *reference);
  ASSERT_TRUE(faulty.ok()) << faulty.status().to_string();
  ASSERT_TRUE(faulty->first_divergence);
  EXPECT_EQ(faulty->first_divergence->dispatch, 1);
  EXPECT_TRUE(faulty->first_divergence->at_fault);
  EXPECT_EQ(faulty->layers[1].result.actual_inf, 8);
  EXPECT_EQ(fault_for_repro(faulted.fault, *module_, 1), "dispatch:gap:inf");
  EXPECT_EQ(fault_for_repro(faulted.fault, *module_, 0), std::nullopt);
  EXPECT_EQ(fault_for_repro(std::nullopt, *module_, 1), std::nullopt);

  // A reference whose relu output is off by less than that layer's tolerance but more than the
  // pool's: kiln's pool diverges, yet alone on the reference's input it matches.
  TriageOptions strict = options;
  strict.tolerance = {0, 0, 0.01};
  Triage strict_triage(module_, &graph_, strict);
  const double r_max = compute_stats(reference->values.at("r")).max_abs;
  const double g_max = compute_stats(reference->values.at("g")).max_abs;
  ASSERT_LT(g_max * 2, r_max);
  const auto delta = static_cast<float>(0.01 * (r_max + g_max) / 2);
  ReferenceValues misfed = *reference;
  Tensor r = reference->values.at("r").clone();
  for (float& x : r.mutable_values<float>()) x += delta;
  misfed.values["r"] = r;
  const std::vector<Tensor> gap_in = {r};
  auto g = graph_eval::evaluate_node(graph_, 2, gap_in);
  ASSERT_TRUE(g.ok());
  misfed.values["g"] = (*g)[0];
  misfed.values["f"] = (*g)[0].reshaped({2, 4});
  auto result = strict_triage.run(inputs_, misfed);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  ASSERT_TRUE(result->first_divergence);
  EXPECT_TRUE(result->layers[0].passed());
  EXPECT_EQ(result->first_divergence->dispatch, 1);
  EXPECT_FALSE(result->first_divergence->at_fault);
  EXPECT_TRUE(result->first_divergence->isolated_run);
  EXPECT_NE(result->first_divergence->explanation.find("'r'"), std::string::npos)
      << result->first_divergence->explanation;
}

}  // namespace
}  // namespace kiln::triage
