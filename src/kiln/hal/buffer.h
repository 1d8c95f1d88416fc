// Device memory: a Buffer is a range of bytes a device owns or can address, with the memory
// types it has. A backend's kernels read and write only Buffers (RunArgs); the host reaches a
// buffer's bytes directly only when it is host-visible, otherwise through Queue::write/read.
//
// On a device that computes in host memory (the CPU) every buffer is both device-local and
// host-visible, and host memory the caller owns can be bound as a buffer without a copy
// (Allocator::wrap_host): tensors go in and out zero-copy.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::hal {

// Memory types, a bit set. kDeviceLocal: the device's fast memory. kHostVisible: the host may
// read and write the bytes through Buffer::host_data() (coherent; no flush needed).
enum class MemoryType : uint8_t {
  kNone = 0,
  kDeviceLocal = 1 << 0,
  kHostVisible = 1 << 1,
  kDeviceLocalHostVisible = kDeviceLocal | kHostVisible,
};

constexpr MemoryType operator|(MemoryType a, MemoryType b) {
  return static_cast<MemoryType>(static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}
// Whether `have` includes every type in `wanted`.
constexpr bool has_memory_type(MemoryType have, MemoryType wanted) {
  return (static_cast<uint8_t>(have) & static_cast<uint8_t>(wanted)) ==
         static_cast<uint8_t>(wanted);
}

// A device buffer. Backends derive from it to attach their own handles (a GPU's memory object);
// a host-visible buffer passes its host address to this base. Not copyable; the allocator that
// made it must outlive it.
class Buffer {
 public:
  Buffer(size_t size, MemoryType type, std::byte* host_data)
      : size_(size), type_(type), host_data_(host_data) {}
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  size_t size() const { return size_; }
  MemoryType memory_type() const { return type_; }
  // The bytes' host address for the buffer's whole life when it is host-visible; else null.
  std::byte* host_data() const { return host_data_; }

 private:
  size_t size_;
  MemoryType type_;
  std::byte* host_data_;
};

// A place in a buffer: what a run binds a value or its scratch space to. A null buffer binds
// nothing.
struct BufferRef {
  Buffer* buffer = nullptr;
  size_t offset = 0;

  // The host address of the place, or null when the buffer is null or not host-visible.
  std::byte* host_data() const {
    return buffer != nullptr && buffer->host_data() != nullptr ? buffer->host_data() + offset
                                                               : nullptr;
  }
};

}  // namespace kiln::hal
