// The Session's plan cache on real modules: a plan per set of sizes, least recently used first
// out, bounded by count and bytes (runtime/plan_cache.h); a plan prepared again after eviction
// gives the same bits; a plan over the byte bound alone still runs; the arena shrinks once the
// plan that needed it is gone; stages whose sizes come from data follow the same bounds.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kiln/compiler/pipeline.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/module/module.h"
#include "kiln/runtime/session.h"

namespace kiln {
namespace {

Tensor random_f32(ConcreteShape dims, uint32_t seed) {
  Tensor t = Tensor::create(DType::kF32, std::move(dims)).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& v : t.mutable_values<float>()) v = dist(rng);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.byte_size()) == 0;
}

ir::ValueId add_value(ir::Graph& g, const std::string& name, DType dtype = DType::kF32) {
  return g.add_value(ir::Value{name, dtype, {}, std::nullopt, std::nullopt, {}});
}

// x[1,2,6,W] -> Conv 3x3 pad 1 (2->4) -> Relu -> Softmax over W: every width is a new plan.
std::shared_ptr<const module::ModuleContents> compile_width_model() {
  ir::Graph g;
  g.name = "variable_width";
  const ir::ValueId x =
      g.add_input("x", DType::kF32, {DimExpr(1), DimExpr(2), DimExpr(6), DimExpr::symbol("W")});
  const ir::ValueId w = g.add_constant("w", random_f32({4, 2, 3, 3}, 7));
  const ir::ValueId conv = add_value(g, "conv"), relu = add_value(g, "relu"),
                    probs = add_value(g, "probs");
  ir::Node c{"conv", "Conv", {x, w}, {conv}, {}, {}, {}};
  c.attributes.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  g.add_node(std::move(c));
  g.add_node(ir::Node{"relu", "Relu", {conv}, {relu}, {}, {}, {}});
  ir::Node s{"softmax", "Softmax", {relu}, {probs}, {}, {}, {}};
  s.attributes.set("axis", int64_t{-1});
  g.add_node(std::move(s));
  g.add_output(probs);
  KILN_CHECK(graph_eval::infer_graph(g).ok());
  auto contents = compiler::compile(std::move(g), {});
  KILN_CHECK(contents.ok());
  return std::make_shared<const module::ModuleContents>(std::move(contents).value());
}

std::unique_ptr<runtime::Session> open(std::shared_ptr<const module::ModuleContents> m,
                                       size_t max_plans, uint64_t max_plan_bytes) {
  runtime::SessionOptions options;
  options.threads = 1;
  options.max_plans = max_plans;
  options.max_plan_bytes = max_plan_bytes;
  auto session = runtime::Session::create(std::move(m), options);
  KILN_CHECK(session.ok());
  return std::move(session).value();
}

Tensor run_at(runtime::Session& session, int64_t width) {
  std::vector<Tensor> in = {random_f32({1, 2, 6, width}, static_cast<uint32_t>(width))};
  auto out = session.run(in);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? (*out)[0] : Tensor();
}

constexpr uint64_t kManyBytes = uint64_t{1} << 40;

TEST(PlanCache, DefaultsAreResolved) {
  auto session = open(compile_width_model(), 0, 0);
  EXPECT_EQ(session->plan_cache_limits().max_plans, runtime::kDefaultMaxPlans);
  EXPECT_EQ(session->plan_cache_limits().max_bytes, runtime::kDefaultMaxPlanBytes);
}

TEST(PlanCache, EvictsTheLeastRecentlyUsedPlanAndPreparesItAgainBitForBit) {
  auto session = open(compile_width_model(), 2, kManyBytes);
  const Tensor first5 = run_at(*session, 5);
  run_at(*session, 6);
  EXPECT_EQ(session->plan_cache_stats().plans, 2u);
  run_at(*session, 5);  // a hit: 5 is now more recent than 6
  EXPECT_EQ(session->plan_cache_stats().hits, 1u);
  run_at(*session, 7);  // evicts 6, the least recently used
  const runtime::PlanCacheStats stats = session->plan_cache_stats();
  EXPECT_EQ(stats.plans, 2u);
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.misses, 3u);
  run_at(*session, 5);  // still held
  EXPECT_EQ(session->plan_cache_stats().hits, 2u);
  run_at(*session, 6);  // prepared again; evicts 7
  EXPECT_EQ(session->plan_cache_stats().misses, 4u);
  run_at(*session, 7);  // prepared again; evicts 5
  EXPECT_EQ(session->plan_cache_stats().misses, 5u);
  const Tensor again5 = run_at(*session, 5);  // prepared again after its eviction
  EXPECT_EQ(session->plan_cache_stats().misses, 6u);
  EXPECT_EQ(session->plan_cache_stats().evictions, 4u);
  EXPECT_TRUE(same_bits(first5, again5));
}

TEST(PlanCache, CountBoundHoldsOverManySizes) {
  auto m = compile_width_model();
  auto bounded = open(m, 3, kManyBytes);
  auto unbounded = open(m, 1000, kManyBytes);
  for (int64_t width = 1; width <= 40; ++width) {
    const Tensor a = run_at(*bounded, width);
    const Tensor b = run_at(*unbounded, width);
    EXPECT_TRUE(same_bits(a, b)) << "width " << width;
    EXPECT_LE(bounded->plan_cache_stats().plans, 3u);
  }
  EXPECT_EQ(bounded->plan_cache_stats().evictions, 37u);
  EXPECT_EQ(unbounded->plan_cache_stats().plans, 40u);
  EXPECT_GT(unbounded->plan_cache_stats().bytes, bounded->plan_cache_stats().bytes);
}

