#include "kiln/base/aligned_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace kiln {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kPage = 4096;

size_t round_up(size_t bytes, size_t unit) { return (bytes + unit - 1) / unit * unit; }

}  // namespace

void* allocate_aligned_memory(size_t bytes, size_t alignment) {
  const bool huge = bytes >= kHugePageThreshold;
  const size_t align = huge ? std::max(alignment, kHugePage) : alignment;
  if (bytes > SIZE_MAX - alignment) return nullptr;
  // The size need not be a multiple of a huge page: the tail past the last 2 MiB boundary simply
  // gets small pages.
  void* raw = nullptr;
  if (::posix_memalign(&raw, align, std::max(round_up(bytes, alignment), alignment)) != 0) {
    return nullptr;
  }
  // Only a hint: without transparent huge pages the memory works the same with small pages.
  if (raw != nullptr && huge) ::madvise(raw, round_up(bytes, kPage), MADV_HUGEPAGE);
  return raw;
}

}  // namespace kiln
