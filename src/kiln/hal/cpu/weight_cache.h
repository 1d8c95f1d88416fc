// WeightCache: constants reordered into the layout a primitive wants, shared by every executable
// a device prepares (batch 1 and batch 8 of one model reuse the same reordered weights).
//
// Entries are keyed by (source data address, source layout, target layout). An entry lives as
// long as some executable holds it; each holder also keeps the source Tensor (and so its storage)
// alive, so an address cannot be reused by other data while an entry for it exists. Once
// reordered, the source is let go from resident memory (Tensor::release_resident: a mapped
// module's pages are read back from the file only if touched again).
// Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln::hal::cpu {

// A reordered copy of a constant; immutable once built.
class ReorderedConstant {
 public:
  ReorderedConstant(Tensor source, dnnl::memory::desc layout, std::byte* data);
  ~ReorderedConstant();
  ReorderedConstant(const ReorderedConstant&) = delete;
  ReorderedConstant& operator=(const ReorderedConstant&) = delete;

  const dnnl::memory::desc& layout() const { return layout_; }
  std::byte* data() const { return data_; }

 private:
  Tensor source_;  // keeps the original bytes (and thus the cache key's address) alive
  dnnl::memory::desc layout_;
  std::byte* data_;  // 64-byte aligned, owned
};

class WeightCache {
 public:
  // Returns `constant` (plain data described by `source` — dims may regroup the tensor's,
  // e.g. goihw for grouped conv weights) in layout `target` (possibly of another data type),
  // reordering it on first use.
  StatusOr<std::shared_ptr<const ReorderedConstant>> get(const Tensor& constant,
                                                         const dnnl::memory::desc& source,
                                                         const dnnl::memory::desc& target,
                                                         const dnnl::engine& engine);
  // Returns `constant` (plain f32 data described by `source`) transformed by `transform` into
  // `target.get_size()` bytes, computing it on first use. `target` names the transformed form: a
  // kernel's own packing gets a descriptor no reorder of `source` can have (other dims), so the
  // key cannot meet get()'s entries.
  using Transform = std::function<void(const std::byte* source, std::byte* target)>;
  StatusOr<std::shared_ptr<const ReorderedConstant>> get_transformed(
      const Tensor& constant, const dnnl::memory::desc& source, const dnnl::memory::desc& target,
      const Transform& transform);
  // Live entries (for tests).
  size_t size() const;

 private:
  StatusOr<std::shared_ptr<const ReorderedConstant>> find_or_make(
      const Tensor& constant, const dnnl::memory::desc& source, const dnnl::memory::desc& target,
      const std::function<Status(std::byte* target)>& fill);

  struct Entry {
    const std::byte* data;
    dnnl::memory::desc source;
    dnnl::memory::desc target;
    std::weak_ptr<const ReorderedConstant> value;
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace kiln::hal::cpu
