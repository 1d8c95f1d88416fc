// PlanCache: the prepared plans a run state keeps (run_state.h), least recently used first out,
// bounded by a count and by bytes. A model run at ever new sizes (a text recognizer at every image
// width, a stage whose sizes come from data) then holds a fixed budget instead of one plan per
// size.
//
// Each plan is inserted with its size in bytes: what evicting it frees (for the CPU backend its
// workspace, scratchpad and kernels; constants shared with other plans are not charged to any
// plan). After an insertion the least recently used plans are evicted until both bounds hold,
// except the plan just inserted, which always stays: a plan larger than max_bytes alone is kept
// as the only one, so runs at that size still work and do not prepare their plan again each time.
//
// Not thread-safe: each of a Session's run states has its own cache and runs one call at a time
// (a Session serves concurrent calls with as many states, session.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace kiln::runtime {

struct PlanCacheLimits {
  size_t max_plans = 0;    // >= 1
  uint64_t max_bytes = 0;  // a plan over this alone is still kept (see above)
};

struct PlanCacheStats {
  size_t plans = 0;        // held now
  uint64_t bytes = 0;      // their bytes
  uint64_t hits = 0;       // find() calls that found a plan
  uint64_t misses = 0;     // find() calls that did not
  uint64_t evictions = 0;  // plans evicted so far
};

template <typename Key, typename Plan>
class PlanCache {
 public:
  explicit PlanCache(PlanCacheLimits limits) : limits_(limits) {
    if (limits_.max_plans == 0) limits_.max_plans = 1;
  }

  const PlanCacheLimits& limits() const { return limits_; }
  const PlanCacheStats& stats() const { return stats_; }

  // The plan for `key`, made the most recently used; null when it is not held.
  Plan* find(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    ++stats_.hits;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->plan.get();
  }

  // Holds `plan` for `key` (which must not be held) as the most recently used, then evicts least
  // recently used plans until both limits hold or only this one is left. `on_evict` (optional)
  // sees each evicted plan before it is destroyed. Returns the plan, which stays valid until it
  // is evicted by a later insert().
  Plan* insert(const Key& key, std::unique_ptr<Plan> plan, uint64_t bytes,
               const std::function<void(const Key&, const Plan&)>& on_evict = {}) {
    order_.push_front(Entry{key, std::move(plan), bytes});
    index_[key] = order_.begin();
    stats_.plans = order_.size();
    stats_.bytes += bytes;
    while (order_.size() > 1 &&
           (order_.size() > limits_.max_plans || stats_.bytes > limits_.max_bytes)) {
      Entry& victim = order_.back();
      if (on_evict) on_evict(victim.key, *victim.plan);
      stats_.bytes -= victim.bytes;
      ++stats_.evictions;
      index_.erase(victim.key);
      order_.pop_back();
    }
    stats_.plans = order_.size();
    return order_.front().plan.get();
  }

  // Held keys, most recently used first.
  std::vector<Key> keys() const {
    std::vector<Key> out;
    out.reserve(order_.size());
    for (const Entry& e : order_) out.push_back(e.key);
    return out;
  }

  // Calls f(key, plan, bytes) for every held plan, most recently used first.
  template <typename F>
  void for_each(F&& f) const {
    for (const Entry& e : order_) f(e.key, *e.plan, e.bytes);
  }

 private:
  struct Entry {
    Key key;
    std::unique_ptr<Plan> plan;
    uint64_t bytes = 0;
  };
  PlanCacheLimits limits_;
  PlanCacheStats stats_;
  std::list<Entry> order_;  // most recently used first
  std::map<Key, typename std::list<Entry>::iterator> index_;
};

}  // namespace kiln::runtime
