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

// Request index -> index of the group it is placed with (its `same_as` chain's root).
std::vector<size_t> group_roots(const std::vector<BufferRequest>& requests) {
  std::vector<size_t> parent(requests.size());
  std::iota(parent.begin(), parent.end(), size_t{0});
  auto find = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  for (size_t i = 0; i < requests.size(); ++i) {
    const int32_t other = requests[i].same_as;
    if (other < 0 || static_cast<size_t>(other) >= requests.size()) continue;
    const size_t a = find(i), b = find(static_cast<size_t>(other));
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
  for (size_t i = 0; i < requests.size(); ++i) parent[i] = find(i);
  return parent;
}

}  // namespace

void extend_over_ranges(std::vector<BufferRequest>& requests,
                        const std::vector<std::pair<int32_t, int32_t>>& ranges) {
  for (const auto& [first, end] : ranges) {
    if (end <= first) continue;
    for (BufferRequest& r : requests) {
      if (r.first < end && r.last >= first) {
        r.first = std::min(r.first, first);
        r.last = std::max(r.last, end - 1);
      }
    }
  }
}

ArenaPlan plan_arena(const std::vector<BufferRequest>& requests) {
  // Merge same_as chains into one request each, plan those, then hand each member its group's
  // offset.
  const std::vector<size_t> root = group_roots(requests);
  std::vector<BufferRequest> groups(requests.size());
  std::vector<bool> seen(requests.size(), false);
  for (size_t i = 0; i < requests.size(); ++i) {
    BufferRequest& g = groups[root[i]];
    const BufferRequest& r = requests[i];
    if (r.bytes == 0) continue;
    if (!seen[root[i]]) {
      g = BufferRequest{r.bytes, r.first, r.last, -1};
      seen[root[i]] = true;
    } else {
      g.bytes = std::max(g.bytes, r.bytes);
      g.first = std::min(g.first, r.first);
      g.last = std::max(g.last, r.last);
    }
  }

  ArenaPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return groups[a].bytes > groups[b].bytes; });

  std::vector<size_t> group_offset(groups.size(), 0);
  std::vector<size_t> placed;
  for (size_t index : order) {
    const BufferRequest& request = groups[index];
    if (request.bytes == 0) continue;
    const size_t size = align_up(request.bytes);
    // Busy ranges among live-overlapping buffers, sorted by offset; take the first gap that fits.
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t other : placed) {
      if (overlaps(request, groups[other])) {
        busy.emplace_back(group_offset[other], group_offset[other] + align_up(groups[other].bytes));
      }
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    group_offset[index] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(index);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].bytes > 0) plan.offsets[i] = group_offset[root[i]];
  }
  return plan;
}

}  // namespace kiln::runtime
