// kiln triage against injected faults, at the library level so that one float64 reference
// evaluation per model and batch serves every case: for both ResNet-50 replicas with a dynamic
// batch, at batch 1 and 3, a fault of each kind (nan, inf, zero, perturb) injected in turn at five
// places (the first conv, a BN-folded conv in the middle, a conv with a fused residual Add, the
// global pool, the final Gemm) must be pinned on exactly that dispatch and its ONNX nodes, with
// the dispatch found at fault when re-run alone. Without a fault every layer is within tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <ostream>
#include <set>

#include "kiln/compiler/model_loader.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/triage/reference.h"
#include "kiln/triage/triage.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::model_path;
using testing::read_f32_prefix;

struct Place {
  std::string what;
  int32_t dispatch;
};

// One model, compiled once with a dynamic batch, with its unoptimized import kept for the
// reference and for the ONNX node op types.
struct Model {
  ir::Graph graph;
  std::shared_ptr<const module::ModuleContents> module;
  std::map<std::string, std::string> op_of;  // ONNX node -> op type

  bool has_origin_op(const module::Dispatch& d, const std::string& op) const {
    return std::any_of(d.origins.begin(), d.origins.end(),
                       [&](const std::string& n) { return op_of.at(n) == op; });
  }

  // The five places of the issue, found from the dispatches' op types and origins.
  std::vector<Place> places() const {
    const auto& ds = module->dispatches;
    const auto n = static_cast<int32_t>(ds.size());
    std::optional<int32_t> first_conv, bn_conv, residual_conv, pool, gemm;
    auto closer_to_middle = [&](std::optional<int32_t> best, int32_t d) {
      return !best || std::abs(d - n / 2) < std::abs(*best - n / 2);
    };
    for (int32_t d = 0; d < n; ++d) {
      const module::Dispatch& dispatch = ds[d];
      if (dispatch.op_type == "Conv") {
        if (!first_conv) first_conv = d;
        const bool bn = has_origin_op(dispatch, "BatchNormalization");
        const bool add = has_origin_op(dispatch, "Add");
        if (bn && !add && d != *first_conv && closer_to_middle(bn_conv, d)) bn_conv = d;
        if (add && closer_to_middle(residual_conv, d)) residual_conv = d;
      }
      if (dispatch.op_type == "GlobalAveragePool") pool = d;
      if (dispatch.op_type == "Gemm") gemm = d;
    }
    EXPECT_TRUE(first_conv && bn_conv && residual_conv && pool && gemm);
    return {{"first conv", first_conv.value_or(0)},
            {"BN-folded conv in the middle", bn_conv.value_or(0)},
            {"conv with a fused residual Add", residual_conv.value_or(0)},
            {"global pool", pool.value_or(0)},
            {"final Gemm", gemm.value_or(0)}};
  }
};

const Model& model(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto& m = models[name];
  if (!m) {
    m = std::make_unique<Model>();
    auto graph = compiler::load_model(model_path(name + ".onnx"), {});
    KILN_CHECK(graph.ok());
    m->graph = std::move(graph).value();
    for (const ir::Node& node : m->graph.nodes()) m->op_of[node.name] = node.op_type;
    auto contents = compiler::compile(m->graph, {});
    KILN_CHECK(contents.ok());
    m->module = std::make_shared<const module::ModuleContents>(std::move(contents).value());
  }
  return *m;
}

struct Case {
  std::string model;
  int64_t batch;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " at batch " << c.batch; }

class TriageFaults : public ::testing::TestWithParam<Case> {};

// The selector of each fault, varied over the forms KILN_FAULT takes (planted by triage's fault
// device decorator: TriageOptions::fault).
std::string selector(const module::ModuleContents& module, int32_t d, size_t variant) {
  switch (variant % 3) {
    case 0: return std::to_string(d);
    case 1: return module.dispatches[d].name;
    default: return module.dispatches[d].origins.back();
  }
}

TEST_P(TriageFaults, NamesTheFaultyDispatchAndFindsItAtFault) {
  const Case& c = GetParam();
  const Model& m = model(c.model);
  std::vector<Tensor> inputs = {
      read_f32_prefix(model_path("input_b8.bin"), {c.batch, 3, 224, 224})};
  auto reference = triage::evaluate_reference(m.graph, inputs);
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  triage::TriageOptions options;
  options.session.threads = 1;               // ctest runs tests side by side
  options.compare_after_divergence = false;  // the CLI tests cover the full comparison
  triage::Triage triage(m.module, &m.graph, options);

  {
    SCOPED_TRACE("no fault");
    auto clean = triage.run(inputs, *reference);
    ASSERT_TRUE(clean.ok()) << clean.status().to_string();
    EXPECT_TRUE(clean->clean());
    EXPECT_EQ(clean->layers.size(), m.module->dispatches.size());
    for (const triage::LayerReport& layer : clean->layers) {
      EXPECT_TRUE(layer.compared) << layer.dispatch_name;
      EXPECT_TRUE(layer.passed()) << layer.dispatch_name << ": "
                                  << format_compare_result(layer.result, layer.tolerance);
    }
  }

  const std::vector<std::string> kinds = {"nan", "inf", "zero", "perturb=0.01"};
  size_t variant = 0;
  for (const Place& place : m.places()) {
    std::printf(
        "%s B=%lld, %s: dispatch %d '%s' <- %s\n", c.model.c_str(), static_cast<long long>(c.batch),
        place.what.c_str(), place.dispatch, m.module->dispatches[place.dispatch].name.c_str(),
        fmt::format("{}", fmt::join(m.module->dispatches[place.dispatch].origins, ", ")).c_str());
    for (const std::string& kind : kinds) {
      const std::string fault =
          "dispatch:" + selector(*m.module, place.dispatch, variant++) + ":" + kind;
      SCOPED_TRACE(place.what + ", KILN_FAULT=" + fault);
      triage::TriageOptions faulted = options;
      faulted.fault = triage::parse_fault(fault).value();
      auto result = triage::Triage(m.module, &m.graph, faulted).run(inputs, *reference);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      ASSERT_TRUE(result->first_divergence.has_value());
      const triage::Divergence& d = *result->first_divergence;
      const triage::LayerReport& layer = result->layers[d.layer];
      EXPECT_EQ(d.dispatch, place.dispatch) << "named " << layer.dispatch_name;
      EXPECT_EQ(layer.nodes, m.module->dispatches[place.dispatch].origins);
      EXPECT_TRUE(d.at_fault) << d.explanation;
      EXPECT_TRUE(d.isolated_run);
      if (kind == "nan" || kind == "inf") {
        EXPECT_EQ(layer.nonfinite(), layer.result.count);
      } else {
        EXPECT_EQ(layer.nonfinite(), 0);
        EXPECT_GT(layer.result.mismatches, 0);
      }
      // Every earlier layer matched.
      for (size_t i = 0; i < d.layer; ++i)
        EXPECT_TRUE(result->layers[i].passed()) << result->layers[i].dispatch_name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ResNet50, TriageFaults,
                         ::testing::Values(Case{"resnet50-v1-12", 1}, Case{"resnet50-v1-12", 3},
                                           Case{"resnet50-v2-7", 1}, Case{"resnet50-v2-7", 3}),
                         [](const auto& info) {
                           std::string name =
                               info.param.model + "_b" + std::to_string(info.param.batch);
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace kiln
