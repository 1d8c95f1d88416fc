#include "kiln/hal/host_allocator.h"

#include <cstdlib>

#include "kiln/base/aligned_memory.h"

namespace kiln::hal {
namespace {

// Owns its aligned block.
class OwnedHostBuffer : public Buffer {
 public:
  OwnedHostBuffer(std::byte* data, size_t size)
      : Buffer(size, MemoryType::kDeviceLocalHostVisible, data) {}
  ~OwnedHostBuffer() override { std::free(host_data()); }
};

// A caller's memory, not owned.
class WrappedHostBuffer : public Buffer {
 public:
  WrappedHostBuffer(std::byte* data, size_t size)
      : Buffer(size, MemoryType::kDeviceLocalHostVisible, data) {}
};

}  // namespace

StatusOr<std::unique_ptr<Buffer>> HostAllocator::allocate(size_t bytes, MemoryType wanted) {
  if (!has_memory_type(MemoryType::kDeviceLocalHostVisible, wanted)) {
    return invalid_argument("host memory has no memory type {:#x}", static_cast<unsigned>(wanted));
  }
  const size_t rounded = (bytes + 63) / 64 * 64;
  std::byte* data = nullptr;
  if (rounded > 0) {
    data = static_cast<std::byte*>(allocate_aligned_memory(rounded));
    if (data == nullptr) return out_of_range("cannot allocate a {}-byte buffer", bytes);
  }
  return std::unique_ptr<Buffer>(std::make_unique<OwnedHostBuffer>(data, bytes));
}

std::unique_ptr<Buffer> HostAllocator::wrap_host(std::byte* data, size_t bytes) {
  return std::make_unique<WrappedHostBuffer>(data, bytes);
}

}  // namespace kiln::hal
