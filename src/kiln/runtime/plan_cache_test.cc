#include "kiln/runtime/plan_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::runtime {
namespace {

using Cache = PlanCache<int, std::string>;

std::unique_ptr<std::string> plan(int key) {
  return std::make_unique<std::string>(std::to_string(key));
}

TEST(PlanCacheUnit, EvictsLeastRecentlyUsedFirst) {
  Cache cache({3, 1000});
  std::vector<int> evicted;
  auto on_evict = [&](const int& key, const std::string& p) {
    EXPECT_EQ(p, std::to_string(key));
    evicted.push_back(key);
  };
  for (int k : {1, 2, 3}) cache.insert(k, plan(k), 10, on_evict);
  EXPECT_EQ(cache.keys(), (std::vector<int>{3, 2, 1}));
  ASSERT_NE(cache.find(1), nullptr);  // 1 becomes the most recent
  EXPECT_EQ(cache.keys(), (std::vector<int>{1, 3, 2}));
  cache.insert(4, plan(4), 10, on_evict);
  cache.insert(5, plan(5), 10, on_evict);
  EXPECT_EQ(evicted, (std::vector<int>{2, 3}));
  EXPECT_EQ(cache.keys(), (std::vector<int>{5, 4, 1}));
  EXPECT_EQ(cache.find(2), nullptr);
  EXPECT_EQ(*cache.find(4), "4");
  const PlanCacheStats& s = cache.stats();
  EXPECT_EQ(s.plans, 3u);
  EXPECT_EQ(s.bytes, 30u);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 1u);
}

TEST(PlanCacheUnit, ByteBoundEvictsUntilItHolds) {
  Cache cache({100, 100});
  cache.insert(1, plan(1), 40);
  cache.insert(2, plan(2), 40);
  EXPECT_EQ(cache.stats().plans, 2u);
  cache.insert(3, plan(3), 50);  // 130 > 100: 1 goes
  EXPECT_EQ(cache.keys(), (std::vector<int>{3, 2}));
  EXPECT_EQ(cache.stats().bytes, 90u);
  cache.insert(4, plan(4), 100);  // only 4 fits
  EXPECT_EQ(cache.keys(), (std::vector<int>{4}));
  EXPECT_EQ(cache.stats().bytes, 100u);
  EXPECT_EQ(cache.stats().evictions, 3u);
}

TEST(PlanCacheUnit, APlanOverTheByteBoundIsKeptAlone) {
  Cache cache({100, 100});
  cache.insert(1, plan(1), 10);
  std::string* big = cache.insert(2, plan(2), 500);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(*big, "2");
  EXPECT_EQ(cache.keys(), (std::vector<int>{2}));
  EXPECT_EQ(cache.find(2), big);
  cache.insert(3, plan(3), 10);  // the big one goes: 510 > 100
  EXPECT_EQ(cache.keys(), (std::vector<int>{3}));
}

TEST(PlanCacheUnit, ACountOfZeroMeansOne) {
  Cache cache({0, 1000});
  EXPECT_EQ(cache.limits().max_plans, 1u);
  cache.insert(1, plan(1), 1);
  cache.insert(2, plan(2), 1);
  EXPECT_EQ(cache.keys(), (std::vector<int>{2}));
}

}  // namespace
}  // namespace kiln::runtime