TEST(PlanCache, ByteBoundHoldsOverManySizes) {
  auto m = compile_width_model();
  // What one plan costs on this backend, to set a bound of about three plans.
  auto probe = open(m, 1000, kManyBytes);
  run_at(*probe, 20);
  const uint64_t one = probe->plan_cache_stats().bytes;
  ASSERT_GT(one, 0u);
  auto session = open(m, 1000, one * 3 + one / 2);
  for (int64_t width = 1; width <= 30; ++width) {
    run_at(*session, width);
    const runtime::PlanCacheStats stats = session->plan_cache_stats();
    EXPECT_LE(stats.bytes, one * 3 + one / 2) << "width " << width;
    EXPECT_GE(stats.plans, 1u);
  }
  EXPECT_LT(session->plan_cache_stats().plans, 30u);
  EXPECT_GT(session->plan_cache_stats().evictions, 0u);
}

TEST(PlanCache, APlanOverTheByteBoundAloneStillRunsAndIsKept) {
  auto m = compile_width_model();
  auto reference = open(m, 0, 0);
  auto session = open(m, 8, 1);  // every plan is over the bound
  const Tensor a = run_at(*session, 9);
  EXPECT_TRUE(same_bits(a, run_at(*reference, 9)));
  EXPECT_EQ(session->plan_cache_stats().plans, 1u);
  EXPECT_GT(session->plan_cache_stats().bytes, 1u);
  run_at(*session, 9);  // kept: a hit, not prepared again
  EXPECT_EQ(session->plan_cache_stats().hits, 1u);
  const Tensor b = run_at(*session, 10);  // replaces it
  EXPECT_TRUE(same_bits(b, run_at(*reference, 10)));
  EXPECT_EQ(session->plan_cache_stats().plans, 1u);
  EXPECT_EQ(session->plan_cache_stats().evictions, 1u);
}

TEST(PlanCache, TheArenaShrinksOnceThePlanThatNeededItIsEvicted) {
  auto session = open(compile_width_model(), 2, kManyBytes);
  run_at(*session, 512);
  const size_t large = session->arena_bytes();
  run_at(*session, 4);
  EXPECT_EQ(session->arena_bytes(), large);  // the 512 plan is still held
  run_at(*session, 5);                       // evicts it
  EXPECT_LT(session->arena_bytes(), large);
  const Tensor small = run_at(*session, 4);
  EXPECT_TRUE(same_bits(small, run_at(*open(compile_width_model(), 0, 0), 4)));
}

// x[4] -> NonZero(Greater(x, 0)) [1,P] -> Add(nz, nz): the second stage has a plan per P.
std::shared_ptr<const module::ModuleContents> compile_nonzero_model() {
  ir::Graph g;
  g.name = "nonzero";
  const ir::ValueId x = g.add_input("x", DType::kF32, {DimExpr(6)});
  Tensor zero = Tensor::create(DType::kF32, {}).value();
  zero.mutable_values<float>()[0] = 0.f;
  const ir::ValueId z = g.add_constant("zero", zero);
  const ir::ValueId mask = add_value(g, "mask", DType::kBool), nz = add_value(g, "nz", DType::kI64),
                    doubled = add_value(g, "doubled", DType::kI64);
  g.add_node(ir::Node{"greater", "Greater", {x, z}, {mask}, {}, {}, {}});
  g.add_node(ir::Node{"nonzero", "NonZero", {mask}, {nz}, {}, {}, {}});
  g.add_node(ir::Node{"double", "Add", {nz, nz}, {doubled}, {}, {}, {}});
  g.add_output(doubled);
  KILN_CHECK(graph_eval::infer_graph(g).ok());
  auto contents = compiler::compile(std::move(g), {});
  KILN_CHECK(contents.ok());
  return std::make_shared<const module::ModuleContents>(std::move(contents).value());
}

TEST(PlanCache, DataDependentStagesFollowTheSameBound) {
  auto session = open(compile_nonzero_model(), 2, kManyBytes);
  for (int round = 0; round < 2; ++round) {
    for (int positives = 0; positives <= 6; ++positives) {
      Tensor x = Tensor::create(DType::kF32, {6}).value();
      auto v = x.mutable_values<float>();
      for (int i = 0; i < 6; ++i) v[i] = i < positives ? 1.f : -1.f;
      std::vector<Tensor> in = {x};
      auto out = session->run(in);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      ASSERT_EQ((*out)[0].shape(), (ConcreteShape{1, positives}));
      auto got = (*out)[0].values<int64_t>();
      for (int i = 0; i < positives; ++i) EXPECT_EQ(got[i], 2 * i);
      EXPECT_LE(session->plan_cache_stats().plans, 2u);
    }
  }
  EXPECT_GT(session->plan_cache_stats().evictions, 0u);
}

}  // namespace
}  // namespace kiln
