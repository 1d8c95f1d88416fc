#include "kiln/runtime/memory_planner.h"

#include <gtest/gtest.h>

#include <random>

namespace kiln::runtime {
namespace {

bool ranges_overlap(size_t a, size_t a_bytes, size_t b, size_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

TEST(MemoryPlanner, ChainReusesMemory) {
  // a -> b -> c -> d: each buffer only overlaps its neighbours, so two slots suffice.
  std::vector<BufferRequest> requests = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  ArenaPlan plan = plan_arena(requests);
  EXPECT_EQ(plan.arena_bytes, 2 * 1024u);
  for (size_t offset : plan.offsets) EXPECT_EQ(offset % 64, 0u);
}

TEST(MemoryPlanner, LiveBuffersNeverOverlapRandomized) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferRequest> requests;
    for (int i = 0; i < 40; ++i) {
      int32_t first = static_cast<int32_t>(rng() % 30);
      int32_t last = first + static_cast<int32_t>(rng() % 6);
      requests.push_back({static_cast<size_t>(rng() % 5000), first, last});
    }
    ArenaPlan plan = plan_arena(requests);
    size_t total = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      total += (requests[i].bytes + 63) / 64 * 64;
      EXPECT_LE(plan.offsets[i] + requests[i].bytes, plan.arena_bytes);
      for (size_t j = i + 1; j < requests.size(); ++j) {
        if (requests[i].bytes == 0 || requests[j].bytes == 0) continue;
        bool live_together =
            requests[i].first <= requests[j].last && requests[j].first <= requests[i].last;
        if (live_together) {
          EXPECT_FALSE(ranges_overlap(plan.offsets[i], requests[i].bytes, plan.offsets[j],
                                      requests[j].bytes))
              << "trial " << trial << " buffers " << i << " and " << j;
        }
      }
    }
    EXPECT_LE(plan.arena_bytes, total);
  }
}

TEST(MemoryPlanner, ZeroByteRequestsAreNotPlaced) {
  ArenaPlan plan = plan_arena({{0, 0, 5}, {128, 0, 5}});
  EXPECT_EQ(plan.arena_bytes, 128u);
  EXPECT_EQ(plan.offsets[0], 0u);
}

TEST(MemoryPlanner, SameAsChainsShareOffsetsAndStayApartFromOverlappingBuffers) {
  // r [0,2] is overwritten in place by y [2,4], which z [4,5] overwrites in turn; o [1,3]
  // overlaps the chain and must not share its bytes.
  std::vector<BufferRequest> requests = {
      {1000, 0, 2}, {1000, 2, 4, 0}, {500, 4, 5, 1}, {800, 1, 3}};
  ArenaPlan plan = plan_arena(requests);
  EXPECT_EQ(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.offsets[1], plan.offsets[2]);
  EXPECT_FALSE(ranges_overlap(plan.offsets[0], 1000, plan.offsets[3], 800));
  EXPECT_EQ(plan.arena_bytes, 1024u + 832u);
}

TEST(MemoryPlanner, SameAsOutOfRangeIsIgnored) {
  ArenaPlan plan = plan_arena({{128, 0, 1, 7}, {128, 0, 1, -3}});
  EXPECT_EQ(plan.arena_bytes, 256u);
}

TEST(MemoryPlanner, BuffersAnInterleavedRangeTouchesLiveOverAllOfIt) {
  // Dispatches 2..4 run by turns (one sample at a time): a buffer read at 2 and one written at 4
  // must not share bytes, nor may one made at 3 and read at 6 with one read only at 2.
  std::vector<BufferRequest> requests = {
      {1000, 0, 2},  // made before the range, last read inside it
      {1000, 4, 5},  // made inside, read after
      {1000, 3, 3},  // made and read inside
      {1000, 0, 1},  // before the range: untouched
      {1000, 6, 7},  // after it: untouched
      {1000, 1, 9},  // spans it: unchanged
  };
  extend_over_ranges(requests, {{2, 5}, {8, 8}});  // an empty range changes nothing
  const std::vector<std::pair<int32_t, int32_t>> lifetimes = {{0, 4}, {2, 5}, {2, 4},
                                                              {0, 1}, {6, 7}, {1, 9}};
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(std::make_pair(requests[i].first, requests[i].last), lifetimes[i]) << i;
  }
  const ArenaPlan plan = plan_arena(requests);
  EXPECT_FALSE(ranges_overlap(plan.offsets[0], 1000, plan.offsets[1], 1000));
  EXPECT_FALSE(ranges_overlap(plan.offsets[0], 1000, plan.offsets[2], 1000));
  EXPECT_FALSE(ranges_overlap(plan.offsets[1], 1000, plan.offsets[2], 1000));
}

}  // namespace
}  // namespace kiln::runtime
