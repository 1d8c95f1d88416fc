// Allocator: where a device's buffers come from. The runtime asks its device for the arena of
// activations (and kernels' temporaries) and for the buffers of graph inputs and outputs; it
// never allocates device memory itself. Thread-safe (device.h).
#pragma once

#include <cstddef>
#include <memory>

#include "kiln/base/status.h"
#include "kiln/hal/buffer.h"

namespace kiln::hal {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // A buffer of `bytes` bytes (0 allowed), 64-byte aligned, whose memory type includes `wanted`.
  // Contents are undefined. Errors: a memory type the device does not have, out of memory
  // (naming the size).
  virtual StatusOr<std::unique_ptr<Buffer>> allocate(size_t bytes, MemoryType wanted) = 0;
  // Binds `bytes` bytes of host memory at `data`, which the caller owns and keeps alive and
  // unmoved while the buffer lives, as a buffer the device reads and writes in place (no copy).
  // Null when the device cannot address host memory: the caller then allocates a device buffer
  // and copies through Queue::write / Queue::read.
  virtual std::unique_ptr<Buffer> wrap_host(std::byte* data, size_t bytes) { return nullptr; }
};

}  // namespace kiln::hal
