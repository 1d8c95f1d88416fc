#include "kiln/runtime/memory_planner.h"

#include <algorithm>
#include <numeric>

namespace kiln::runtime {
namespace {

constexpr size_t kAlignment = 64;

size_t align_up(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

bool overlaps(const BufferRequest& a, const BufferRequest& b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

ArenaPlan plan_arena(const std::vector<BufferRequest>& requests) {
  ArenaPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });

  std::vector<size_t> placed;
  for (size_t index : order) {
    const BufferRequest& request = requests[index];
    if (request.bytes == 0) continue;
    const size_t size = align_up(request.bytes);
    // Busy ranges among live-overlapping buffers, sorted by offset; take the first gap that fits.
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t other : placed) {
      if (overlaps(request, requests[other])) {
        busy.emplace_back(plan.offsets[other], plan.offsets[other] + align_up(requests[other].bytes));
      }
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    plan.offsets[index] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(index);
  }
  return plan;
}

}  // namespace kiln::runtime
