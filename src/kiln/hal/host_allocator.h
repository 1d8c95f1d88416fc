// HostAllocator: the allocator of a device that computes in host memory (cpu, null). Every buffer
// is device-local and host-visible: allocate() returns 64-byte aligned host memory (the arena is
// the same aligned_alloc block the runtime used to make itself), and wrap_host() binds a
// caller's memory without a copy, so tensors go in and out of a run zero-copy. It holds no state:
// thread-safe.
#pragma once

#include "kiln/hal/allocator.h"

namespace kiln::hal {

class HostAllocator : public Allocator {
 public:
  // Errors: `wanted` has a type other than device-local and host-visible (none), or the host is
  // out of memory (naming the size).
  StatusOr<std::unique_ptr<Buffer>> allocate(size_t bytes, MemoryType wanted) override;
  // Never null.
  std::unique_ptr<Buffer> wrap_host(std::byte* data, size_t bytes) override;
};

}  // namespace kiln::hal
