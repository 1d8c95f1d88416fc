// Arena planning: places every buffer at a 64-byte aligned offset in one arena so that buffers
// whose lifetimes overlap never share bytes, and buffers whose lifetimes are disjoint may.
// Lifetimes are inclusive dispatch-index intervals [first, last]: a dispatch's outputs therefore
// never alias its inputs, unless a request asks for exactly that with `same_as` (a backend that
// can write an output in place over an input it reads last, hal::Executable::storage_shared_with).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kiln::runtime {

struct BufferRequest {
  size_t bytes = 0;   // 0: not placed in the arena
  int32_t first = 0;  // dispatch that writes it
  int32_t last = 0;   // last dispatch that reads it (>= first)
  // Index of another request whose bytes this buffer takes over (same offset), or -1. The
  // buffers of such a chain are placed as one, live from the earliest first to the latest last.
  int32_t same_as = -1;
};

struct ArenaPlan {
  std::vector<size_t> offsets;  // one per request; 0 for requests of 0 bytes
  size_t arena_bytes = 0;
};

// Ranges [first, end) of dispatches whose work a run interleaves (hal::Executable::
// interleaved_dispatches): every request whose lifetime meets a range is made to live over the
// whole range, since the range's dispatches run by turns.
void extend_over_ranges(std::vector<BufferRequest>& requests,
                        const std::vector<std::pair<int32_t, int32_t>>& ranges);

// Greedy: largest buffers first, each at the lowest offset that fits between the buffers already
// placed whose lifetimes overlap. Deterministic for the same requests. A `same_as` out of range
// is ignored.
ArenaPlan plan_arena(const std::vector<BufferRequest>& requests);

}  // namespace kiln::runtime
